"""The loop with tiny in-process models: each phase trains what it should and nothing else,
a full iteration writes every artifact, and a killed run resumes to the same rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ScriptedGenerator, iterate_cli, tiny_overrides
from safetensors.torch import load_file

from rzero.config import load_config
from rzero.math.run import MathRun, run_iterations
from rzero.rundir import RunDir, RunDirConflict


def read_marker(run_dir, k: int, phase: str):
    return RunDir(run_dir).marker(k, phase)


def weights(path) -> dict[str, torch.Tensor]:
    return load_file(str(Path(path) / "model.safetensors"))


def changed(a, b) -> bool:
    wa, wb = weights(a), weights(b)
    return any(not torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_full_iteration_writes_every_artifact(one_iteration):
    run = one_iteration
    for name in [
        "config.yaml",
        "metrics.jsonl",
        "report.md",
        "iter_00/eval/eval.json",
        "iter_01/challenger_steps.jsonl",
        "iter_01/pool.jsonl",
        "iter_01/labelled.jsonl",
        "iter_01/challenger/model.safetensors",
        "iter_01/solver/model.safetensors",
        "iter_01/eval/eval.md",
    ]:
        assert (run / name).is_file(), name
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    for phase in ["challenger", "pool", "labelling", "solver", "eval"]:
        assert read_marker(run, 1, phase) is not None, phase


def test_challenger_log_has_votes_and_rewards(one_iteration):
    rows = [
        json.loads(x)
        for x in (one_iteration / "iter_01/challenger_steps.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 8  # 1 step x 2 prompts x G=4
    valid = [r for r in rows if r["valid"]]
    assert valid, "the format-trained challenger wrote no valid question"
    for r in valid:
        assert len(r["answers"]) == 4 and 0.0 <= r["p_hat"] <= 1.0
        # paper form, clipped: r = max(0, 1 - 2|p - 1/2| - r_rep)
        expected = max(0.0, 1 - 2 * abs(r["p_hat"] - 0.5) - r["r_rep"])
        assert r["reward"] == pytest.approx(expected)
    assert all(r["reward"] == 0.0 for r in rows if not r["valid"])


def test_labelled_rows_hold_votes(one_iteration):
    rows = [
        json.loads(x) for x in (one_iteration / "iter_01/labelled.jsonl").read_text().splitlines()
    ]
    pool = (one_iteration / "iter_01/pool.jsonl").read_text().splitlines()
    assert len(rows) == len(pool) > 0
    for r in rows:
        assert set(r) >= {
            "question",
            "answers",
            "label",
            "p_hat",
            "num_groups",
            "top2_margin",
            "parse_rate",
            "kept",
        }
        assert len(r["answers"]) == 4


def test_separate_mode_trains_each_role_from_its_own_weights(one_iteration, format_checkpoint):
    run = one_iteration
    challenger, solver = read_marker(run, 1, "challenger"), read_marker(run, 1, "solver")
    # the challenger phase started from the base and was rewarded by the base (S_0) ...
    assert challenger["start"] == challenger["frozen_solver"] == str(format_checkpoint)
    assert changed(format_checkpoint, run / "iter_01/challenger")
    # ... and the solver phase started from the base too, not from the challenger
    assert solver["start"] == str(format_checkpoint)
    assert solver["metrics"]["train_questions"] > 0
    assert changed(format_checkpoint, run / "iter_01/solver")
    assert changed(run / "iter_01/challenger", run / "iter_01/solver")
    # the run's own checkpoints are recorded relative to the run directory
    assert challenger["checkpoint"] == "run:iter_01/challenger"
    assert solver["checkpoint"] == "run:iter_01/solver"


def test_report_lists_the_iteration(one_iteration):
    text = (one_iteration / "report.md").read_text()
    assert "| 1 |" in text and "separate weights" in text
    # the dtypes the phases computed in, "auto" resolved on this machine
    from rzero.engine.models import generation_dtype

    assert (
        f"- compute (model.generation_dtype auto, model.train_compute auto): generation "
        f"{generation_dtype('auto', 'cpu')}, training "
    ) in text
    assert read_marker(one_iteration, 1, "solver")["compute"]["weights"] == "float32"


@pytest.mark.slow
def test_shared_mode_updates_one_model(format_checkpoint, tmp_path):
    cfg = load_config(
        None, tiny_overrides(format_checkpoint, **{"roles.shared": True, "eval.enabled": False})
    )
    run_iterations(cfg, tmp_path / "run")
    it = tmp_path / "run/iter_01"
    # challenger phase: base -> challenger; solver phase: challenger -> solver (same model)
    assert changed(format_checkpoint, it / "challenger")
    assert changed(it / "challenger", it / "solver")
    assert read_marker(tmp_path / "run", 1, "labelling") is not None


@pytest.mark.slow
def test_zero_valid_questions_and_empty_band(tiny_checkpoint, tmp_path):
    # a random model writes no <question>: every reward is 0, the step still runs and logs,
    # and with nothing in the band the solver phase is skipped with a warning
    cfg = load_config(
        None, tiny_overrides(tiny_checkpoint, **{"labeling.filter": True, "eval.enabled": False})
    )
    run_iterations(cfg, tmp_path / "run")
    rows = [
        json.loads(x)
        for x in (tmp_path / "run/iter_01/challenger_steps.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 8 and all(r["reward"] == 0.0 and not r["valid"] for r in rows)
    solver = read_marker(tmp_path / "run", 1, "solver")
    assert solver["skipped"] and "no pooled question fell in the band" in solver["warning"]
    assert "no pooled question fell in the band" in (tmp_path / "run/report.md").read_text()
    metrics = [json.loads(x) for x in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert any("warning" in m for m in metrics)


def test_run_dir_with_other_config_is_refused(one_iteration, format_checkpoint):
    cfg = load_config(None, tiny_overrides(format_checkpoint, **{"run.seed": 5}))
    with pytest.raises(RunDirConflict, match="run.seed"):
        MathRun(cfg, one_iteration)


@pytest.mark.slow
def test_dead_solver_server_fails_the_phase_naming_the_url(
    format_checkpoint, tmp_path, refused_port
):
    from rzero.generation.interface import GenerationError

    urls = tmp_path / "urls.txt"
    url = f"http://127.0.0.1:{refused_port}/v1"  # nothing listens there
    urls.write_text(url + "\n")
    cfg = load_config(
        None,
        tiny_overrides(
            format_checkpoint,
            **{
                "generation.solver_urls_file": str(urls),
                "generation.retries": 0,
                "generation.timeout": 5,
            },
        ),
    )
    with pytest.raises(GenerationError, match=f"openai backend: request to {url}"):
        run_iterations(cfg, tmp_path / "run")
    # the base evaluation committed before the failure is intact; the challenger is not
    assert read_marker(tmp_path / "run", 0, "eval") is not None
    assert read_marker(tmp_path / "run", 1, "challenger") is None


def _row_counts(run_dir: Path) -> dict[str, int]:
    it = run_dir / "iter_01"
    return {
        name: len((it / name).read_text().splitlines())
        for name in ["challenger_steps.jsonl", "pool.jsonl", "labelled.jsonl"]
    } | {"metrics": len((run_dir / "metrics.jsonl").read_text().splitlines())}


KILL_POINTS = (
    "challenger:mid",
    "challenger:commit",
    "pool:mid",
    "labelling:mid",
    "solver:mid",
    "solver:commit",
)


@pytest.mark.slow
def test_a_run_killed_in_every_phase_resumes_to_the_same_rows(
    format_checkpoint, one_iteration, tmp_path
):
    # one run directory, SIGKILLed at each point in turn: every rerun redoes only the
    # interrupted phase and goes on to the next kill point, then a last rerun finishes
    overrides = tiny_overrides(format_checkpoint, **{"eval.enabled": False})
    run_dir = tmp_path / "run"
    for kill_at in KILL_POINTS:
        killed = iterate_cli(run_dir, overrides, kill_at=kill_at)
        assert killed.returncode == -9, (kill_at, killed.stderr[-2000:])
        phase = kill_at.split(":")[0]
        assert read_marker(run_dir, 1, phase) is None, kill_at  # the phase did not commit
    resumed = iterate_cli(run_dir, overrides)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    counts = _row_counts(run_dir)
    # an uninterrupted run of the same config: 8 challenger rows, and pool/labelled equal
    assert counts["challenger_steps.jsonl"] == 8
    assert counts["pool.jsonl"] == counts["labelled.jsonl"]
    reference = _row_counts(one_iteration)
    assert counts["pool.jsonl"] == reference["pool.jsonl"]
    # metrics: 1 challenger-step row + challenger, pool, labelling, solver phase rows, and
    # one row per optimiser update of each role (1 each): none repeated by the reruns
    assert counts["metrics"] == 7
    assert not list(run_dir.rglob("*.tmp")) and not list(run_dir.rglob(".trainer_*"))


@pytest.mark.slow
def test_challenger_phase_can_serve_its_frozen_solver(format_checkpoint, tmp_path):
    # generation.solver_replicas: the phase starts a `transformers serve` of S_{k-1},
    # the reward queries them over HTTP, and they are stopped when the phase ends
    cfg = load_config(
        None,
        tiny_overrides(
            format_checkpoint, **{"generation.solver_replicas": 1, "eval.enabled": False}
        ),
    )
    run = MathRun(cfg, tmp_path / "run")
    info = run.challenger_phase(1, str(format_checkpoint), str(format_checkpoint))
    it = tmp_path / "run/iter_01"
    log = next((it / "solver_logs").glob("*.log")).read_text()
    assert "chat/completions" in log
    assert not (it / "solver_urls.txt").exists()  # removed when the server stopped
    rows = [json.loads(x) for x in (it / "challenger_steps.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and any(r["answers"] for r in rows)
    assert info["frozen_solver"] == str(format_checkpoint)
    assert info["checkpoint"] == "run:iter_01/challenger"


@pytest.mark.slow
def test_one_iteration_of_the_tiny_recipe_with_the_embedded_model(tmp_path):
    # configs/tiny.yaml as `make iterate` runs it (its group sizes, micro-batches, lengths
    # and memory, two optimiser updates per GRPO step), cut to one iteration, one GRPO step
    # of each role over 2 prompts (the recipe: 4), a pool of 12 questions (their 96 votes are
    # one generation batch of 96, the recipe's largest) and 8 evaluation items
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rzero",
            "iterate",
            "--config",
            "configs/tiny.yaml",
            "--set",
            "run.iterations=1",
            "--set",
            "challenger.steps=1",
            "--set",
            "solver.steps=1",
            "--set",
            "challenger.prompts_per_step=2",
            "--set",
            "challenger.prompts_per_update=1",
            "--set",
            "solver.prompts_per_step=2",
            "--set",
            "solver.prompts_per_update=1",
            "--set",
            "challenger.pool_size=12",
            "--set",
            "eval.limit=8",
            "--run-dir",
            str(run_dir),
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=Path(__file__).parents[2],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    it = run_dir / "iter_01"
    # 1 challenger step x 2 prompts x G 4 = 8 scored completions
    assert len((it / "challenger_steps.jsonl").read_text().splitlines()) == 8
    pool = (it / "pool.jsonl").read_text().splitlines()
    assert 0 < len(pool) <= 12
    assert len((it / "labelled.jsonl").read_text().splitlines()) == len(pool)
    for phase in ("challenger", "pool", "labelling", "solver", "eval"):
        marker = read_marker(run_dir, 1, phase)
        assert marker is not None
        # every phase's peak resident memory: 7.7 GiB measured, 9 GiB allowed
        assert marker["peak_rss_gib"] <= 9.0, (phase, marker["peak_rss_gib"])
    assert read_marker(run_dir, 0, "eval") is not None
    assert (it / "challenger" / "model.safetensors").is_file()
    assert "peak" in (run_dir / "report.md").read_text()


# ---------------------------------------------------------------- the self-play audit


def test_every_run_carries_the_self_play_audit(one_iteration):
    run = one_iteration
    # the increment curve of iterations 0 and 1, paired by item
    curve = json.loads((run / "iter_01/eval/increments.json").read_text())
    assert [it["iteration"] for it in curve["iterations"]] == [0, 1]
    assert "vs_base" in read_marker(run, 1, "eval")["increment"]
    # the pool's diversity and the labelling's fragmentation, in the markers and metrics.jsonl
    assert {"cluster_ratio", "structure_ratio", "distinct_2"} <= set(
        read_marker(run, 1, "pool")["metrics"]
    )
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    labelling = next(r for r in rows if r["phase"] == "labelling")
    assert "groups_per_vote" in labelling and "in_band_fraction" in labelling
    assert json.loads((run / "best.json").read_text())["iteration"] in (0, 1)
    text = (run / "report.md").read_text()
    # the science card opens the report: seed §6.1's seven checks
    card = text[text.index("## Science card") : text.index("Plan of")]
    for check in (
        "anchor",
        "external signal",
        "controls",
        "increment curve",
        "judge quality",
        "role independence",
        "side effects",
    ):
        assert f"| {check} |" in card, check
    assert text.index("## Science card") < text.index("## Evaluation and the increment curve")
    assert "co-error not measured (watch.coerror is off)" in card
    assert "## Best solver" in text
    assert "Science card" in (run / "report.html").read_text()


def one_template() -> ScriptedGenerator:
    """A collapsed challenger: every completion is one word problem with new numbers."""
    return ScriptedGenerator(
        lambda text, n, params: [
            f"<question>Tom has {a} apples and buys {a + 3} more. How many apples does "
            f"he have now?</question> So \\boxed{{{2 * a + 3}}}."
            for a in range(params.seed % 50, params.seed % 50 + n)
        ]
    )


class CollapsedChallengerRun(MathRun):
    """The loop as it is, with the pool written by `one_template`."""

    def pool_phase(self, k, challenger):
        self.collapsed = True
        try:
            return super().pool_phase(k, challenger)
        finally:
            self.collapsed = False

    def generator(self, checkpoint):
        if getattr(self, "collapsed", False):
            return one_template()
        return super().generator(checkpoint)


@pytest.mark.slow
def test_a_collapsing_challenger_trips_the_diversity_warning_and_stops_the_run(
    format_checkpoint, tmp_path
):
    sets = {"roles.train_challenger": False, "eval.enabled": False, "watch.coerror": False}
    run_dir = tmp_path / "run"
    cfg = load_config(
        None, tiny_overrides(format_checkpoint, **sets, **{"run.stop_on": "[diversity]"})
    )
    assert CollapsedChallengerRun(cfg, run_dir).run() == run_dir
    pool = read_marker(run_dir, 1, "pool")
    # 12 questions of one template: one structure, and BLEU puts them in few clusters
    assert pool["metrics"]["structure_ratio"] == pytest.approx(1 / 12)
    assert any(w.startswith("diversity: iteration 1 pool") for w in pool["warnings"])
    assert pool["stop"]["phase"] == "pool"
    assert read_marker(run_dir, 1, "labelling") is None  # the run ended after the pool
    report = (run_dir / "report.md").read_text()
    assert "## Stopped" in report and "after iteration 1's pool phase" in report
    # a rerun stops at the same committed marker, redoing nothing
    CollapsedChallengerRun(cfg, run_dir).run()
    assert read_marker(run_dir, 1, "pool")["seconds"] == pool["seconds"]
    assert read_marker(run_dir, 1, "labelling") is None
    # with run.stop_on emptied (outside the fingerprint) the same directory goes on
    cfg = load_config(None, tiny_overrides(format_checkpoint, **sets))
    CollapsedChallengerRun(cfg, run_dir).run()
    assert read_marker(run_dir, 1, "solver") is not None
    assert "## Stopped" not in (run_dir / "report.md").read_text()


@pytest.mark.slow
def test_coerror_and_the_cross_iteration_matrix_join_a_finished_run(
    one_iteration, format_checkpoint, tmp_path
):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(one_iteration, run_dir)
    # watch.* is outside the fingerprint: the finished run resumes and adds both phases
    cfg = load_config(
        None,
        tiny_overrides(
            format_checkpoint,
            **{
                "watch.coerror": True,
                "watch.coerror_items": 6,
                "watch.crossplay": True,
                "watch.crossplay_items": 3,
            },
        ),
    )
    run_iterations(cfg, run_dir)
    # co-error: the challenger Q_1 and the solver S_1 answered the same 6 easy items
    co = read_marker(run_dir, 1, "coerror")
    assert co["benchmark"] == "easy" and co["metrics"]["n"] == 6
    assert co["challenger"] == "run:iter_01/challenger" and co["solver"] == "run:iter_01/solver"
    assert not co["solver_from_eval"]  # the run evaluates synthetic, not easy
    items = json.loads((run_dir / "iter_01/coerror.json").read_text())["items"]
    assert [i["id"] for i in items] == [f"easy-{n:04d}" for n in range(6)]
    # cross-play: S_0 (the base) and S_1 each voted on 3 questions of pool 1
    marker = read_marker(run_dir, 1, "crossplay")
    matrix = marker["crossplay"]
    assert matrix["solvers"] == [0, 1] and matrix["pools"] == [1]  # S_0 (base), S_1 x pool 1
    for row in matrix["agreement"]:
        assert row[0]["n"] <= 3
    text = (run_dir / "report.md").read_text()
    assert "## Cross-iteration matrix" in text and "## Role co-error" in text
    assert "solver x pool agreement" in (run_dir / "report.html").read_text()
    assert (
        read_marker(run_dir, 1, "eval")["seconds"]
        == read_marker(one_iteration, 1, "eval")["seconds"]
    )
