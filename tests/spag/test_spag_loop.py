"""SPAG's loop (rzero.spag.run) on a tiny in-process model: the run folder, every game stored,
the tournament and its audit in the report, resume after a kill, the offline update on
decided games, the imitation of a scripted teacher served over HTTP, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import iterate_cli, tiny_llama
from fault_server import FaultServer

from rzero.config import load_config
from rzero.engine.models import load_model, load_tokenizer
from rzero.rundir import RunDir
from rzero.spag.game import ATTACKER, ATTACKER_WINS, DEFENDER, DEFENDER_WINS
from rzero.spag.run import run_spag
from rzero.spag.train import game_rows, role_gradient_cosine, selfplay_update
from rzero.spag.words import is_eval_word, target_words


@pytest.fixture(scope="module")
def spag_model(tmp_path_factory, tokenizer) -> Path:
    path = tmp_path_factory.mktemp("spag") / "model"
    tiny_llama(tokenizer, hidden=64, layers=2, seed=2).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def spag_overrides(model: Path, **extra) -> list[str]:
    sets = {
        "run.task": "spag",
        "model.name": str(model),
        "model.device": "cpu",
        "spag.games": 4,
        "spag.max_turns": 2,
        "spag.max_new_tokens": 8,
        "spag.sft_rows": 4,
        "spag.batch_size": 4,
        "spag.micro_batch_size": 2,
        "spag.learning_rate": 1e-3,
        "spag.tournament_games": 2,
        "spag.max_length": 512,
        "eval.benchmarks": "[easy]",
        "eval.limit": 3,
        "eval.max_new_tokens": 12,
        "run.iterations": 2,
        "run.report_to": "[]",
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


@pytest.fixture(scope="module")
def spag_run(spag_model, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("spagrun") / "run"
    run_spag(load_config(None, spag_overrides(spag_model)), run_dir)
    return run_dir


def _marker(run: Path, k: int, phase: str) -> dict:
    return json.loads((run / f"iter_{k:02d}" / "phases" / f"{phase}.json").read_text())


@pytest.mark.slow
def test_a_spag_run_stores_every_game_and_audits_the_population(spag_run):
    run = RunDir(spag_run)
    assert run.iterations() == [0, 1, 2]
    for k in (1, 2):
        games = run.rows(k, "games")
        assert len(games) == 4 and all(g["split"] == "train" for g in games)
        assert all(g["turns"] and g["turns"][0]["role"] == ATTACKER for g in games)
        assert all(len(g["turns"]) <= 4 and g["outcome"] and g["reason"] for g in games)
        g = _marker(spag_run, k, "games")["metrics"]
        assert (
            g["games"] == 4
            and sum(g[o] for o in ("attacker_wins", "defender_wins", "tie", "violation")) == 4
        )
        train = _marker(spag_run, k, "train")
        assert train["checkpoint"] == f"run:iter_{k:02d}/model"
        assert train["metrics"]["sft_rows"] == 4 and train["metrics"]["updates"] >= 1
    # epoch 1 plays base, epoch_1 and the anchor pairwise; epoch 2 plays epoch_2 against each
    t1, t2 = _marker(spag_run, 1, "tournament"), _marker(spag_run, 2, "tournament")
    assert sorted(map(tuple, t1["pairs"])) == sorted(
        [("base", "epoch_1"), ("base", "scripted"), ("epoch_1", "scripted")]
    )
    assert sorted(map(tuple, t2["pairs"])) == sorted(
        [("base", "epoch_2"), ("epoch_1", "epoch_2"), ("epoch_2", "scripted")]
    )
    rows = run.rows(2, "tournament")
    assert len(rows) == 3 * 2 * 2 and all(r["split"] == "eval" for r in rows)
    rates = t2["metrics"]
    assert rates["games"] == 12 and sum(
        rates[f"{o}_rate"] for o in ("attacker_wins", "defender_wins", "tie", "violation")
    ) == pytest.approx(1.0)
    assert all(is_eval_word(r["target"]) for r in rows)
    assert not any(is_eval_word(g["target"]) for k in (1, 2) for g in run.rows(k, "games"))
    # both role assignments of a pair play the same words
    pair = [r for r in rows if {r["attacker"], r["defender"]} == {"epoch_1", "epoch_2"}]
    assert {r["target"] for r in pair if r["attacker"] == "epoch_1"} == {
        r["target"] for r in pair if r["attacker"] == "epoch_2"
    }
    text = (spag_run / "report.md").read_text()
    for section in (
        "## Self-play games per epoch",
        "## Win-rate matrix",
        "## Bradley–Terry",
        "## Against the fixed anchors",
        "## Evaluation",
        "Exploitability",
        "Non-transitive share",
        "## Game: epoch 2",
        "Tournament games: 24",
    ):
        assert section in text, section
    assert (spag_run / "report.html").read_text().count("<img") == 2  # curves and heat map
    assert "increment" in _marker(spag_run, 2, "eval")
    phases = [
        (r["iteration"], r["phase"])
        for r in map(json.loads, (spag_run / "metrics.jsonl").read_text().splitlines())
    ]
    assert (1, "games") in phases and (2, "tournament") in phases


@pytest.mark.slow
def test_a_spag_run_killed_after_training_resumes_to_the_same_games(spag_model, spag_run, tmp_path):
    run_dir = tmp_path / "run"
    overrides = spag_overrides(spag_model, **{"run.iterations": 1})
    killed = iterate_cli(run_dir, overrides, kill_at="train:commit")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (run_dir / "iter_01" / "games.jsonl").is_file()
    assert not (run_dir / "iter_01" / "phases" / "train.json").exists()
    done = iterate_cli(run_dir, overrides)
    assert done.returncode == 0, done.stderr[-2000:]
    # seeded: the resumed run's games are the uninterrupted run's
    assert RunDir(run_dir).rows(1, "games") == RunDir(spag_run).rows(1, "games")
    assert _marker(run_dir, 1, "tournament")["metrics"]["games"] == 12


def episode(i: int, outcome: str, n: int) -> dict:
    roles = [ATTACKER, DEFENDER] * n
    turns = [
        {"role": r, "text": f"{'hint' if r == ATTACKER else 'reply'} {i}.{t}"}
        for t, r in enumerate(roles[:n])
    ]
    return {"id": f"e{i}", "target": "garden", "turns": turns, "outcome": outcome, "messages": n}


@pytest.mark.slow
def test_the_offline_update_raises_the_winners_turns(spag_model, tmp_path):
    cfg = load_config(None, spag_overrides(spag_model, **{"spag.epochs": 4.0}))
    eps = [episode(0, ATTACKER_WINS, 4), episode(1, DEFENDER_WINS, 2), episode(2, ATTACKER_WINS, 2)]
    rows = game_rows(eps, cfg.spag)
    assert [r["role"] for r in rows] == [ATTACKER, ATTACKER, DEFENDER, ATTACKER]
    assert "garden" in rows[0]["prompt"][0]["content"]  # the attacker's prompt has the word
    assert "garden" not in rows[2]["prompt"][0]["content"]
    model, tokenizer = load_model(str(spag_model)), load_tokenizer(str(spag_model))
    from rzero.training.offline import mean_logprobs

    before = mean_logprobs(
        model, tokenizer, [r["prompt"] for r in rows], [r["response"] for r in rows], max_length=512
    )
    cos = role_gradient_cosine(model, tokenizer, rows, cfg.spag)
    assert -1.0 <= cos["cosine"] <= 1.0 and cos["attacker_rows"] == 3
    result = selfplay_update(
        model,
        tokenizer,
        rows,
        [],
        cfg.spag,
        tmp_path / "work",
        seed=0,
        model_cfg=cfg.model,
        save_to=tmp_path / "out",
    )
    after = mean_logprobs(
        model, tokenizer, [r["prompt"] for r in rows], [r["response"] for r in rows], max_length=512
    )
    assert result["updates"] == 4 and (tmp_path / "out" / "config.json").is_file()
    assert all(a > b for a, b in zip(after, before, strict=True))
    assert role_gradient_cosine(model, tokenizer, rows[:2], cfg.spag) is None  # one role only


@pytest.mark.slow
def test_imitation_learns_from_a_teacher_served_over_http(spag_model, tmp_path):
    seed = 0
    words = target_words("train", 3, seed * 7919)
    replies = {f"hint for game {i}": f"I know the word! It is {w}!" for i, w in enumerate(words)}
    replies |= {f'word is "{w}"': f"hint for game {i}" for i, w in enumerate(words)}
    with FaultServer(replies, model="teacher") as server:
        cfg = load_config(
            None,
            spag_overrides(
                spag_model,
                **{
                    "spag.teacher_url": server.base_url,
                    "spag.teacher_model": "teacher",
                    "spag.imitation_games": 3,
                    "run.iterations": 1,
                    "spag.tournament_games": 0,
                    "eval.enabled": "false",
                },
            ),
        )
        run_spag(cfg, tmp_path / "run")
    run = RunDir(tmp_path / "run")
    teacher = run.rows(0, "teacher_games")
    assert [g["outcome"] for g in teacher] == [DEFENDER_WINS] * 3
    assert teacher[0]["turns"][1]["text"] == f"I know the word! It is {words[0]}!"
    m = _marker(tmp_path / "run", 0, "imitation")
    assert m["checkpoint"] == "run:iter_00/imitation" and m["metrics"]["rows"] == 3
    assert _marker(tmp_path / "run", 1, "games")["policy"] == {
        ATTACKER: "run:iter_00/imitation",
        DEFENDER: "run:iter_00/imitation",
    }


@pytest.mark.parametrize(
    "sets, message",
    [
        ({"spag.batch_size": 3}, "spag.batch_size=3: not a multiple of spag.micro_batch_size=2"),
        ({"spag.teacher_url": "http://x"}, "spag.teacher_url and spag.teacher_model: set both"),
        ({"audit.enabled": "true"}, "a run.task='spag' recipe has no audit section"),
        (
            {"spag.sft_data": "/nonexistent.jsonl"},
            "spag.sft_data='/nonexistent.jsonl': no such file",
        ),
    ],
)
@pytest.mark.slow
def test_bad_spag_settings_are_one_clear_line(spag_model, tmp_path, sets, message):
    out = iterate_cli(tmp_path / "run", spag_overrides(spag_model, **sets))
    assert out.returncode == 2 and message in out.stderr, out.stderr[-1500:]
    assert "Traceback" not in out.stderr and not (tmp_path / "run" / "iter_01").exists()


@pytest.mark.slow
def test_the_sft_control_plays_the_games_and_trains_only_the_sft_rows(
    spag_model, spag_run, tmp_path
):
    run_dir = tmp_path / "run"
    run_spag(
        load_config(
            None,
            spag_overrides(
                spag_model,
                **{
                    "spag.objective": "sft",
                    "run.iterations": 1,
                    "spag.tournament_games": 0,
                    "eval.enabled": "false",
                },
            ),
        ),
        run_dir,
    )
    train = _marker(run_dir, 1, "train")
    games = RunDir(run_dir).rows(1, "games")
    assert games == RunDir(spag_run).rows(1, "games")  # the same policy plays the same games
    winners = len(game_rows(games, load_config(None, spag_overrides(spag_model)).spag))
    assert train["objective"] == "sft" and train["metrics"]["game_rows"] == 0
    assert train["metrics"]["sft_rows"] == 4
    # the updates SPAG spends on winner turns + SFT rows, here on the SFT rows alone
    assert train["metrics"]["updates"] == max(1, -(-(winners + 4) // 4))


@pytest.mark.slow
def test_separate_roles_train_one_model_per_role_on_its_own_turns(spag_model, tmp_path):
    run_dir = tmp_path / "run"
    run = run_spag(
        load_config(
            None,
            spag_overrides(
                spag_model, **{"spag.roles": "separate", "run.iterations": 1, "eval.limit": 2}
            ),
        ),
        run_dir,
    )
    train = _marker(run_dir, 1, "train")
    assert train["checkpoints"] == {
        ATTACKER: "run:iter_01/model/attacker",
        DEFENDER: "run:iter_01/model/defender",
    }
    assert train["checkpoint"] == "run:iter_01/model/defender" and train["gradient_cosine"] is None
    assert _marker(run_dir, 1, "eval")["checkpoint"] == "run:iter_01/model/defender"
    assert _marker(run_dir, 1, "tournament")["metrics"]["games"] == 12
    assert "an attacker model and a defender model" in (run_dir / "report.md").read_text()
    # the update alone on decided games: each model is trained on its own role's turns only
    games = [
        episode(0, ATTACKER_WINS, 3),
        episode(1, DEFENDER_WINS, 4),
        episode(2, DEFENDER_WINS, 2),
    ]
    (run_dir / "iter_02").mkdir()
    (run_dir / "iter_02" / "games.jsonl").write_text("".join(json.dumps(g) + "\n" for g in games))
    base = str(spag_model)
    info = run.train_phase(2, {ATTACKER: base, DEFENDER: base})
    rows = game_rows(games, run.cfg.spag)
    assert info["metrics"]["attacker_rows"] == sum(r["role"] == ATTACKER for r in rows) == 2
    assert info["metrics"]["defender_rows"] == sum(r["role"] == DEFENDER for r in rows) == 3
    assert info["start"] == {ATTACKER: base, DEFENDER: base}
    weights = {
        role: load_model(run.rundir.resolve(c)).state_dict()["lm_head.weight"]
        for role, c in info["checkpoints"].items()
    }
    assert not weights[ATTACKER].equal(weights[DEFENDER])


@pytest.mark.slow
def test_the_spag_games_export_as_a_dataset(spag_run, tmp_path):
    import datasets

    from rzero.cli import main

    assert main(["export", str(spag_run), "--to", str(tmp_path / "out")]) == 0
    games = datasets.load_dataset(str(tmp_path / "out"), "games", split="train")
    run = RunDir(spag_run)
    expected = [row for k in run.iterations() for row in run.rows(k, "games")]
    assert games.num_rows == len(expected) > 0
    assert games["iteration"] == [k for k in run.iterations() for _ in run.rows(k, "games")]
