"""The self-play audit wired into a run (rzero.selfplay.watch, rzero.math.sections):
each phase's marker gets its numbers and warnings, a stop fires from the stored marker, the
fingerprint ignores the watch (the trackers: tests/rundir/test_trackers.py). No model runs here:
the run directories are written by hand."""

import json
from functools import partial

import pytest

from rzero.config import load_config
from rzero.io import write_json_atomic, write_jsonl_atomic
from rzero.math.layout import LAYOUT
from rzero.math.report import rebuild
from rzero.rundir import Run, RunDir, StopRun, TrackerLog, check_stop
from rzero.selfplay import watch


def cfg_with(**sets):
    return load_config(None, [f"{k}={v}" for k, v in sets.items()])


def step(n: int, reward: float, valid: float, clusters: float) -> dict:
    return {
        "step": n,
        "completions": 8,
        "valid_rate": valid,
        "mean_p_hat": 0.5,
        "mean_r_unc": 0.5,
        "mean_r_rep": 0.1,
        "mean_reward": reward,
        "mean_parse_rate": 0.9,
        "questions": 8,
        "cluster_ratio": clusters,
        "distinct_2": 0.5,
        "structure_ratio": 0.9,
    }


# ---------------------------------------------------------------- challenger


def test_challenger_steps_get_a_slope_and_per_step_warnings(tmp_path):
    cfg = cfg_with(**{"watch.min_cluster_ratio": 0.5})
    info = {
        "steps": [step(1, 0.1, 0.5, 0.9), step(2, 0.2, 0.6, 0.9), step(3, 0.3, 0.7, 0.25)],
        "metrics": {},
    }
    watch.after_phase(cfg, RunDir(tmp_path), 1, "challenger", info)
    # rewards 0.1, 0.2, 0.3 at steps 1, 2, 3: a straight line of slope 0.1, no residual
    assert info["trend"]["mean_reward"]["slope"] == pytest.approx(0.1)
    assert info["metrics"]["reward_slope"] == pytest.approx(0.1)
    assert info["metrics"]["valid_rate_slope"] == pytest.approx(0.1)
    # only step 3 has 0.25 clusters per question, below 0.5
    assert len(info["warnings"]) == 1
    assert info["warnings"][0].startswith("diversity: iteration 1 challenger step 3:")
    assert "stop" not in info  # run.stop_on is empty by default


def test_one_step_has_no_slope(tmp_path):
    info = {"steps": [step(1, 0.1, 0.5, 0.9)], "metrics": {}}
    watch.after_phase(cfg_with(), RunDir(tmp_path), 1, "challenger", info)
    assert info["trend"] == {"mean_reward": None, "valid_rate": None}
    assert "reward_slope" not in info["metrics"]


# ---------------------------------------------------------------- pool and labelling


def one_template_pool(n: int) -> list[dict]:
    return [
        {
            "question": f"Tom has {a} apples and buys {a + 3} more. How many apples now?",
            "challenger_answer": str(2 * a + 3),
        }
        for a in range(1, n + 1)
    ]


def test_a_one_template_pool_trips_diversity_and_stops_when_asked(tmp_path):
    run = RunDir(tmp_path)
    write_jsonl_atomic(run.iter_dir(1) / "pool.jsonl", one_template_pool(10))
    cfg = cfg_with(**{"run.stop_on": "[diversity]"})
    info = watch.after_phase(cfg, run, 1, "pool", {"metrics": {"valid_rate": 1.0}}, math=True)
    m = info["metrics"]
    # 10 questions, one structure once the numbers are masked: 1 / 10
    assert m["structure_ratio"] == pytest.approx(0.1)
    assert m["cluster_ratio"] < 0.5
    assert m["answer_types"] == 1 and m["top_answer_type_share"] == 1.0  # all integers
    names = [w.split(":")[0] for w in info["warnings"]]
    assert "diversity" in names and "structure" in names
    assert info["stop"]["phase"] == "pool"
    assert [w.split(":")[0] for w in info["stop"]["warnings"]] == ["diversity"]


def test_the_band_is_watched_with_the_filter_off(tmp_path):
    run = RunDir(tmp_path)
    rows = [
        {
            "question": f"q{i}",
            "answers": ["1"] * 4,
            "label": "1",
            "p_hat": 1.0,
            "num_groups": 1,
            "top2_margin": 1.0,
            "parse_rate": 1.0,
            "kept": True,
        }
        for i in range(4)
    ]
    write_jsonl_atomic(run.iter_dir(1) / "labelled.jsonl", rows)
    cfg = cfg_with(**{"labeling.filter": False})
    info = watch.after_phase(
        cfg,
        run,
        1,
        "labelling",
        {"metrics": {"kept_fraction": 1.0, "mean_parse_rate": 1.0}},
        math=True,
    )
    # every question is unanimous (p_hat 1): kept (no filter) but none in the band
    assert info["metrics"]["in_band_fraction"] == 0.0
    assert info["metrics"]["groups_per_vote"] == pytest.approx(0.25)  # 1 group / 4 votes
    assert [w.split(":")[0] for w in info["warnings"]] == ["band"]


# ---------------------------------------------------------------- eval: the increment curve


def eval_json(correct: list[int]) -> dict:
    return {
        "items": [
            {"benchmark": "easy", "id": f"e{i}", "mean": float(c), "correct": [bool(c)]}
            for i, c in enumerate(correct)
        ]
    }


def test_eval_writes_the_increment_curve_and_warns_on_a_sure_drop(tmp_path):
    run = RunDir(tmp_path)
    write_json_atomic(run.iter_dir(0) / "eval" / "eval.json", eval_json([1] * 30))
    write_json_atomic(run.iter_dir(1) / "eval" / "eval.json", eval_json([1] * 10 + [0] * 20))
    info = watch.after_phase(cfg_with(), run, 1, "eval", {"metrics": {"average": 10 / 30}})
    curve = json.loads((run.iter_dir(1) / "eval" / "increments.json").read_text())
    assert len(curve["iterations"]) == 2
    # 30 right -> 10 right on the same 30 items: -20/30
    assert info["metrics"]["increment"] == pytest.approx(-20 / 30)
    assert info["increment"]["vs_base"]["easy"]["n10"] == 20  # right before, wrong after
    assert info["increment_flags"]
    assert [w.split(":")[0] for w in info["warnings"]] == ["increment"]


def test_eval_without_the_base_has_no_curve(tmp_path):
    run = RunDir(tmp_path)
    write_json_atomic(run.iter_dir(1) / "eval" / "eval.json", eval_json([1, 0]))
    info = watch.after_phase(cfg_with(), run, 1, "eval", {"metrics": {}})
    assert "increment" not in info and "iteration 0" in info["increment_note"]


# ---------------------------------------------------------------- stop and fingerprint


def test_a_stored_stop_fires_with_the_current_stop_on():
    marker = {"iteration": 2, "phase": "pool", "warnings": ["diversity: iteration 2 pool: x"]}
    with pytest.raises(StopRun, match="after iteration 2 pool"):
        check_stop(marker, cfg_with(**{"run.stop_on": "[diversity]"}).run)
    check_stop(marker, cfg_with().run)  # stop_on emptied: the run goes on


class PoolRun(Run):
    """A system of one pool phase on the run engine, with the math loop's audit."""

    layout = LAYOUT

    def __init__(self, *args, **kwargs):
        self.rebuilt, self.done = [], []
        super().__init__(*args, **kwargs)

    def check_inputs(self) -> None:
        pass

    def before_commit(self) -> list:
        return [partial(watch.after_phase, self.cfg, self.rundir, math=True)]

    def rebuild(self) -> None:
        self.rebuilt.append(self.rundir.path)

    def iterate(self) -> None:
        self.phases.run(
            1, "pool", lambda k: self.done.append("ran") or {"metrics": {"valid_rate": 1.0}}
        )
        self.done.append("after the pool")  # never reached: the pool's diversity warning stops


def test_every_system_stops_cleanly_on_a_listed_warning_and_closes_its_trackers(
    tmp_path, capsys, monkeypatch
):
    """Every system's run shares this wiring (`rzero.rundir.run.Run`): the phase runner's
    marker hook raises the stop, `Run.run` ends the iterations with one line and the trackers
    close; a rerun fires the same stop from the stored marker."""
    monkeypatch.setattr("rzero.rundir.run.resolve_model", lambda name: name)
    cfg = cfg_with(**{"run.stop_on": "[diversity]", "run.report_to": "[]"})
    write_jsonl_atomic(tmp_path / "iter_01" / "pool.jsonl", one_template_pool(10))
    run = PoolRun(cfg, tmp_path)
    closed = []
    run.trackers.close = lambda: closed.append(True)
    run.run()
    assert run.done == ["ran"] and closed == [True] and run.rebuilt == [tmp_path]
    assert run.rundir.marker(1, "pool")["stop"]["phase"] == "pool"  # committed before the stop
    assert capsys.readouterr().err.startswith(
        "run stopped after iteration 1 pool, because run.stop_on lists diversity"
    )
    again = PoolRun(cfg, tmp_path)
    again.run()
    # not run again, not committed again: the one closing rebuild of a run with nothing to do
    assert again.done == [] and again.rebuilt == [tmp_path]
    assert "run stopped after iteration 1 pool" in capsys.readouterr().err


def test_watch_stop_on_and_trackers_are_outside_the_fingerprint():
    base = cfg_with()
    for key, value in (
        ("watch.min_cluster_ratio", 0.9),
        ("watch.coerror", True),
        ("run.stop_on", "[band]"),
        ("run.report_to", "[]"),
    ):
        assert cfg_with(**{key: value}).fingerprint() == base.fingerprint(), key
    assert cfg_with(**{"run.seed": 3}).fingerprint() != base.fingerprint()


# ---------------------------------------------------------------- rebuild, best, trackers


_LOGS: dict = {}


def commit(run: RunDir, cfg, k: int, phase: str, info: dict) -> None:
    """A commit as the math loop makes it: the marker, then its hooks (trackers, report)."""
    marker = run.commit(cfg, k, phase, info, 1.0)
    log = _LOGS.setdefault(run.path, TrackerLog(cfg, run.path))
    log(k, phase, marker)
    rebuild(run, cfg)


def close(run: RunDir) -> None:
    _LOGS.pop(run.path).close()


def test_rebuild_copies_warnings_and_records_the_best_solver(tmp_path, capsys):
    from rzero.cli import main

    cfg = cfg_with(**{"run.iterations": 2, "run.report_to": "[]"})
    run = RunDir(tmp_path / "run", LAYOUT)
    run.prepare(cfg)
    commit(
        run,
        cfg,
        0,
        "eval",
        {
            "metrics": {"average": 0.4, "easy/pass@1": 0.4, "easy/n": 10},
            "checkpoint": "/models/base",
            "warnings": [],
        },
    )
    commit(
        run,
        cfg,
        1,
        "eval",
        {
            "metrics": {"average": 0.6, "easy/pass@1": 0.6, "easy/n": 10},
            "checkpoint": run.relative(run.iter_dir(1) / "solver"),
            "warnings": ["increment: made up"],
        },
    )
    commit(
        run,
        cfg,
        2,
        "eval",
        {
            "metrics": {"average": 0.6, "easy/pass@1": 0.6, "easy/n": 10},
            "checkpoint": run.relative(run.iter_dir(2) / "solver"),
        },
    )
    rows = [json.loads(x) for x in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert rows[1]["warnings"] == ["increment: made up"] and "warnings" not in rows[0]
    best = json.loads((run.path / "best.json").read_text())
    assert best["iteration"] == 1  # 0.6 at iterations 1 and 2: the tie goes to the earlier
    assert main(["best", str(run.path)]) == 0
    assert capsys.readouterr().out.strip() == str(run.iter_dir(1) / "solver")
    text = (run.path / "report.md").read_text()
    assert text.index("## Science card") < text.index("## Evaluation and the increment curve")
    assert "Best solver by held-out evaluation average: the solver of iteration 1" in text
