"""Guided self-play (R-Few, `rzero.math.guidance`): the anchors, the grounded prompts, the
curriculum, the solver's mixture, and the loop that runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    SHORT_CHALLENGER,
    SHORT_SOLVER,
    iterate_cli,
    tiny_llama,
    tiny_overrides,
    train_on_replies,
)

from rzero.config import ConfigError, GuidanceConfig
from rzero.evaluation import load_benchmark
from rzero.math.guidance import (
    challenger_prompts,
    curriculum,
    load_anchors,
    solver_mixture,
    verbatim,
)

ROOT = Path(__file__).parents[2]


def easy_questions() -> list[str]:
    return [i["problem"] for i in load_benchmark("easy")[1]]


def read_rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# ---------------------------------------------------------------- the anchors


def test_the_held_out_set_cannot_be_the_anchor_source():
    with pytest.raises(ConfigError, match="guidance.anchors='easy'"):
        GuidanceConfig(anchors="easy")


def test_an_easy_item_never_becomes_an_anchor(tmp_path):
    # a user's JSONL whose second row is an `easy` item word for word: it is skipped, and the
    # N anchors are the first N of the rest
    easy = easy_questions()
    rows = [
        {"problem": "What is 2 + 2?", "answer": "4"},
        {"problem": easy[5], "answer": "0"},
        {"problem": "What is 3 + 3?", "answer": "6"},
    ]
    path = tmp_path / "anchors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    anchors = load_anchors(GuidanceConfig(anchors=str(path), count=2), easy)
    assert [a["question"] for a in anchors] == ["What is 2 + 2?", "What is 3 + 3?"]
    # the recipe's anchors, the first 32 of easy:7: none of them is an easy item
    anchors = load_anchors(GuidanceConfig(anchors="easy:7", count=32), easy)
    assert len(anchors) == 32 and not any(verbatim([a["question"] for a in anchors], easy))


def test_anchors_without_answers_or_too_few_are_one_line_errors(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"problem": "What is 1 + 1?"}\n')
    with pytest.raises(ConfigError, match="no answer"):
        load_anchors(GuidanceConfig(anchors=str(path), count=1), [])
    path.write_text('{"problem": "What is 1 + 1?", "answer": "2"}\n')
    with pytest.raises(ConfigError, match="guidance.count=2"):
        load_anchors(GuidanceConfig(anchors=str(path), count=2), [])


def test_each_challenger_prompt_holds_k_anchors_of_the_source_and_no_easy_item():
    g = GuidanceConfig(anchors="easy:7", count=32, shots=4)
    anchors = load_anchors(g, easy_questions())
    texts = {a["question"] for a in anchors}
    prompts, ids = challenger_prompts(anchors, g, n=20, seed=3)
    easy = set(easy_questions())
    for chat, shown in zip(prompts, ids, strict=True):
        # system, then 4 x (ask, anchor), then the ask: 10 messages
        assert len(chat) == 10 and chat[0]["role"] == "system"
        assert [m["content"] for m in chat[1::2]] == [g.ask] * 5
        written = [m["content"] for m in chat[2:-1:2]]
        questions = [w.split("<question>")[1].split("</question>")[0] for w in written]
        assert len(set(questions)) == 4 and set(questions) <= texts
        assert not set(questions) & easy
        assert len(shown) == 4
    # drawn per prompt: the 20 prompts do not all show the same anchors
    assert len({tuple(s) for s in ids}) > 1
    # seeded: the same draw again
    assert challenger_prompts(anchors, g, n=20, seed=3)[1] == ids


# ---------------------------------------------------------------- curriculum and mixture


def test_the_curriculum_keeps_anchors_with_signal_and_all_when_none_has():
    # accuracies over 8 votes: 0/8 and 8/8 give GRPO no signal; 1/8..7/8 are kept
    assert curriculum([0.0, 0.125, 0.5, 0.875, 1.0], 0.125, 0.875) == [
        False,
        True,
        True,
        True,
        False,
    ]
    assert curriculum([0.0, 1.0], 0.125, 0.875) == [True, True]


def test_the_mixture_holds_the_configured_share_exactly():
    anchors = [{"question": f"a{i}", "answer": str(i)} for i in range(5)]
    synthetic = [{"question": f"s{i}", "label": str(i)} for i in range(3)]
    rows = solver_mixture(anchors, synthetic, draws=512, anchor_share=0.5, seed=0)
    counts = Counter(r["source"] for r in rows)
    assert len(rows) == 512 and counts == {"anchor": 256, "synthetic": 256}
    # cycled: 256 draws over 5 anchors -> 51 or 52 each; over 3 synthetic -> 85 or 86
    per = Counter(r["question"] for r in rows)
    assert {per[f"a{i}"] for i in range(5)} == {51, 52}
    assert {per[f"s{i}"] for i in range(3)} == {85, 86}
    # anchors carry their true answer, synthetic questions their vote label
    assert all(r["label"] == r["question"][1:] for r in rows)
    # 0.3 of 10 draws -> 3 anchors; no synthetic question kept -> every draw an anchor
    assert Counter(r["source"] for r in solver_mixture(anchors, synthetic, 10, 0.3, 1)) == {
        "anchor": 3,
        "synthetic": 7,
    }
    assert {r["source"] for r in solver_mixture(anchors, [], 10, 0.3, 1)} == {"anchor"}


def test_grpo_takes_each_row_of_the_mixture_once(tiny_checkpoint, tmp_path):
    # the solver phase's rows are exactly its prompt draws (steps x prompts_per_step), so the
    # updates see the mixture as configured: 3 steps x 2 prompts = 6 draws, 2 of them anchors
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rzero.config import SolverConfig
    from rzero.prompts.solver import solver_chat
    from rzero.training.grpo import train_grpo

    anchors = [{"question": "What is 1 + 1?", "answer": "2"}]
    synthetic = [{"question": "What is 5 + 5?", "label": "10"}]
    mix = solver_mixture(anchors, synthetic, draws=6, anchor_share=1 / 3, seed=0)
    seen: list[str] = []

    def reward(prompts, completions, source, **kwargs):
        seen.extend(source)
        return [0.0] * len(completions)

    reward.__name__ = "count"
    rows = [{"prompt": solver_chat(r["question"]), "source": r["source"]} for r in mix]
    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    role = SolverConfig(
        steps=3, group_size=2, prompts_per_step=2, max_completion_length=8, learning_rate=1e-4
    )
    train_grpo(model, tokenizer, rows, [reward], role, tmp_path / "work", seed=0)
    # every prompt draw is scored G = 2 times
    assert Counter(seen) == {"anchor": 2 * 2, "synthetic": 4 * 2}


# ---------------------------------------------------------------- the loop


ASK = "New problem."  # the short challenger prompt's ask (tests/data/challenger_short.txt)


@pytest.fixture(scope="module")
def guided_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A tiny Llama trained for a few seconds on the grounded challenger prompt (2 anchors
    "What is a plus b?" as earlier turns) and on the short solver prompt, as the session's
    format checkpoint is on the plain prompts: it writes well-formed questions there."""
    import random

    from rzero.prompts.challenger import grounded_challenger_chat
    from rzero.prompts.solver import solver_chat

    rng = random.Random(0)

    def example() -> tuple[list[int], int]:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        question = f"What is {a} plus {b}?"
        if rng.random() < 0.5:
            shown = [(f"What is {i} plus {i}?", str(2 * i)) for i in rng.sample(range(2, 6), 2)]
            chat = grounded_challenger_chat(shown, ASK, str(SHORT_CHALLENGER))
            reply = f"<question>{question}</question> The answer is \\boxed{{{a + b}}}."
        else:
            chat = solver_chat(question, str(SHORT_SOLVER))
            reply = f"So \\boxed{{{rng.choice([1, 1, 1, 2, 2])}}}."
        ids = tokenizer.apply_chat_template([*chat, {"role": "assistant", "content": reply}])
        prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        return ids, len(prompt)

    model = tiny_llama(tokenizer, hidden=64, layers=2, seed=1)
    train_on_replies(model, [example() for _ in range(64)], 120, rng, tokenizer.pad_token_id)
    path = tmp_path_factory.mktemp("guided") / "model"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def guided_overrides(model: Path, anchors: Path, **extra) -> list[str]:
    return tiny_overrides(
        model,
        **{
            "guidance.anchors": str(anchors),
            "guidance.count": 3,
            "guidance.shots": 2,
            "guidance.anchor_share": 0.5,
            "guidance.ask": ASK,
            "eval.enabled": False,
            "watch.coerror": False,
            "watch.crossplay": False,
            **extra,
        },
    )


@pytest.fixture(scope="module")
def anchor_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("anchors") / "anchors.jsonl"
    rows = [{"problem": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(2, 6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def guided_run(guided_checkpoint, anchor_file, tmp_path_factory) -> Path:
    """A finished one-iteration guided run of `guided_overrides`, through `rzero iterate`."""
    run_dir = tmp_path_factory.mktemp("guided") / "run"
    done = iterate_cli(run_dir, guided_overrides(guided_checkpoint, anchor_file))
    assert done.returncode == 0, done.stderr[-2000:]
    return run_dir


@pytest.mark.slow
def test_a_guided_run_grounds_the_challenger_and_mixes_the_solver(guided_run):
    run_dir = guided_run
    it = run_dir / "iter_01"
    # 3 anchors, each voted on by the frozen solver: accuracy in [0, 1] and a curriculum flag
    anchors = read_rows(it / "anchors.jsonl")
    assert [a["question"] for a in anchors] == [f"What is {i} plus {i}?" for i in (2, 3, 4)]
    assert all(0 <= a["accuracy"] <= 1 and len(a["answers"]) == 4 for a in anchors)
    # every pool question records the 2 anchors its prompt showed
    pool = read_rows(it / "pool.jsonl")
    assert pool and all(len(r["anchor_ids"]) == 2 for r in pool)
    # the solver's 1 step x 2 prompts: 1 anchor (true answer) and 1 kept question
    mixture = read_rows(it / "mixture.jsonl")
    assert Counter(r["source"] for r in mixture) == {"anchor": 1, "synthetic": 1}
    marker = json.loads((it / "phases" / "solver.json").read_text())
    assert marker["metrics"]["anchor_draws"] == 1 and marker["metrics"]["synthetic_draws"] == 1
    labelling = json.loads((it / "phases" / "labelling.json").read_text())
    assert labelling["metrics"]["anchors"] == 3
    # report.html shows the two sources apart: the anchors' row beside the synthetic one
    page = (run_dir / "report.html").read_text()
    assert "Guided self-play: anchors and synthetic questions" in page
    assert "R-Few run" in page and "anchor draws" in page


@pytest.mark.slow
def test_a_half_finished_guided_run_resumes_to_the_same_kept_questions(
    guided_run, guided_checkpoint, anchor_file, tmp_path
):
    # killed in the middle of its labelling, then rerun: the same pool, labels, anchors'
    # curriculum and mixture as the run that was never stopped
    overrides = guided_overrides(guided_checkpoint, anchor_file)
    whole, cut = guided_run, tmp_path / "cut"
    killed = iterate_cli(cut, overrides, kill_at="labelling:mid")
    assert killed.returncode == -9
    resumed = iterate_cli(cut, overrides)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    for name in ("pool.jsonl", "labelled.jsonl", "anchors.jsonl", "mixture.jsonl"):
        assert (whole / "iter_01" / name).read_text() == (cut / "iter_01" / name).read_text()


@pytest.mark.slow
def test_one_iteration_of_the_r_few_tiny_recipe_with_the_embedded_model(tmp_path):
    # configs/r-few-tiny.yaml as `make iterate CONFIG=...` runs it, cut to one iteration,
    # one GRPO step of each role over 2 prompts, a pool of 12, 8 anchors (each voted on 8
    # times by the frozen solver) and 8 evaluation items
    run_dir = tmp_path / "run"
    sets = {
        "run.iterations": 1,
        "challenger.steps": 1,
        "solver.steps": 1,
        "challenger.prompts_per_step": 2,
        "challenger.prompts_per_update": 1,
        "solver.prompts_per_step": 2,
        "solver.prompts_per_update": 1,
        "challenger.pool_size": 12,
        "guidance.count": 8,
        "eval.limit": 8,
    }
    args = [sys.executable, "-m", "rzero", "iterate", "--config", "configs/r-few-tiny.yaml"]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    proc = subprocess.run(
        [*args, "--run-dir", str(run_dir)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    it = run_dir / "iter_01"
    anchors = read_rows(it / "anchors.jsonl")
    assert len(anchors) == 8 and anchors[0]["id"] == "easy7-0000"
    # 2 solver prompt draws: one anchor, one kept question (or both anchors if none was kept)
    sources = Counter(r["source"] for r in read_rows(it / "mixture.jsonl"))
    assert sum(sources.values()) == 2 and sources["anchor"] >= 1
    pool = read_rows(it / "pool.jsonl")
    assert all(len(r["anchor_ids"]) == 4 for r in pool)
