"""`rzero export`: a run's tables as a `datasets` dataset (Parquet and a card) that
`datasets` loads back row for row, and its upload as a dataset repository."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from fake_hub import FakeHub
from fake_runs import labelled_row, step_row, write_run

from rzero.cli import main
from rzero.io import write_jsonl_atomic, write_text_atomic


def _run(tmp_path):
    run_dir = tmp_path / "run"
    for k in (1, 2):
        write_run(
            run_dir,
            {0: [step_row(f"What is {k} + {i}?", str(k + i), iteration=k) for i in range(3)]},
            [labelled_row(f"What is {k} + {i}?", str(k + i), kept=i != 1) for i in range(3)],
            iteration=k,
        )
    # a column of mixed types (a number, then text) and a row with a field the others lack
    rows = [dict(labelled_row("What is 7 + 1?", "8"), extra=8)]
    rows.append(dict(labelled_row("What is 7 + 2?", "9"), extra="nine", label_correct=True))
    write_jsonl_atomic(run_dir / "iter_03" / "labelled.jsonl", rows)
    write_text_atomic(run_dir / "config.yaml", yaml.safe_dump({"run": {"iterations": 3}}))
    return run_dir


def test_an_export_loads_back_through_datasets_row_for_row(tmp_path, capsys):
    import datasets

    run_dir, out = _run(tmp_path), tmp_path / "export"
    assert main(["export", str(run_dir), "--to", str(out)]) == 0
    assert "labelled: " in capsys.readouterr().out
    labelled = datasets.load_dataset(str(out), "labelled", split="train")
    assert labelled.num_rows == 8
    assert labelled["iteration"] == [1, 1, 1, 2, 2, 2, 3, 3]
    assert labelled["question"][4] == "What is 2 + 1?" and labelled["kept"][4] is False
    assert labelled["answers"][0] == ["1"] * 10 and labelled["p_hat"][0] == 0.5
    assert labelled["extra"][6:] == ["8", '"nine"']  # mixed types kept as JSON text
    assert json.loads(labelled["groups"][0]) == {"1": 5}  # votes per answer: JSON, not fields
    steps = datasets.load_dataset(
        "parquet", data_files=str(out / "challenger_steps" / "data.parquet"), split="train"
    )
    assert steps.num_rows == 6 and steps["reward"] == [0.9] * 6
    card = (out / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in front["configs"]] == ["challenger_steps", "labelled"]
    assert "| labelled | 3 | 3 | 2 | 8 |" in card
    assert "1 of 1 labels right (100.0 %)" in card  # exact where the truth is known
    # a second export into the same folder is refused, and nothing in it changes
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["export", str(run_dir), "--to", str(out)]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error")]
    assert len(err) == 1 and "not empty" in err[0]
    assert before == {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_an_audited_run_carries_its_audit_in_the_card(tmp_path):
    run_dir, out = _run(tmp_path), tmp_path / "export"
    report = {"overall": {"accuracy": 0.75, "ci_low": 0.5, "ci_high": 0.9, "n_judged": 12}}
    (run_dir / "audit").mkdir()
    (run_dir / "audit" / "report.json").write_text(json.dumps(report))
    assert main(["export", str(run_dir), "--to", str(out)]) == 0
    assert (
        "judge audit: 75.0 % [50.0, 90.0] over 12 judged labels" in (out / "README.md").read_text()
    )


def test_nothing_to_export_or_no_run_is_one_line(tmp_path, capsys):
    assert main(["export", str(tmp_path / "nothing"), "--to", str(tmp_path / "o")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    write_text_atomic(empty / "config.yaml", yaml.safe_dump({"run": {"iterations": 1}}))
    assert main(["export", str(empty), "--to", str(tmp_path / "o")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error")]
    assert len(err) == 1 and "no rows to export yet" in err[0]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_an_export_is_pushed_as_a_dataset_repository(tmp_path, monkeypatch, capsys):
    import huggingface_hub.constants

    run_dir, out = _run(tmp_path), tmp_path / "export"
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    with FakeHub() as hub:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
        code = main(["export", str(run_dir), "--to", str(out), "--push-to-hub", "me/run-data"])
        assert code == 0, capsys.readouterr().err
        files = hub.repos["me/run-data"]["main"]
        assert hub.kinds["me/run-data"] == "dataset" and hub.private["me/run-data"]
    assert set(files) == {"README.md", "labelled/data.parquet", "challenger_steps/data.parquet"}
    assert files["labelled/data.parquet"] == (out / "labelled" / "data.parquet").read_bytes()
    # no hub: the export stays on disk, one line says why the push failed
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    again = tmp_path / "again"
    code = main(["export", str(run_dir), "--to", str(again), "--push-to-hub", "me/run-data"])
    assert code == 1 and (again / "labelled" / "data.parquet").is_file()
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x.startswith("error")]
    assert len(err) == 1 and err[0].startswith("error: pushing")


@pytest.fixture(autouse=True)
def _offline_datasets(tmp_path, monkeypatch):
    # `datasets` caches what it loads; keep it in the test's folder and off the network
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "0"))
