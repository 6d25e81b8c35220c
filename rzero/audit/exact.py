"""The audit with no judge (no `audit.base_url`, no local judge chosen): it judges exactly
what needs no judge and says what does.

A math run's labels whose question is one arithmetic expression
(`rzero.labeling.computable`: "What is 17 × 23 + 4?") are judged against the computed
answer, exactly, as the executor judges a code run's labels (`rzero.audit.executor`):
every such labelled row of the run (each challenger step's valid questions, each
iteration's labelled pool, both sets), no sample, nothing cached (a check takes
milliseconds). That subset is small and skewed to the easiest questions, and on a
self-play pool often empty; the rest need a judge, and `judge_hint` says how many of the
audit's sample (`rzero.audit.sampling`) and how to configure one. The run's own base model
as judge is never started here: it shows that the machinery works, not whether the labels
are true, and takes about a minute a label on a CPU, so it is an explicit choice
(`rzero audit --judge embedded`; `audit.enabled` inline).
"""

from __future__ import annotations

import hashlib
from typing import Any

from rzero.audit.report import build_report, write_report
from rzero.audit.sampling import labelled_items, select_items
from rzero.config import AuditConfig
from rzero.labeling.computable import computed_answer
from rzero.labeling.equivalence import Direction, equivalent_many
from rzero.rundir import RunDir

EXACT_NOTE = (
    "No judge is configured (audit.base_url), so only the labels whose question is one "
    "arithmetic expression (rzero.labeling.computable) are judged: exactly, against the "
    "computed answer, every such label of the run (no sample). They are a small subset, "
    "skewed to the easiest questions; {need} of the {sampled} labels in the audit sample "
    "need a judge: {how}."
)


HOW = (
    "configure one with --set audit.base_url=URL --set audit.model=NAME (any "
    "OpenAI-compatible endpoint, its key's variable in audit.api_key_env; e.g. `vllm serve "
    "MODEL` of a model stronger than the run's), or pass --judge embedded for the run's own "
    "base model (a machinery check, not truth)"
)


def judge_hint(need: int) -> str:
    """The one line `rzero audit` ends with when no judge was configured."""
    labels = (
        "1 label of the audit sample needs"
        if need == 1
        else f"{need} labels of the audit sample need"
    )
    return f"{labels} a judge: {HOW}"


def computable_rows(run: RunDir) -> list[dict[str, Any]]:
    """Every labelled row of the run whose question is computable, as audit items with
    its computed answer (``answer``): challenger steps (source "step") and labelled pools
    (both sets)."""
    steps = run.config().challenger.steps
    items = []
    for k in run.iterations():
        for r in run.rows(k, "challenger_steps"):
            if not (r.get("valid") and r.get("label") is not None and r.get("question")):
                continue
            if (answer := computed_answer(r["question"])) is None:
                continue
            step = int(r.get("step", 0))
            global_step = r.get("global_step")
            items.append(
                dict(
                    source="step",
                    iteration=int(r.get("iteration", k)),
                    step=step,
                    global_step=(k - 1) * steps + step if global_step is None else global_step,
                    question=r["question"],
                    label=str(r["label"]),
                    p_hat=float(r["p_hat"]),
                    kept=None,
                    answer=answer,
                )
            )
        for r in run.rows(k, "labelled"):
            if r.get("label") is None or not r.get("question"):
                continue
            if (answer := computed_answer(r["question"])) is None:
                continue
            items += labelled_items(k, r, label=str(r["label"]), answer=answer)
    return items


def need_judge(run: RunDir, cfg: AuditConfig) -> tuple[int, int]:
    """(distinct labels of the audit sample whose question is not computable, distinct
    labels in the sample): what a configured judge would be asked."""
    sample = {(it.question, it.label) for it in select_items(run, cfg.per_step, cfg.seed)}
    return sum(computed_answer(q) is None for q, _ in sample), len(sample)


def audit_exact(run: RunDir, cfg: AuditConfig, direction: Direction = "both") -> dict[str, Any]:
    """Judge the computable labels of a math run exactly; write and return the report
    (RUN_DIR/audit/report.{json,md,html} and accuracy.png), with ``need_judge`` (how many
    labels of the sample need a judge) and ``sampled``."""
    items = computable_rows(run)
    verdicts = equivalent_many([(it["label"], it["answer"]) for it in items], direction=direction)
    rows = []
    for it, right in zip(items, verdicts, strict=True):
        key = hashlib.sha256(f"{it['question']}\n{it['label']}".encode()).hexdigest()[:16]
        rows.append(
            {k: v for k, v in it.items() if k != "answer"}
            | {
                "key": key,
                "verdict": "correct" if right else "wrong",
                "judge_answer": it["answer"],
                "reason": None,
                "response": None,
            }
        )
    need, sampled = need_judge(run, cfg)
    judge = {
        "model": "none (computed answers only)",
        "host": "local",
        "prompt_version": "exact",
        "temperature": 0.0,
        "max_tokens": 0,
        "seed": None,
        "embedded": False,
        "exact": True,
        "note": EXACT_NOTE.format(need=need, sampled=sampled, how=HOW),
        "equivalence": direction,
    }
    report = build_report(
        rows,
        judge,
        {
            "requests": 0,
            "cached": 0,
            "model": run.config().model.name,
            "judged_now": len(rows),
            "need_judge": need,
            "sampled": sampled,
        },
    )
    write_report(report, run.path / "audit")
    return report
