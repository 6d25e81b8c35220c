"""SPAG's epochs (Cheng et al. 2024; seed 000 §2), written as the paper's algorithm.

    evaluation 0      the base model once (iteration 0)
    imitation 0       (with `spag.teacher_url`) a teacher plays both roles of
                      `spag.imitation_games` games; the base imitates the winners' turns
                      (`imitation_loss`): π_0. Without a teacher π_0 is the base.
    for k = 1..K (epochs; the policy π_{k−1}):
        games         a copy of π_{k−1} plays both roles of `spag.games` games on training
                      words, every message judged as it arrives; every episode is stored
        train         π_k from π_{k−1}: the offline self-play loss on the winners' turns
                      (`turn_rewards`, `spag_loss`, π_old = π_{k−1}) plus α times SFT on
                      `spag.sft_rows` instruction rows; the cosine of the two roles'
                      gradients is measured first
                      (`spag.roles: separate`: π is a pair, an attacker model and a
                      defender model; each plays and trains only its own role, with the
                      same SFT rows, and the math evaluation scores the defender)
        tournament    π_k against every earlier player (the base, π_0, π_1 ...) and the
                      scripted anchor, each pair in both role assignments on the same
                      held-out words; the win-rate matrix, its Bradley–Terry fit and the
                      exploitability are rebuilt from every tournament so far
        evaluation    the benchmarks of `eval` (the project's math evaluation: reasoning
                      measured outside the game), paired with every earlier iteration's

Each phase runs through the phase runner in the run folder (markers, resume, timing,
trackers, the watch's increment curve on the evaluation), and every commit rebuilds
report.md / report.html (`rzero.spag.report`). Departures from the official code are listed
in `rzero.spag.play`, `rzero.spag.objective` and docs/parity.md.
"""

from __future__ import annotations

import dataclasses
import shutil
from functools import partial
from pathlib import Path
from typing import Any

from rzero import preflight
from rzero.config import ConfigError, RZeroConfig
from rzero.data.sft import load_sft
from rzero.evaluation import evaluation_phase
from rzero.generation.backends import make_generator
from rzero.generation.interface import SamplingParams
from rzero.io import write_jsonl_atomic
from rzero.rundir import Run, release_memory
from rzero.selfplay import watch
from rzero.spag.game import (
    ATTACKER,
    ATTACKER_WINS,
    DEFENDER,
    DEFENDER_WINS,
    TIE,
    VIOLATION,
    is_guess,
    spells_out,
    words_of,
)
from rzero.spag.layout import LAYOUT
from rzero.spag.play import ModelPlayer, ScriptedPlayer, collect
from rzero.spag.report import rebuild
from rzero.spag.train import (
    game_rows,
    imitation_update,
    role_gradient_cosine,
    selfplay_update,
    updates_for,
)
from rzero.spag.words import candidate_words, is_eval_word, target_words
from rzero.stats import mean

SCRIPTED = "scripted"


def game_stats(records: list[dict[str, Any]], match: str = "word") -> dict[str, Any]:
    """Counts and rates of a batch of games: outcomes, length (messages), words per turn by
    role, and the cheating probes (attacker turns that spell or split the word; defender
    guesses, and guesses made at the defender's first turn)."""
    n = len(records)
    counts = {
        o: sum(r["outcome"] == o for r in records)
        for o in (ATTACKER_WINS, DEFENDER_WINS, TIE, VIOLATION)
    }
    turns = {
        role: [t for r in records for t in r["turns"] if t["role"] == role]
        for role in (ATTACKER, DEFENDER)
    }
    guesses = [
        (r, i)
        for r in records
        for i, t in enumerate(r["turns"])
        if t["role"] == DEFENDER and is_guess(t["text"], match)
    ]
    return {
        "games": n,
        **counts,
        **{f"{o}_rate": c / n if n else None for o, c in counts.items()},
        "mean_messages": mean([r["messages"] for r in records], empty=None),
        "attacker_words": mean([len(words_of(t["text"])) for t in turns[ATTACKER]], empty=None),
        "defender_words": mean([len(words_of(t["text"])) for t in turns[DEFENDER]], empty=None),
        "spelled": sum(
            spells_out(t["text"], r["target"])
            for r in records
            for t in r["turns"]
            if t["role"] == ATTACKER
        ),
        "attacker_turns": len(turns[ATTACKER]),
        "guesses": len(guesses),
        "first_turn_guesses": sum(i == 1 for _, i in guesses),
    }


Policy = dict[str, str]  # role -> checkpoint; one model (spag.roles shared) holds both


class SpagRun(Run):
    """SPAG on the run engine (`rzero.rundir.run.Run`)."""

    layout = LAYOUT

    def check_inputs(self) -> None:
        preflight.check_common(self.cfg)  # outside inputs, before anything is written
        s = self.cfg.spag
        self.separate = s.roles == "separate"
        # a bad SFT set or an empty word split fails before any write
        self.sft = (
            [
                (r.prompt, r.response)
                for r in load_sft(s.sft_data, s.sft_rows, key="spag.sft_data", need="spag.sft_rows")
            ]
            if s.sft_rows
            else []
        )
        words = candidate_words(s.vocabulary)
        held = sum(is_eval_word(w, s.eval_share) for w in words)
        if held == 0 or held == len(words):
            raise ConfigError(
                f"spag.vocabulary={s.vocabulary}, spag.eval_share={s.eval_share}: "
                f"{held} of {len(words)} words held out; both splits need words"
            )

    def before_commit(self) -> list:
        return [partial(watch.after_phase, self.cfg, self.rundir)]

    def rebuild(self) -> None:
        rebuild(self.rundir, self.cfg)

    def params(self, seed: int) -> SamplingParams:
        s = self.cfg.spag
        return SamplingParams(
            temperature=s.temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=s.max_new_tokens,
            seed=seed,
            stop=("\nAttacker:", "\nDefender:"),
        )

    def words(self, split: str, n: int, seed: int) -> list[str]:
        s = self.cfg.spag
        return target_words(split, n, seed, size=s.vocabulary, eval_share=s.eval_share)

    def records(self, games, **extra) -> list[dict[str, Any]]:
        s = self.cfg.spag
        return [g.record(s.max_turns, s.match, **extra) for g in games]

    # ------------------------------------------------------------ the phases

    def eval_phase(self, k: int, checkpoint: str) -> dict:
        return evaluation_phase(
            self.phases.generator(checkpoint), self.cfg, self.rundir.iter_dir(k) / "eval"
        ) | {"checkpoint": self.rundir.relative(checkpoint)}

    def imitation_phase(self, k: int) -> dict:
        """A teacher plays both roles; the base imitates the winners' turns."""
        from rzero.generation.backends import OpenAIGenerator

        s, cfg, it = self.cfg.spag, self.cfg, self.rundir.iter_dir(k)
        teacher = self.phases.track(
            OpenAIGenerator(
                [s.teacher_url],
                s.teacher_model,
                api_key_env=s.teacher_key_env or None,
                concurrency=cfg.generation.concurrency,
                timeout=cfg.generation.timeout,
                retries=cfg.generation.retries,
            )
        )
        player = ModelPlayer(teacher, self.params(cfg.run.seed * 7919), name="teacher")
        games = collect(
            {ATTACKER: player, DEFENDER: player},
            self.words("train", s.imitation_games, cfg.run.seed * 7919),
            s.max_turns,
            s.match,
            prefix="t",
        )
        records = self.records(games, split="train", attacker="teacher", defender="teacher")
        write_jsonl_atomic(it / "teacher_games.jsonl", records)
        rows = game_rows(records, s)
        out, work = it / "imitation", it / ".trainer_imitation"
        info: dict[str, Any] = {"metrics": game_stats(records, s.match), "rows": len(rows)}
        if not rows:  # the teacher decided no game: π_0 is the base
            info["checkpoint"] = self.rundir.relative(self.base)
            info["warning"] = "imitation: the teacher's games decided nothing; π_0 is the base"
            return info
        model, tokenizer = self.load(self.base)
        result = imitation_update(
            model,
            tokenizer,
            rows,
            s,
            work,
            seed=cfg.run.seed,
            model_cfg=cfg.model,
            report_to=cfg.run.report_to,
            save_to=out,
            save_steps=cfg.run.save_steps,
        )
        shutil.rmtree(work, ignore_errors=True)
        del model
        release_memory()
        info["checkpoint"] = self.rundir.relative(out)
        info["metrics"] |= {"updates": result["updates"], "rows": len(rows)}
        return info

    def two_engines(self) -> RZeroConfig:
        """The config of an engine that lives beside another one: on a GPU each vLLM engine
        takes half the usual share of the memory."""
        g = self.cfg.generation
        return dataclasses.replace(
            self.cfg,
            generation=dataclasses.replace(g, gpu_memory_utilization=g.gpu_memory_utilization / 2),
        )

    def games_phase(self, k: int, policy: Policy) -> dict:
        """A copy of π_{k−1} plays both roles of the epoch's games (with separate roles, its
        attacker model against its defender model)."""
        s, cfg = self.cfg.spag, self.cfg
        seed = cfg.run.seed * 7907 + k
        if policy[ATTACKER] == policy[DEFENDER]:
            player = ModelPlayer(self.phases.generator(policy[ATTACKER]), self.params(seed))
            players = {ATTACKER: player, DEFENDER: player}
        else:
            players = {
                role: ModelPlayer(
                    self.phases.track(make_generator(self.two_engines(), policy[role])),
                    self.params(seed),
                )
                for role in (ATTACKER, DEFENDER)
            }
        games = collect(players, self.words("train", s.games, seed), s.max_turns, s.match)
        name = self.player_name(k - 1)
        records = self.records(games, split="train", attacker=name, defender=name, epoch=k)
        write_jsonl_atomic(self.rundir.iter_dir(k) / "games.jsonl", records)
        return {
            "policy": {role: self.rundir.relative(c) for role, c in policy.items()},
            "metrics": game_stats(records, s.match),
        }

    def train_phase(self, k: int, policy: Policy) -> dict:
        """π_k from π_{k−1}: the offline self-play loss on the winners' turns, plus SFT (with
        separate roles, each role's model on its own role's turns)."""
        s, it = self.cfg.spag, self.rundir.iter_dir(k)
        rows = game_rows(self.rundir.rows(k, "games"), s)
        if not self.separate:
            info = self.train_model(k, policy[ATTACKER], rows, it / "model", "")
            return info | {"checkpoints": {role: info["checkpoint"] for role in policy}}
        parts = {
            role: self.train_model(
                k, policy[role], [r for r in rows if r["role"] == role], it / "model" / role, role
            )
            for role in (ATTACKER, DEFENDER)
        }
        metrics = {
            key: sum(p["metrics"].get(key, 0) for p in parts.values())
            for key in ("game_rows", "updates", "train_seconds")
        }
        metrics |= {
            "attacker_rows": parts[ATTACKER]["metrics"].get("game_rows", 0),
            "defender_rows": parts[DEFENDER]["metrics"].get("game_rows", 0),
            "sft_rows": len(self.sft),
            "gradient_cosine": None,
            **{f"{role}_final_loss": parts[role]["metrics"].get("final_loss") for role in parts},
        }
        info = {
            "checkpoint": parts[DEFENDER]["checkpoint"],  # the model the evaluation scores
            "checkpoints": {role: p["checkpoint"] for role, p in parts.items()},
            "start": {role: p["start"] for role, p in parts.items()},
            "gradient_cosine": None,
            "objective": s.objective,
            "roles": "separate",
            "train_log": [
                r | {"role": role} for role, p in parts.items() for r in p.get("train_log", [])
            ],
            "metrics": metrics,
        }
        warnings = [p["warning"] for p in parts.values() if p.get("warning")]
        return info | ({"warning": "; ".join(warnings)} if warnings else {})

    def train_model(
        self, k: int, start: str, rows: list[dict[str, Any]], out: Path, role: str
    ) -> dict:
        """One model's update from `start` on `rows` (winner turns) and the SFT rows, saved to
        `out`; the roles' gradient cosine when the model plays both (`role` empty)."""
        s, cfg = self.cfg.spag, self.cfg
        model, tokenizer = self.load(start)
        cosine = None if role else role_gradient_cosine(model, tokenizer, rows, s)
        work = out.parent / f".trainer_spag{'_' + role if role else ''}"
        whose = f"the {role}'s model" if role else "the policy"
        if not self.sft and (not rows or s.objective == "sft"):
            del model
            release_memory()
            return {
                "checkpoint": self.rundir.relative(start),
                "start": self.rundir.relative(start),
                "metrics": {"rows": 0, "updates": 0},
                "warning": f"train: epoch {k} has no rows to train {whose} ({len(rows)} "
                f"winner turns, objective {s.objective}, no SFT rows); "
                f"{whose} carries over",
            }
        # the SFT control spends the updates SPAG would on these rows on the SFT rows alone
        updates = updates_for(len(rows) + len(self.sft), s)
        trained = rows if s.objective == "spag" else []
        result = selfplay_update(
            model,
            tokenizer,
            trained,
            self.sft,
            s,
            work,
            seed=cfg.run.seed + k,
            model_cfg=cfg.model,
            report_to=cfg.run.report_to,
            desc=f"epoch {k} {s.objective}{' ' + role if role else ''}",
            save_to=out,
            updates=updates,
            save_steps=cfg.run.save_steps,
        )
        shutil.rmtree(work, ignore_errors=True)
        del model
        release_memory()
        log = result["train_log"]
        by_role = {r: sum(t["role"] == r for t in trained) for r in (ATTACKER, DEFENDER)}
        return {
            "checkpoint": self.rundir.relative(out),
            "start": self.rundir.relative(start),
            "gradient_cosine": cosine,
            "train_log": [{"step": r["step"], "loss": r["loss"]} for r in log],
            "objective": s.objective,
            "metrics": {
                "game_rows": len(trained),
                "attacker_rows": by_role[ATTACKER],
                "defender_rows": by_role[DEFENDER],
                "sft_rows": len(self.sft),
                "updates": result["updates"],
                "train_seconds": round(result["seconds"], 3),
                "final_loss": log[-1]["loss"] if log else None,
                "gradient_cosine": cosine["cosine"] if cosine else None,
            },
        }

    def player_name(self, k: int) -> str:
        """π_k's name in the tournament: base, imitation (π_0 with a teacher), epoch_k."""
        if k == 0:
            return "imitation" if self.cfg.spag.teacher_url else "base"
        return f"epoch_{k}"

    def tournament_phase(self, k: int, checkpoints: dict[str, Policy]) -> dict:
        """Every pair of players not yet played (π_k against each earlier one and the
        scripted anchor, and at the first tournament the base against π_0 and the anchor),
        both role assignments on the same held-out words."""
        s, cfg = self.cfg.spag, self.cfg
        played = {
            (r["attacker"], r["defender"])
            for j in range(1, k)
            if self.rundir.marker(j, "tournament")
            for r in self.rundir.rows(j, "tournament")
        }
        names = list(checkpoints) + [SCRIPTED]
        pairs = [
            (a, b)
            for i, a in enumerate(names)
            for b in names[i + 1 :]
            if (a, b) not in played and (b, a) not in played
        ]
        records: list[dict[str, Any]] = []
        for n, (a, b) in enumerate(pairs):
            seed = cfg.run.seed * 7877 + k * 1000 + n
            words = self.words("eval", s.tournament_games, seed)
            live: dict[str, ModelPlayer] = {}  # checkpoint -> its engine, at most two at once
            try:
                for attacker, defender in ((a, b), (b, a)):
                    cast = {ATTACKER: attacker, DEFENDER: defender}
                    needed = {checkpoints[who][r] for r, who in cast.items() if who != SCRIPTED}
                    for c in [c for c in live if c not in needed]:  # the last assignment's
                        live.pop(c).generator.close()
                    players = {
                        r: self.entrant(who, r, checkpoints, live, seed) for r, who in cast.items()
                    }
                    games = collect(
                        players, words, s.max_turns, s.match, prefix=f"{attacker}-{defender}-"
                    )
                    records += self.records(
                        games, split="eval", attacker=attacker, defender=defender, epoch=k
                    )
            finally:
                for p in live.values():
                    p.generator.close()
        write_jsonl_atomic(self.rundir.iter_dir(k) / "tournament.jsonl", records)
        return {
            "pairs": [list(p) for p in pairs],
            "metrics": {
                "pairs": len(pairs),
                "games": len(records),
                **{
                    key: v
                    for key, v in game_stats(records, s.match).items()
                    if key.endswith("_rate") and v is not None
                },
            },
        }

    def entrant(
        self,
        name: str,
        role: str,
        checkpoints: dict[str, Policy],
        live: dict[str, ModelPlayer],
        seed: int,
    ):
        """The player `name` in `role`: the scripted anchor, or an engine of its model for
        that role, kept in `live` (checkpoint -> player) so that with one model per player
        the same two engines serve both role assignments of a pair."""
        if name == SCRIPTED:
            return ScriptedPlayer(self.cfg.spag.match)
        checkpoint = checkpoints[name][role]
        if checkpoint not in live:
            live[checkpoint] = ModelPlayer(
                make_generator(self.two_engines(), checkpoint), self.params(seed), name
            )
        return live[checkpoint]

    # ------------------------------------------------------------ the algorithm

    def iterate(self) -> None:
        cfg, run_phase = self.cfg, self.phases.run
        if cfg.eval.enabled:
            run_phase(0, "eval", self.eval_phase, self.base)
        policy = {ATTACKER: self.base, DEFENDER: self.base}
        checkpoints = {"base": policy}
        if cfg.spag.teacher_url:  # π_0: both roles (both models) start from the imitation
            start = run_phase(0, "imitation", self.imitation_phase)["checkpoint"]
            policy = checkpoints["imitation"] = {ATTACKER: start, DEFENDER: start}
        for k in range(1, cfg.run.iterations + 1):
            run_phase(k, "games", self.games_phase, policy)
            trained = run_phase(k, "train", self.train_phase, policy)
            policy = {role: self.rundir.resolve(c) for role, c in trained["checkpoints"].items()}
            checkpoints[self.player_name(k)] = policy
            if cfg.spag.tournament_games:
                run_phase(k, "tournament", self.tournament_phase, dict(checkpoints))
            if cfg.eval.enabled:
                run_phase(k, "eval", self.eval_phase, policy[DEFENDER])


def run_spag(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> SpagRun:
    """`rzero iterate` for SPAG; returns the finished run."""
    run = SpagRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
