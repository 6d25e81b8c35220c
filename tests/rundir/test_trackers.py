"""`run.report_to` (rzero.engine.trackers): the loop's phase metrics, steps and warnings
reach the real tensorboard, wandb (offline) and mlflow (a local store) clients; `none` and
`all` mean what transformers means by them; a tracker that is not installed is refused
before the run, and TRL's own logs are pointed at the run folder. No model runs here: the
run directories are written by hand."""

import json
import os
import struct
import sys
import time

import pytest

from rzero import preflight
from rzero.config import ConfigError, installed_trackers, load_config
from rzero.engine import trackers
from rzero.math.layout import LAYOUT
from rzero.math.report import rebuild
from rzero.rundir import RunDir, TrackerLog


def cfg_with(**sets):
    return load_config(None, [f"{k}={v}" for k, v in sets.items()])


def step(n: int, reward: float) -> dict:
    return {
        "step": n,
        "completions": 8,
        "valid_rate": 0.5,
        "mean_p_hat": 0.5,
        "mean_r_unc": 0.5,
        "mean_r_rep": 0.1,
        "mean_reward": reward,
        "mean_parse_rate": 0.9,
        "questions": 8,
        "cluster_ratio": 0.9,
        "distinct_2": 0.5,
        "structure_ratio": 0.9,
    }


def run_two_commits(tmp_path, report_to: str) -> RunDir:
    """A run that commits a challenger phase (one GRPO step, one warning) and an evaluation
    through the loop's hooks, then closes its trackers, as the loop does."""
    cfg = cfg_with(**{"run.report_to": report_to, "run.iterations": 1})
    run = RunDir(tmp_path / "run", LAYOUT)
    run.prepare(cfg)
    log = TrackerLog(cfg, run.path)
    for phase, info in (
        (
            "challenger",
            {
                "metrics": {"mean_reward": 0.25},
                "steps": [step(1, 0.25)],
                "warnings": ["diversity: x"],
            },
        ),
        (
            "eval",
            {
                "metrics": {"average": 0.5, "easy/pass@1": 0.5, "easy/n": 4},
                "checkpoint": "/models/x",
            },
        ),
    ):
        log(1, phase, run.commit(cfg, 1, phase, info, 1.0))
        rebuild(run, cfg)
    log.close()
    return run


def test_none_and_all_are_the_transformers_spellings():
    assert cfg_with(**{"run.report_to": "none"}).run.report_to == []
    assert cfg_with(**{"run.report_to": "[none]"}).run.report_to == []
    everything = cfg_with(**{"run.report_to": "all"}).run.report_to
    assert everything == installed_trackers()
    # the test environment has the real clients (the dev extra), so `all` names them
    assert {"tensorboard", "wandb", "mlflow"} <= set(everything)
    with pytest.raises(ConfigError, match="none stands alone"):
        cfg_with(**{"run.report_to": "[none, wandb]"})
    with pytest.raises(
        ConfigError, match="allowed values are tensorboard, wandb, mlflow, trackio, all, none"
    ):
        cfg_with(**{"run.report_to": "[neptune]"})


def wandb_records(path):
    """The records of an offline run's ``run-*.wandb`` file, as wandb wrote them: a 7-byte
    header (``:W&B``, magic, version), then LevelDB's log format: 32 KiB blocks of chunks,
    each a 7-byte header (CRC, little-endian length, type: 1 full, 2 first, 3 middle,
    4 last) and its bytes, a block's tail under 7 bytes left as padding; each record a
    protobuf ``Record``."""
    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, pending, records = 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 2):
            pending = chunk
        elif kind in (3, 4):
            pending += chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


@pytest.mark.slow
def test_the_loop_metrics_and_warnings_reach_the_real_wandb_client_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = run_two_commits(tmp_path, "[wandb]")
    [offline] = (run.path / "wandb").glob("offline-run-*")  # WANDB_DIR: the run folder
    [log_file] = offline.glob("run-*.wandb")
    # wandb's own writer (wandb-core, another process) may still be writing when finish()
    # returns on a loaded machine: read until the run record and the four rows are there
    deadline = time.monotonic() + 60
    while True:
        records = wandb_records(log_file)
        if any(r.HasField("run") for r in records) and (
            sum(r.HasField("history") for r in records) >= 4
        ):
            break
        assert time.monotonic() < deadline, "the offline log lacks the run or its rows"
        time.sleep(0.5)
    [name] = [r.run.display_name for r in records if r.HasField("run")]
    rows = [
        {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in r.history.item
        }
        for r in records
        if r.HasField("history")
    ]
    assert name == "run"
    assert rows[0]["challenger/mean_reward"] == 0.25 and rows[0]["iteration"] == 1
    assert rows[0]["watch/warnings"] == 1.0
    assert rows[1]["challenger_step/mean_reward"] == 0.25 and rows[1]["global_step"] == 1
    assert rows[2]["warnings/challenger"] == "- diversity: x"
    assert rows[3]["eval/easy/pass@1"] == 0.5


@pytest.mark.slow
def test_the_loop_metrics_and_warnings_reach_the_real_mlflow_client(tmp_path):
    from mlflow import MlflowClient

    run = run_two_commits(tmp_path, "[mlflow]")
    client = MlflowClient(tracking_uri=f"sqlite:///{run.path / 'mlflow.db'}")  # the run's own
    [found] = client.search_runs([client.get_experiment_by_name("rzero").experiment_id])
    assert found.info.run_name == "run" and found.info.status == "FINISHED"
    assert found.data.metrics["challenger/mean_reward"] == 0.25
    assert found.data.metrics["eval/easy/pass_at_1"] == 0.5  # mlflow allows no '@'
    history = client.get_metric_history(found.info.run_id, "challenger_step/mean_reward")
    assert [(m.step, m.value) for m in history] == [(1, 0.25)]  # by global step
    warnings = client.download_artifacts(
        found.info.run_id, "warnings/challenger/iter_01.md", str(tmp_path)
    )
    assert open(warnings).read() == "- diversity: x"
    assert list((run.path / "mlruns").rglob("iter_01.md"))  # artifacts inside the run folder


def test_mlflow_metric_names_keep_what_mlflow_allows():
    assert trackers.mlflow_key("eval/easy/pass@1") == "eval/easy/pass_at_1"
    assert trackers.mlflow_key("a b-c.d_e/f") == "a b-c.d_e/f"
    assert trackers.mlflow_key("x(1)") == "x_1_"


@pytest.mark.slow
def test_tensorboard_gets_the_phase_metrics(tmp_path):
    run = run_two_commits(tmp_path, "[tensorboard]")
    assert list((run.path / "tensorboard").glob("events.out.tfevents.*"))


def test_a_tracker_that_is_not_installed_is_refused_before_the_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "trackio", None)  # import fails, as when not installed
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name: None if name == "trackio" else object()
    )
    with pytest.raises(
        ConfigError,
        match=r"trackio is not installed; `make setup "
        r"EXTRAS=trackio`",
    ):
        preflight.check(cfg_with(**{"run.report_to": "[trackio]"}))


def test_trl_logs_go_to_this_runs_folders_only_when_the_run_reports(tmp_path, monkeypatch):
    env = trackers.phase_environment(tmp_path / "run", 2, "solver")
    logs = tmp_path / "run/tensorboard/trl/iter_02_solver"
    assert env["TENSORBOARD_LOGGING_DIR"] == str(logs)
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path / 'run/mlflow.db'}"
    for key in env:
        monkeypatch.delenv(key, raising=False)
    trackers.enter_phase(tmp_path / "run", 2, "solver", [])
    assert "TENSORBOARD_LOGGING_DIR" not in os.environ
    trackers.enter_phase(tmp_path / "run", 2, "solver", ["tensorboard"])
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(logs)
    # a second run in the same process (an ablation's next variant) gets its own folders,
    # not the first run's, which `enter_phase` left in the environment
    other = trackers.phase_environment(tmp_path / "other", 1, "solver")
    assert other["WANDB_DIR"] == str(tmp_path / "other")
    assert other["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path / 'other/mlflow.db'}"


def test_grpo_config_reports_to_the_run_trackers(tmp_path):
    from rzero.config import SolverConfig
    from rzero.training.grpo import grpo_config

    role = SolverConfig(steps=1, group_size=2, prompts_per_step=1)
    assert grpo_config(role, tmp_path, seed=0).report_to == []
    assert grpo_config(role, tmp_path, seed=0, report_to=["mlflow"]).report_to == ["mlflow"]
