"""`run.push_to_hub` (rzero.rundir.hub, rzero.engine.hub) against a local fake of the hub's
HTTP API (tests/fake_hub.py) through the real `huggingface_hub` client: every trained
phase's checkpoint becomes its own branch with the model card, main gets the card, hub.json
records the pushes, and a hub that cannot be reached costs a warning, not the run."""

import json
import shutil

import pytest
from fake_hub import FakeHub

from rzero.config import ConfigError, load_config
from rzero.math.layout import LAYOUT
from rzero.rundir import RunDir
from rzero.rundir.hub import HubPush, pushed


def cfg_with(**sets):
    return load_config(None, [f"{k}={v}" for k, v in sets.items()])


def committed_run(tmp_path, checkpoint):
    cfg = cfg_with(
        **{
            "run.push_to_hub": "true",
            "run.hub_model_id": "me/rzero-tiny",
            "run.report_to": "none",
            "run.iterations": 1,
        }
    )
    run = RunDir(tmp_path / "run", LAYOUT)
    run.prepare(cfg)
    for phase in ("challenger", "solver"):
        out = run.iter_dir(1) / phase
        shutil.copytree(checkpoint, out)
        run.commit(
            cfg, 1, phase, {"checkpoint": run.relative(out), "metrics": {"mean_reward": 0.25}}, 1.0
        )
    run.commit(
        cfg,
        1,
        "eval",
        {"checkpoint": run.relative(run.iter_dir(1) / "solver"), "metrics": {"average": 0.4}},
        1.0,
    )
    return cfg, run


def test_each_trained_checkpoint_is_a_branch_with_the_model_card(
    tiny_checkpoint, tmp_path, monkeypatch
):
    import huggingface_hub.constants

    cfg, run = committed_run(tmp_path, tiny_checkpoint)
    with FakeHub() as hub:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
        push = HubPush(cfg, run)
        push(1, "eval", {})
        push(1, "eval", {})  # nothing left to push: no second commit of either branch
    branches = hub.repos["me/rzero-tiny"]
    assert hub.private["me/rzero-tiny"]
    assert set(branches) == {"main", "iter-01-challenger", "iter-01-solver"}
    for branch in ("iter-01-challenger", "iter-01-solver"):
        files = branches[branch]
        assert files["model.safetensors"] == (tiny_checkpoint / "model.safetensors").read_bytes()
        assert json.loads(files["config.json"]) == json.loads(
            (tiny_checkpoint / "config.json").read_text()
        )
    card = branches["main"]["README.md"].decode()
    assert card.startswith("---\nlibrary_name: transformers\ntags:\n- rzero\n")
    assert "| `iter-01-challenger` | 1 | challenger | 0.400 | mean_reward 0.25 |" in card
    assert "| `iter-01-solver` | 1 | solver | 0.400 | mean_reward 0.25 |" in card
    assert 'revision="iter-01-solver"' in card and "## Recipe" in card
    assert [r["revision"] for r in pushed(run)] == ["iter-01-challenger", "iter-01-solver"]
    assert all(len(r["commit"]) == 40 for r in pushed(run))
    commits = [p for m, p in hub.requests if "/commit/" in p]
    assert len(commits) == 4  # per branch: the card on main, then the checkpoint


def test_an_unreachable_hub_costs_a_warning_and_the_next_commit_retries(
    tiny_checkpoint, tmp_path, monkeypatch, caplog
):
    import huggingface_hub.constants

    cfg, run = committed_run(tmp_path, tiny_checkpoint)
    with FakeHub() as hub:
        closed = hub.url
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", closed)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    HubPush(cfg, run)(1, "challenger", {})  # no exception: the run goes on
    assert "iter-01-challenger of me/rzero-tiny not pushed" in caplog.text
    assert pushed(run) == []
    with FakeHub() as hub:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
        HubPush(cfg, run)(1, "solver", {})
    assert [r["revision"] for r in pushed(run)] == ["iter-01-challenger", "iter-01-solver"]


def test_push_to_hub_needs_a_repository_id_and_is_outside_the_fingerprint():
    with pytest.raises(
        ConfigError,
        match="run.push_to_hub=true needs run.hub_model_id as 'user-or-org/name', got None",
    ):
        cfg_with(**{"run.push_to_hub": "true"})
    with pytest.raises(ConfigError, match="got 'rzero'"):
        cfg_with(**{"run.push_to_hub": "true", "run.hub_model_id": "rzero"})
    pushing = cfg_with(**{"run.push_to_hub": "true", "run.hub_model_id": "me/x"})
    assert pushing.fingerprint() == cfg_with().fingerprint()  # turning it on resumes the run
