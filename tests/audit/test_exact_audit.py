"""`rzero audit` with no judge configured (rzero.audit.exact): it starts none, judges the
labels whose question is one arithmetic expression exactly, and ends in one line saying how
many labels need a judge; the run's own base model as judge is an explicit choice
(`--judge embedded`), a machinery check, with its time estimated before it starts."""

from __future__ import annotations

import json

from fake_runs import labelled_row, step_row, write_run

from rzero.audit.judge import PROMPT_VERSION, cache_key
from rzero.audit.run import embedded_estimate
from rzero.cli import main
from rzero.config import AuditConfig
from rzero.io import write_jsonl_atomic

WORD_PROBLEM = "A train leaves at noon going 60 km/h; how far has it gone by 3 pm?"


def _run(tmp_path):
    return write_run(
        tmp_path,
        {
            0: [
                step_row("What is 2+3?", "5"),  # computable, the label right
                step_row("Compute 4 times 4.", "15"),  # computable, the label wrong
                step_row(WORD_PROBLEM, "180"),  # not computable: needs a judge
            ]
        },
        [labelled_row("What is 2+3?", "5"), labelled_row(WORD_PROBLEM, "180", kept=False)],
    )


def test_no_judge_judges_the_computable_labels_exactly_and_says_what_needs_one(tmp_path, capsys):
    run = _run(tmp_path)
    assert main(["audit", str(run)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    report = json.loads((run / "audit" / "report.json").read_text())
    assert report["judge"]["exact"] and not report["judge"]["embedded"]
    # distinct (question, label): 2+3 -> 5 correct, 4*4 = 16 -> 15 wrong; the word problem
    # is left out
    assert (report["overall"]["correct"], report["overall"]["wrong"]) == (1, 1)
    assert all(it["question"] != WORD_PROBLEM for it in report["items"])
    assert {it["source"] for it in report["items"]} == {"step", "labelled_kept", "labelled_all"}
    # the sample a judge would see: 3 step labels and 2 pool labels, 3 distinct (question,
    # label) pairs, of which one (the word problem) is not computable
    assert (report["need_judge"], report["sampled"]) == (1, 3)
    assert out[0].startswith("exact label accuracy of the labels whose question is one")
    assert "0.500 [" in out[0] and out[0].endswith("2 judged")
    assert out[-2].startswith("audit report: ")
    assert out[-1].startswith("1 label of the audit sample needs a judge: configure one with")
    assert "audit.base_url" in out[-1] and "vllm serve" in out[-1] and "--judge embedded" in out[-1]
    assert "need a judge" in (run / "audit" / "report.md").read_text()
    assert not (run / "audit" / "judge_server.log").exists()  # no judge was started
    # the science card's judge row reads this audit, not "not audited"
    card = (run / "report.md").read_text()
    row = next(line for line in card.splitlines() if line.startswith("| judge quality"))
    assert "no judge (`rzero audit` without one): exact label accuracy 0.50 [" in row
    assert "over 2 judged labels" in row and "1 sampled labels need a judge" in row


def test_a_run_with_nothing_computable_says_so_and_exits_0(tmp_path, capsys):
    run = write_run(tmp_path, {0: [step_row(WORD_PROBLEM, "180")]}, [])
    assert main(["audit", str(run)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("no labelled question is one arithmetic expression")
    assert out[-1].startswith("1 label of the audit sample needs a judge")
    assert (
        "no question is one arithmetic expression, so no label was judged exactly"
        in (run / "report.md").read_text()
    )


def test_the_base_model_as_judge_is_chosen_explicitly_and_labelled_a_machinery_check(
    tmp_path, capsys
):
    write_run(tmp_path, {0: [step_row(WORD_PROBLEM, "180")]}, [])
    spec = str(tmp_path / "no-such-checkpoint")  # resolving or serving it would fail
    cfg = AuditConfig()
    key = cache_key(
        WORD_PROBLEM, "180", spec, temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=0
    )
    verdict = {
        "key": key,
        "question": WORD_PROBLEM,
        "label": "180",
        "judge_model": spec,
        "prompt_version": PROMPT_VERSION,
        "verdict": "correct",
        "judge_answer": "180",
        "reason": None,
        "attempts": 1,
        "response": "\\boxed{180}",
    }
    write_jsonl_atomic(tmp_path / "audit" / "cache.jsonl", [verdict])
    # every verdict cached: the local judge is chosen but need not start
    assert main(["audit", str(tmp_path), "--judge", "embedded", "--judge-model", spec]) == 0
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["judge"]["embedded"] and report["judge"]["model"] == spec
    assert report["judge"]["note"].startswith("A machinery check")
    assert report["overall"]["correct"] == 1 and "need_judge" not in report
    assert "needs a judge" not in capsys.readouterr().out


def test_the_local_judge_time_is_estimated_from_its_tokens():
    # 30 labels x 16 tokens x 0.11 s = 52.8 s
    assert embedded_estimate(30, 16) == "up to about 53 s on a 2-core CPU"
    # 35 labels x 512 tokens x 0.11 s = 1971 s = 32.9 min
    assert embedded_estimate(35, 512) == "up to about 33 min on a 2-core CPU (less on a GPU)"
