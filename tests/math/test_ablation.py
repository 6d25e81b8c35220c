"""Ablations and their comparison, with tiny in-process models.

One module fixture runs `ablate` for separate vs shared weights, 2 iterations of ~1 GRPO step
each, recording every checkpoint a training phase loads; the tests then read those runs.
"""

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from conftest import SHORT_CHALLENGER, SHORT_SOLVER
from safetensors.torch import load_file

from rzero.ablation import ablate, parse_variants, variant_config
from rzero.audit.report import build_report
from rzero.cli import build_parser
from rzero.cli.systems import SYSTEMS, system_of
from rzero.config import ConfigError, load_config
from rzero.math.run import MathRun
from rzero.reports.comparison import CompareError, compare
from rzero.rundir import RunDir
from rzero.rundir.record import RECORD_FILE, WEIGHT_SUFFIXES, keep_record, record_of

# Three questions the format-trained tiny model can answer: it boxes 1 or 2 whatever it is
# asked, so the evaluation average is neither always 0 nor always 1.
EVAL_ITEMS = [("What is 1 plus 0?", "1"), ("What is 2 plus 0?", "2"), ("What is 0 plus 1?", "1")]


def ablate_overrides(model: Path, bench: Path) -> list[str]:
    sets = {
        "model.name": str(model),
        "model.device": "cpu",
        "run.iterations": 2,
        "challenger.steps": 1,
        "challenger.group_size": 4,
        "challenger.prompts_per_step": 2,
        "challenger.max_completion_length": 32,
        "challenger.pool_size": 8,
        # Every GRPO step must see unequal rewards in some group, or its gradient is exactly
        # zero and the weights do not move: the reference code's -1 for a malformed question
        # (paper: 0) and its 0.1 format bonus for the solver make equal rewards unlikely, and
        # a small learning rate keeps the formats the model was trained on for 2 iterations.
        "challenger.learning_rate": 1e-4,
        "challenger.invalid_reward": -1,
        "solver.steps": 1,
        "solver.group_size": 4,
        "solver.prompts_per_step": 2,
        "solver.max_completion_length": 16,
        "solver.learning_rate": 1e-4,
        "solver.reward": "reference",
        "labeling.num_votes": 4,
        "labeling.max_new_tokens": 16,
        "labeling.filter": False,  # keep every labelled question so the solver phase runs
        "eval.benchmarks": f"tiny={bench}",
        "eval.max_new_tokens": 12,
        "challenger.prompt_file": SHORT_CHALLENGER,
        "solver.prompt_file": SHORT_SOLVER,
    }
    return [f"{k}={v}" for k, v in sets.items()]


@pytest.fixture(scope="module")
def ablated(format_checkpoint, tmp_path_factory):
    """OUT with separate/ and shared/, and every (run dir, checkpoint, weights) trained from."""
    tmp = tmp_path_factory.mktemp("ablate")
    bench = tmp / "tiny.jsonl"
    bench.write_text("".join(json.dumps({"problem": q, "answer": a}) + "\n" for q, a in EVAL_ITEMS))
    cfg = load_config(None, ablate_overrides(format_checkpoint, bench))
    loads: list[tuple[str, str, dict[str, torch.Tensor]]] = []
    original = MathRun.load

    def recording_load(self, checkpoint):
        model, tokenizer = original(self, checkpoint)
        loads.append(
            (
                Path(self.rundir.path).name,
                str(checkpoint),
                {k: v.detach().clone() for k, v in model.state_dict().items()},
            )
        )
        return model, tokenizer

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MathRun, "load", recording_load)
        md = ablate(SYSTEMS["math"], cfg, ["separate", "shared"], tmp / "out")
    return {
        "out": tmp / "out",
        "md": md,
        "loads": loads,
        "cfg": cfg,
        "base": str(format_checkpoint),
    }


def read_marker(run_dir: Path, k: int, phase: str) -> dict | None:
    """The phase's marker, with the paths it stores inside the run resolved."""
    rd = RunDir(run_dir)
    m = rd.marker(k, phase)
    if m is None:
        return None
    return {
        key: rd.resolve(v) if key in ("start", "checkpoint", "frozen_solver") else v
        for key, v in m.items()
    }


def cli(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    return args.func(args)


def weights(checkpoint) -> dict[str, torch.Tensor]:
    return load_file(str(Path(checkpoint) / "model.safetensors"))


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Every tensor of the saved checkpoint `b` equals the one in `a`, bit for bit."""
    return all(torch.equal(a[k], b[k]) for k in b)


def table(md: str, title: str) -> list[list[str]]:
    """The body rows of the Markdown table under `## title`, as lists of cells."""
    lines = md.split(f"## {title}\n\n", 1)[1].split("\n\n")[0].splitlines()
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def header(md: str, title: str) -> list[str]:
    line = md.split(f"## {title}\n\n", 1)[1].splitlines()[0]
    return [c.strip() for c in line.strip("|").split("|")]


MAIN = "Performance and label accuracy per iteration"


# ---------------------------------------------------------------- variants


def test_variant_config_sets_each_variants_field():
    cfg = load_config(None, ["roles.shared=true"])  # a recipe with shared weights
    assert variant_config(system_of(cfg), cfg, "separate").roles.shared is False
    assert variant_config(system_of(cfg), cfg, "shared").roles.shared is True
    base = variant_config(system_of(cfg), cfg, "base_challenger")
    assert base.roles.train_challenger is False and base.roles.shared is False
    norep = variant_config(system_of(cfg), cfg, "no_repetition_penalty")
    assert norep.challenger.repetition_lambda == 0.0 and norep.roles.shared is False
    nofilter = variant_config(system_of(cfg), cfg, "no_band_filter")
    assert nofilter.labeling.filter is False and nofilter.roles.shared is False
    # nothing else moves, and the recipe itself is untouched
    assert variant_config(system_of(cfg), cfg, "no_band_filter").challenger == cfg.challenger
    assert cfg.roles.shared is True and cfg.labeling.filter is True
    arms = {
        f"{arm}-{seed}"
        for arm in ("loop", "untrained", "pool-vote", "pool-truth")
        for seed in (0, 1, 2)
    }
    arms |= {"loop-shared-0"}
    arms |= {f"{arm}-{seed}" for arm in ("rfew", "rfew-untrained", "anchors") for seed in (0, 1, 2)}
    assert (
        set(SYSTEMS["math"].variants)
        == {
            "separate",
            "shared",
            "base_challenger",
            "no_repetition_penalty",
            "no_band_filter",
        }
        | arms
    )


def test_the_guided_arms_are_r_few_its_control_and_r_zero_at_equal_solver_compute():
    # configs/r-few-learn.yaml is configs/cpu-learn.yaml plus a guidance: section, so the R-Zero
    # arms of the guided grid (guidance.anchors= switches it off) are the claims grid's, with
    # their fingerprints: their records are read, not rerun
    guided, plain = load_config("configs/r-few-learn.yaml"), load_config("configs/cpu-learn.yaml")
    math = SYSTEMS["math"]
    for arm in ("loop-0", "loop-1", "untrained-0", "pool-truth-0"):
        a, b = variant_config(math, guided, arm), variant_config(math, plain, arm)
        assert a.fingerprint() == b.fingerprint(), arm
    rfew = variant_config(math, guided, "rfew-1")
    assert rfew.guidance.anchors == "easy:7" and rfew.guidance.count == 32
    assert rfew.run.seed == 1 and rfew.solver == plain.solver
    assert variant_config(math, guided, "rfew-untrained-0").roles.train_challenger is False
    # the control: the same 32 anchors with their true answers, the same solver section
    control = variant_config(math, guided, "anchors-0")
    assert control.run.task == "solver" and control.solver == rfew.solver
    t = control.solver_task
    assert (t.questions, t.count, t.labels) == ("easy:7", 32, "truth")
    assert control.run.iterations == rfew.run.iterations == 2
    # under a recipe without guidance an rfew arm is an error, not an R-Zero loop by another name
    with pytest.raises(ConfigError, match="variant 'rfew-0': guided self-play needs"):
        variant_config(math, plain, "rfew-0")
    shared = variant_config(math, plain, "loop-shared-0")
    assert shared.roles.shared is True and shared.solver == plain.solver


def test_the_claims_arms_spend_the_recipes_solver_budget_on_their_own_questions():
    cfg = load_config("configs/cpu-learn.yaml")
    math = SYSTEMS["math"]
    # the grid's loop at seed 0 is the recipe's own run: `make iterate` measures that arm
    assert variant_config(math, cfg, "loop-0").fingerprint() == cfg.fingerprint()
    assert parse_variants(math, "claims")[:4] == [
        "pool-vote-0",
        "loop-0",
        "untrained-0",
        "pool-truth-0",
    ]
    loop = variant_config(math, cfg, "loop-1")
    assert loop.run.task == "math" and loop.run.seed == 1 and loop.roles.shared is False
    untrained = variant_config(math, cfg, "untrained-0")
    assert untrained.roles.train_challenger is False
    for name, labels in (("pool-vote-2", "vote"), ("pool-truth-0", "truth")):
        pool = variant_config(math, cfg, name)
        assert pool.run.task == "solver" and system_of(pool) is SYSTEMS["solver"]
        assert pool.roles is None and pool.challenger is None and pool.audit is None
        assert pool.solver_task.labels == labels and pool.solver_task.questions == "easy:7"
        # the same solver updates, votes and evaluation as the loop's arms
        assert pool.solver == loop.solver
        assert pool.labeling == loop.labeling and pool.eval == loop.eval
        assert pool.model == loop.model
    assert variant_config(math, cfg, "pool-vote-2").solver_task.band is True
    assert variant_config(math, cfg, "pool-vote-2").run.seed == 2


def test_unknown_variant_is_a_clear_error():
    with pytest.raises(
        ConfigError, match="'sharde': unknown for a math recipe; allowed variants are separate"
    ):
        variant_config(SYSTEMS["math"], load_config(None), "sharde")
    with pytest.raises(ConfigError, match="unknown variant\\(s\\) 'bogus'"):
        parse_variants(SYSTEMS["math"], "separate,bogus")
    assert parse_variants(SYSTEMS["math"], " shared , separate,shared") == ["shared", "separate"]
    assert parse_variants(SYSTEMS["math"], "all") == list(SYSTEMS["math"].variants)


# ---------------------------------------------------------------- the ablation runs


@pytest.mark.slow
def test_ablate_writes_one_run_per_variant_and_the_comparison(ablated):
    out = ablated["out"]
    for variant, shared in (("separate", False), ("shared", True)):
        saved = load_config(out / variant / "config.yaml")
        assert saved.roles.shared is shared
        assert saved.run.seed == ablated["cfg"].run.seed
        assert saved.model.name == ablated["cfg"].model.name
        assert read_marker(out / variant, 2, "eval") is not None
    assert ablated["md"] == out / "comparison.md"
    for ext in ("md", "html", "json", "png"):
        assert (out / f"comparison.{ext}").is_file()
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_a_claims_grid_runs_the_loop_and_the_pool_control_from_one_recipe(
    format_checkpoint, tmp_path
):
    """An arm of another task (the solver task's fixed pool with vote labels) runs beside
    the loop from the same math recipe, with the same solver updates, and the grid ends
    with the comparison of both; rerun, it resumes without training."""
    bench = tmp_path / "tiny.jsonl"
    bench.write_text("".join(json.dumps({"problem": q, "answer": a}) + "\n" for q, a in EVAL_ITEMS))
    overrides = ablate_overrides(format_checkpoint, bench) + ["run.iterations=1", "solver.steps=2"]
    cfg = load_config(None, overrides)
    out = tmp_path / "claims"
    arms = ["pool-vote-0", "loop-0"]

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # the grid stopped in its second arm

    broken = dataclasses.replace(SYSTEMS["math"], iterate=stopped)
    with pytest.raises(KeyboardInterrupt):
        ablate(broken, cfg, arms, out, system_of=system_of)
    # the comparison of the arm finished so far is there to read while the grid runs on
    partial = json.loads((out / "comparison.json").read_text())
    assert [r["name"] for r in partial["runs"]] == ["pool-vote-0"]

    md = ablate(SYSTEMS["math"], cfg, arms, out, system_of=system_of)

    pool = load_config(out / "pool-vote-0" / "config.yaml")
    assert pool.run.task == "solver" and pool.roles is None and pool.solver == cfg.solver
    assert pool.solver_task.labels == "vote" and pool.solver_task.band is True
    labelling = read_marker(out / "pool-vote-0", 1, "labelling")
    assert labelling["labels"] == "vote" and labelling["metrics"]["questions"] == 240
    updates = {arm: read_marker(out / arm, 1, "solver")["metrics"].get("updates") for arm in arms}
    assert updates["pool-vote-0"] == 2  # the recipe's solver.steps, one update each
    assert read_marker(out / "loop-0", 1, "solver") is not None
    assert md == out / "comparison.md"
    table = md.read_text()
    assert "pool-vote-0" in table and "loop-0" in table
    # the differences are of the fields both arms have, not of the loop's own sections
    assert '| run.task | "solver" | "math" |' in table
    assert "challenger.beta" not in table and "solver_task.labels" not in table
    assert "/240 (" in table  # the pool's band: kept of the 240 labelled
    row = next(line for line in table.splitlines() if "/240 (" in line)
    pool_known, pool_hand, pool_diverse = row.split(" | ")[4:7]
    assert pool_hand == "–"  # no hand audit kept beside the runs
    assert re.fullmatch(r"\d+\.\d % of \d+", pool_known), row  # every pool answer is known
    assert re.fullmatch(r"\d\.\d\d / \d\.\d\d", pool_diverse), row

    def no_training(*args, **kwargs):
        raise AssertionError("a committed arm was trained again")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("rzero.training.grpo.train_grpo", no_training)
        mp.setattr("rzero.solver_task.run.train_grpo", no_training)
        ablate(SYSTEMS["math"], cfg, arms, out, system_of=system_of)


def test_comparison_table_has_a_row_per_iteration_and_the_eval_markers_numbers(ablated):
    out = ablated["out"]
    md = ablated["md"].read_text()
    assert header(md, MAIN) == [
        "iter",
        "solver step",
        "R-Zero (separate): eval avg (%)",
        "R-Zero (separate): label acc [95 % CI]",
        "Single-R-Zero (shared): eval avg (%)",
        "Single-R-Zero (shared): label acc [95 % CI]",
    ]
    rows = table(md, MAIN)
    assert [r[:2] for r in rows] == [["0 (base)", "0"], ["1", "1"], ["2", "2"]]  # 1 step/iter
    comp = json.loads((out / "comparison.json").read_text())
    for k, row in enumerate(rows):
        for col, variant in ((2, "separate"), (4, "shared")):
            average = read_marker(out / variant, k, "eval")["metrics"]["average"]
            # 3 items: the average is a multiple of 1/3, shown in percent
            assert row[col] == f"{100 * average:.2f}"
            assert comp["rows"][k]["variants"][variant]["eval_average"] == average
        assert row[3] == row[5] == "–"  # not audited
    # iteration 0 is the same base model for both variants
    assert rows[0][2] == rows[0][4]
    assert comp["config_differences"] == {"roles.shared": {"separate": False, "shared": True}}
    assert "Config differences: roles.shared = false (separate), true (shared)." in md


def test_comparison_states_the_paired_differences_of_the_real_runs(ablated):
    out = ablated["out"]
    comp = json.loads((out / "comparison.json").read_text())
    c = comp["contrasts"]
    assert c["reference"] == "separate"
    assert [(r["iteration"], r["variant"]) for r in c["rows"]] == [
        (1, "separate"),
        (1, "shared"),
        (2, "separate"),
        (2, "shared"),
    ]
    # the same base model and items: the base evaluations agree item for item
    assert c["base_check"] == {"shared": {"missing": False, "unshared": 0, "differing": 0}}
    for r in c["rows"]:
        average = read_marker(out / r["variant"], r["iteration"], "eval")["metrics"]["average"]
        base = read_marker(out / r["variant"], 0, "eval")["metrics"]["average"]
        assert r["vs_base"]["average"]["delta"] == pytest.approx(average - base)
        assert r["vs_base"]["average"]["n"] == len(EVAL_ITEMS)
    md = ablated["md"].read_text()
    assert "## Differences between the variants and against the base" in md
    assert any(s.startswith("iteration 2, shared minus separate: pass@1 ") for s in c["sentences"])


def test_comparison_context_is_the_labelling_markers(ablated):
    out = ablated["out"]
    rows = table(ablated["md"].read_text(), "Context: the labelled pool")
    assert [r[0] for r in rows] == ["1", "2"]
    for k, row in zip((1, 2), rows, strict=True):
        m = read_marker(out / "separate", k, "labelling")["metrics"]
        assert row[1] == f"{m['kept']}/{m['questions']} ({m['kept_fraction']:.2f})"
        assert row[2] == f"{m['mean_p_hat']:.2f}"


def test_audited_label_accuracy_and_interval_appear(ablated, tmp_path):
    # copies without the weights, so the module's runs stay unaudited for the other tests
    for variant in ("separate", "shared"):
        shutil.copytree(
            ablated["out"] / variant,
            tmp_path / variant,
            ignore=shutil.ignore_patterns("*.safetensors", "tensorboard"),
        )

    def item(k, source, verdict, i):
        return {
            "source": source,
            "iteration": k,
            "step": None,
            "global_step": None,
            "question": f"q{k}-{source}-{i}",
            "label": "1",
            "p_hat": 0.5,
            "kept": source == "labelled_kept",
            "key": f"{k}-{source}-{i}",
            "verdict": verdict,
            "judge_answer": "1",
            "reason": None,
            "response": "",
        }

    # iteration 1: 7 of 10 kept labels correct; iteration 2: 3 of 4 (+1 unjudged, not wrong)
    items = (
        [item(1, "labelled_kept", v, i) for i, v in enumerate(["correct"] * 7 + ["wrong"] * 3)]
        + [
            item(2, "labelled_kept", v, i)
            for i, v in enumerate(["correct"] * 3 + ["wrong", "unjudged"])
        ]
        + [item(1, "labelled_all", "correct", i) for i in range(2)]
    )
    report = build_report(
        items,
        {
            "model": "hand-written judge",
            "host": "none",
            "prompt_version": "judge-v1",
            "temperature": 0.0,
            "max_tokens": 8,
            "seed": 0,
            "embedded": False,
            "note": None,
        },
    )
    (tmp_path / "shared/audit").mkdir()
    (tmp_path / "shared/audit/report.json").write_text(json.dumps(report))

    # a person's audit of 5 of shared's kept questions of iteration 1, kept beside the runs
    verdicts = ["ill_posed", "ill_posed", "ill_posed", "correct", "wrong"]
    (tmp_path / "hand-audit").mkdir()
    hand = tmp_path / "hand-audit" / "shared-iter01.jsonl"
    hand.write_text("".join(json.dumps({"question": "q", "verdict": v}) + "\n" for v in verdicts))

    paths = compare([tmp_path / "separate", tmp_path / "shared"], "math")
    assert paths["md"] == tmp_path / "comparison.md"  # default: the common parent
    md = paths["md"].read_text()
    rows = table(md, MAIN)
    # Wilson 95 %, k=7 n=10: center (0.7 + 1.92/10)/1.384 = 0.6445, half 0.2477 -> [39.7, 89.2]
    assert rows[1][5] == "70.0% [39.7, 89.2] n=10"
    # k=3 n=4 -> [30.1, 95.4]; n < 10, so the cell carries the "too few to say" mark
    assert rows[2][5] == "75.0% [30.1, 95.4] n=4 †"
    assert rows[0][5] == "–" and rows[1][3] == "–"  # base row; separate not audited
    context = table(md, "Context: the labelled pool")
    column = header(md, "Context: the labelled pool").index(
        "Single-R-Zero (shared): label acc, all labelled"
    )
    assert context[0][column] == "100.0% [34.2, 100.0] n=2 †"  # 2 of 2 over all labelled
    by_hand = "kept questions read by hand: ill-posed; well-posed labels right"
    shared_hand = header(md, "Context: the labelled pool").index(
        f"Single-R-Zero (shared): {by_hand}"
    )
    separate_hand = header(md, "Context: the labelled pool").index(f"R-Zero (separate): {by_hand}")
    assert [r[shared_hand] for r in context] == ["3/5 ill-posed; 1/2 right", "–"]
    assert [r[separate_hand] for r in context] == ["–", "–"]
    comp = json.loads(paths["json"].read_text())
    acc = comp["rows"][1]["variants"]["shared"]["label_accuracy"]
    assert acc["accuracy"] == pytest.approx(0.7) and acc["n_judged"] == 10
    assert comp["rows"][2]["variants"]["shared"]["label_accuracy"]["n_unjudged"] == 1
    assert "Judge of shared: hand-written judge." in md
    # a hand audit with a verdict left empty stops the comparison in one line naming it
    hand.write_text(hand.read_text() + json.dumps({"question": "q", "verdict": None}) + "\n")
    with pytest.raises(CompareError, match=r"hand audit .*shared-iter01.jsonl: rows 6: verdict"):
        compare([tmp_path / "separate", tmp_path / "shared"], "math")


def test_html_escapes_every_text(ablated, tmp_path):
    run_dir = tmp_path / "<b>odd & name"
    shutil.copytree(
        ablated["out"] / "separate",
        run_dir,
        ignore=shutil.ignore_patterns("*.safetensors", "tensorboard"),
    )
    page = compare([run_dir], "math", tmp_path)["html"].read_text()
    assert "<b>odd" not in page and "&lt;b&gt;odd &amp; name" in page


# ---------------------------------------------------------------- which weights train


def _loads(ablated, variant):
    return [(ckpt, state) for run_dir, ckpt, state in ablated["loads"] if run_dir == variant]


def test_shared_mode_trains_one_set_of_weights(ablated):
    run_dir = ablated["out"] / "shared"
    ch1, sol1 = read_marker(run_dir, 1, "challenger"), read_marker(run_dir, 1, "solver")
    ch2, sol2 = read_marker(run_dir, 2, "challenger"), read_marker(run_dir, 2, "solver")
    it1, it2 = str(run_dir / "iter_01"), str(run_dir / "iter_02")
    # markers: each phase starts from the checkpoint the phase before it saved
    assert ch1["start"] == ablated["base"]
    assert sol1["start"] == ch1["checkpoint"] == f"{it1}/challenger"
    assert ch2["start"] == ch2["frozen_solver"] == sol1["checkpoint"] == f"{it1}/solver"
    assert sol2["start"] == ch2["checkpoint"] == f"{it2}/challenger"
    # the weights each training phase actually loaded are those saved files, bit for bit
    loads = _loads(ablated, "shared")
    assert [ckpt for ckpt, _ in loads] == [
        ablated["base"],
        f"{it1}/challenger",
        f"{it1}/solver",
        f"{it2}/challenger",
    ]
    for (_, state), saved in zip(
        loads,
        [ablated["base"], ch1["checkpoint"], sol1["checkpoint"], ch2["checkpoint"]],
        strict=True,
    ):
        assert same(state, weights(saved))
    # and every phase changed them
    chain = [
        ablated["base"],
        ch1["checkpoint"],
        sol1["checkpoint"],
        ch2["checkpoint"],
        sol2["checkpoint"],
    ]
    for before, after in zip(chain, chain[1:], strict=False):
        assert not same(weights(before), weights(after)), (before, after)


def test_separate_mode_continues_each_role_from_its_own_weights(ablated):
    run_dir = ablated["out"] / "separate"
    ch1, sol1 = read_marker(run_dir, 1, "challenger"), read_marker(run_dir, 1, "solver")
    ch2, sol2 = read_marker(run_dir, 2, "challenger"), read_marker(run_dir, 2, "solver")
    it1 = str(run_dir / "iter_01")
    assert ch1["start"] == sol1["start"] == ch1["frozen_solver"] == ablated["base"]
    assert ch2["start"] == ch1["checkpoint"] == f"{it1}/challenger"
    assert sol2["start"] == sol1["checkpoint"] == f"{it1}/solver"
    assert ch2["frozen_solver"] == sol1["checkpoint"]
    loads = _loads(ablated, "separate")
    assert [ckpt for ckpt, _ in loads] == [
        ablated["base"],
        ablated["base"],
        f"{it1}/challenger",
        f"{it1}/solver",
    ]
    for (_, state), saved in zip(
        loads,
        [ablated["base"], ablated["base"], ch1["checkpoint"], sol1["checkpoint"]],
        strict=True,
    ):
        assert same(state, weights(saved))
    for before, after in (
        (ablated["base"], ch1),
        (ablated["base"], sol1),
        (ch1["checkpoint"], ch2),
        (sol1["checkpoint"], sol2),
    ):
        assert not same(weights(before), weights(after["checkpoint"]))
    # the two roles never share weights here
    assert not same(weights(ch2["checkpoint"]), weights(sol2["checkpoint"]))


# ---------------------------------------------------------------- rerun and bad input


def test_rerunning_ablate_resumes_without_training(ablated, monkeypatch):
    markers = {
        (v, k): read_marker(ablated["out"] / v, k, "solver")
        for v in ("separate", "shared")
        for k in (1, 2)
    }

    def no_training(self, checkpoint):
        pytest.fail(f"a committed phase was redone: it loaded {checkpoint}")

    monkeypatch.setattr(MathRun, "load", no_training)
    assert (
        ablate(SYSTEMS["math"], ablated["cfg"], ["separate", "shared"], ablated["out"])
        == ablated["md"]
    )
    assert {
        key: read_marker(ablated["out"] / key[0], key[1], "solver") for key in markers
    } == markers


def test_a_grid_goes_on_from_its_records_on_another_machine(ablated, tmp_path, monkeypatch):
    """`--records`: each finished variant is kept without its weights; on a machine with no
    run folders the same ablation reads the records, trains nothing and pairs the same
    items to the same numbers."""
    records = tmp_path / "records"
    system, cfg, out = SYSTEMS["math"], ablated["cfg"], ablated["out"]
    ablate(system, cfg, ["separate", "shared"], out, records=records)
    for variant in ("separate", "shared"):
        record = records / variant
        kept = json.loads((record / RECORD_FILE).read_text())
        assert kept["fingerprint"] == load_config(out / variant / "config.yaml").fingerprint()
        assert any(p.endswith("model.safetensors") for p in kept["dropped"])
        assert kept["recorded_on"]["torch"] == torch.__version__
        assert not [f for f in record.rglob("*") if f.suffix in WEIGHT_SUFFIXES]
        assert not (record / ".lock").exists()
        for f in (out / variant).rglob("*"):
            rel = str(f.relative_to(out / variant))
            if f.is_file() and rel not in kept["dropped"]:
                assert (record / rel).read_bytes() == f.read_bytes(), rel
            assert f.is_dir() or rel in kept["dropped"] or (record / rel).is_file()

    def no_training(self, checkpoint):
        pytest.fail(f"a variant with a record was run again: it loaded {checkpoint}")

    monkeypatch.setattr(MathRun, "load", no_training)
    elsewhere = tmp_path / "new-machine"
    md = ablate(system, cfg, ["separate", "shared"], elsewhere, records=records)
    assert md == elsewhere / "comparison.md"
    assert not (elsewhere / "separate").exists() and not (elsewhere / "shared").exists()
    before = json.loads((out / "comparison.json").read_text())
    after = json.loads((elsewhere / "comparison.json").read_text())
    assert after["rows"] == before["rows"] and after["contrasts"] == before["contrasts"]
    assert [r["path"] for r in after["runs"]] == [
        str(records / "separate"),
        str(records / "shared"),
    ]


def test_a_comparison_of_records_names_the_machines_they_ran_on(ablated, tmp_path):
    records = tmp_path / "records"
    for variant in ("separate", "shared"):
        keep_record(ablated["out"] / variant, records / variant)
    kept = json.loads((records / "shared" / RECORD_FILE).read_text())
    kept["recorded_on"]["cpu"] = "Another CPU"
    (records / "shared" / RECORD_FILE).write_text(json.dumps(kept))
    md = compare([records / "separate", records / "shared"], "math", tmp_path / "cmp")["md"]
    text = md.read_text()
    here = json.loads((records / "separate" / RECORD_FILE).read_text())["recorded_on"]["cpu"]
    assert f"Machines, as recorded: separate {here}, shared Another CPU." in text
    assert "holds that difference as well as the variants'" in text
    # a run folder does not keep its machine; runs of one machine need no warning
    md = compare([records / "separate", ablated["out"] / "shared"], "math", tmp_path / "c2")["md"]
    text = md.read_text()
    assert f"separate {here}, shared not recorded (a run folder)." in text
    assert "as well as the variants'" not in text
    md = compare([ablated["out"] / "separate", ablated["out"] / "shared"], "math", tmp_path / "c3")
    assert "Machines" not in md["md"].read_text()


def test_a_record_of_another_config_is_not_read(ablated, tmp_path, capsys):
    records = tmp_path / "records"
    keep_record(ablated["out"] / "shared", records / "shared")
    assert (
        record_of(records / "shared", load_config(ablated["out"] / "shared" / "config.yaml"))
        is None
    )
    other = variant_config(SYSTEMS["math"], ablated["cfg"], "separate")
    assert "of another config" in record_of(records / "shared", other)
    assert record_of(tmp_path / "nothing", other) == f"no record in {tmp_path / 'nothing'}"
    with pytest.raises(ValueError, match="outside its folder"):
        keep_record(ablated["out"] / "shared", ablated["out"] / "shared" / "record")
    with pytest.raises(ConfigError, match="not a run directory"):
        keep_record(tmp_path, tmp_path / "r")
    (records / "shared" / RECORD_FILE).write_text("{truncated")
    rc = cli(
        "ablate", "--variants", "shared", "--out", str(tmp_path / "o"), "--records", str(records)
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "damaged record" in err[0], err
    assert cli("ablate", "--out", str(tmp_path / "o"), "--records", str(tmp_path / "o")) == 2
    assert "is --out itself" in capsys.readouterr().err


@pytest.mark.slow
def test_ablate_refuses_a_run_dir_of_another_config_before_any_work(ablated, tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    raw = ablated["cfg"].to_dict()
    raw["run"]["seed"] = 5
    recipe.write_text(yaml.safe_dump(raw))
    saved = (ablated["out"] / "shared" / "config.yaml").read_text()
    rc = cli("ablate", "--config", str(recipe), "--out", str(ablated["out"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "run.seed" in err[0] and "--fresh" in err[0]
    assert (ablated["out"] / "shared" / "config.yaml").read_text() == saved


def test_compare_of_a_dir_that_is_not_a_run_is_one_error_line(ablated, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for bad, why in (
        (tmp_path / "empty", "is not a run directory (no config.yaml)"),
        (tmp_path / "missing", "is not a directory"),
    ):
        rc = cli("compare", str(ablated["out"] / "separate"), str(bad))
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and err == [f"error: {bad} {why}"]
    good = str(ablated["out"] / "separate")
    assert cli("compare", good, good + "/") == 2
    assert capsys.readouterr().err == "error: compare: the same run directory is given twice\n"
    (tmp_path / "broken/audit").mkdir(parents=True)
    shutil.copy(ablated["out"] / "separate" / "config.yaml", tmp_path / "broken")
    (tmp_path / "broken/audit/report.json").write_text("{truncated")
    assert cli("compare", str(tmp_path / "broken")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "audit/report.json: not valid JSON" in err[0]


def test_unknown_variant_on_the_command_line_exits_2(capsys):
    assert cli("ablate", "--variants", "separate,sharde") == 2
    assert "unknown variant(s) 'sharde'" in capsys.readouterr().err


def test_the_ablate_recipe_loads_for_every_variant():
    recipe = Path(__file__).parents[2] / "configs" / "ablate-tiny.yaml"
    cfg = load_config(recipe)
    for variant, overrides in SYSTEMS["math"].variants.items():
        if variant.startswith("rfew"):  # guided arms need a recipe with anchors
            continue
        vcfg = variant_config(system_of(cfg), cfg, variant)
        seeded = any(o.startswith("run.seed=") for o in overrides)  # the claims' arms
        assert vcfg.model == cfg.model and (seeded or vcfg.run.seed == cfg.run.seed)
    assert [
        variant_config(system_of(cfg), cfg, v).roles.shared for v in ("separate", "shared")
    ] == [False, True]


def test_spin_recipes_get_spins_controls():
    from rzero.spin.plan import merged_pairs
    from rzero.training.preference import updates_for

    cfg = load_config("configs/spin-tiny.yaml")
    assert parse_variants(SYSTEMS["spin"], None) == ["spin", "sft"]
    assert parse_variants(SYSTEMS["spin"], "all") == ["spin", "sft", "one_opponent"]
    with pytest.raises(ConfigError, match="unknown variant.*'shared'.*a spin recipe"):
        parse_variants(SYSTEMS["spin"], "shared")
    sft = variant_config(system_of(cfg), cfg, "sft")
    assert sft.spin.objective == "sft" and sft.spin.epochs == cfg.spin.epochs
    # one iteration against the base, with as many updates as the recipe's iterations
    one = variant_config(system_of(cfg), cfg, "one_opponent")
    total = sum(updates_for(merged_pairs(cfg, k), cfg.spin) for k in (1, 2))
    assert one.run.iterations == 1 and updates_for(merged_pairs(one, 1), one.spin) == total
    with pytest.raises(ConfigError, match="unknown for a spin recipe"):
        variant_config(system_of(cfg), cfg, "shared")


def test_spag_recipes_get_the_sft_control():
    cfg = load_config("configs/spag-tiny.yaml")
    assert parse_variants(SYSTEMS["spag"], None) == ["spag", "sft"]
    assert parse_variants(SYSTEMS["spag"], "all") == ["spag", "sft", "separate_roles"]
    with pytest.raises(ConfigError, match="unknown variant.*'spin'.*a spag recipe"):
        parse_variants(SYSTEMS["spag"], "spin")
    sft = variant_config(system_of(cfg), cfg, "sft")
    assert sft.spag.objective == "sft" and sft.spag.sft_rows == cfg.spag.sft_rows
    assert sft.spag.games == cfg.spag.games and sft.run.iterations == cfg.run.iterations
    assert variant_config(system_of(cfg), cfg, "spag").fingerprint() == cfg.fingerprint()
    assert variant_config(system_of(cfg), cfg, "separate_roles").spag.roles == "separate"
