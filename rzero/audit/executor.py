"""The executor as the audit's judge (`audit.judge: executor`, a rzero_code run).

A code run's pseudo-label ỹ is the majority vote on the output of `f(input)`; the sandbox can
compute that output, so the audit is exact: every labelled row of the run (each challenger
step's valid proposals, each iteration's labelled pool) is judged, not a sample
(`audit.per_step` does not apply), by running the program on its input again in the sandbox
and comparing with `outputs_equal`. An item is unjudged only when that run fails (a timeout
on a loaded machine, say), never counted wrong. Nothing is cached: the runs take about a
tenth of a second each. The report is the model judge's (`build_report`, `write_report`),
marked as exact.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rzero.audit.report import build_report, write_report
from rzero.audit.sampling import labelled_items
from rzero.executor.sandbox import Limits, run_many
from rzero.executor.tasks import CodeTask, outputs_equal
from rzero.rundir import RunDir

EXECUTOR_NOTE = (
    "The judge is the executor: each program was run on its input in the sandbox "
    "and the label compared with that output, so every verdict is exact and "
    "every labelled item is judged (no sample)."
)


def _items(run: RunDir) -> list[dict[str, Any]]:
    """Every labelled row: challenger steps (source "step") and labelled pools (both sets)."""
    steps = run.config().challenger.steps
    items = []
    for k in run.iterations():
        for r in run.rows(k, "challenger_steps"):
            if r.get("valid") and r.get("label") is not None:
                items.append(
                    dict(
                        source="step",
                        iteration=k,
                        step=r["step"],
                        global_step=r.get("global_step", (k - 1) * steps + r["step"]),
                        task=r["task"],
                        question=r["question"],
                        label=r["label"],
                        p_hat=r["p_hat"],
                        kept=None,
                    )
                )
        for r in run.rows(k, "labelled"):
            if r.get("label") is None:
                continue
            items += labelled_items(k, r, task=r["task"], label=r["label"])
    return items


def audit_with_executor(run: RunDir) -> dict[str, Any]:
    """Judge every pseudo-label of a rzero_code run by running its program; write and return
    the report (RUN_DIR/audit/report.{json,md,html} and accuracy.png)."""
    cfg = run.config()
    items = _items(run)
    jobs = list(dict.fromkeys(it["task"] for it in items))
    tasks = [CodeTask.from_json(t) for t in jobs]
    limits = Limits(memory_bytes=cfg.code.memory_mb * 2**20)  # the run's own sandbox limits
    results = dict(
        zip(
            jobs,
            run_many(
                [(t.program, t.input) for t in tasks],
                cfg.code.timeout_s,
                limits=limits,
                max_workers=cfg.code.workers,
            ),
            strict=True,
        )
    )
    rows = []
    for it in items:
        result = results[it["task"]]
        if result.ok and result.output is not None:
            verdict = "correct" if outputs_equal(it["label"], result.output) else "wrong"
            answer, reason = result.output, None
        else:
            verdict, answer, reason = "unjudged", None, f"the program did not run: {result.error}"
        key = hashlib.sha256(f"{it['task']}\n{it['label']}".encode()).hexdigest()[:16]
        rows.append(
            {k: v for k, v in it.items() if k != "task"}
            | {
                "key": key,
                "verdict": verdict,
                "judge_answer": answer,
                "reason": reason,
                "response": None,
            }
        )
    judge = {
        "model": "executor",
        "host": "local sandbox",
        "prompt_version": "exact",
        "temperature": 0.0,
        "max_tokens": 0,
        "seed": None,
        "embedded": False,
        "exact": True,
        "note": EXECUTOR_NOTE,
        "equivalence": "outputs_equal",
    }
    report = build_report(
        rows,
        judge,
        {"requests": 0, "cached": 0, "judged_now": len(rows), "program_runs": len(jobs)},
    )
    write_report(report, run.path / "audit")
    return report
