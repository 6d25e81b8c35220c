"""Label-accuracy audit (SPEC §3): an external judge re-solves a sample of pseudo-labelled
questions, and we report how often the majority-vote label ỹ agrees with it.

    sampling.py  which questions of a run directory are judged (seeded, stable)
    judge.py     the OpenAI-compatible judge, its verdicts and their cache
    report.py    label accuracy with Wilson intervals: JSON, Markdown, HTML, PNG
    run.py       audit_run: sample, judge (an endpoint, or a local model when one is chosen),
                 report
    exact.py     no judge configured: the computable labels judged exactly, and how many
                 labels need a judge
    executor.py  the executor as judge of a code run (audit.judge: executor): exact, every label
    threshold.py a measured label accuracy placed on the embedded model's label-accuracy curve
    hand.py      a person's audit of a seeded sample of kept labels, and where a comparison
                 finds it

Only this package talks to a judge. `rzero audit RUN_DIR` (rzero/cli/commands.py) runs it on a finished
run; `audit.enabled` runs it inline after each iteration.
"""

from rzero.audit.judge import PROMPT_VERSION, Judge, JudgeReply, cache_key, verdict_of
from rzero.audit.report import build_report, summarize, wilson_interval, write_report
from rzero.audit.run import audit_run
from rzero.audit.sampling import AuditItem, select_items

__all__ = [
    "PROMPT_VERSION",
    "AuditItem",
    "Judge",
    "JudgeReply",
    "audit_run",
    "build_report",
    "cache_key",
    "select_items",
    "summarize",
    "verdict_of",
    "wilson_interval",
    "write_report",
]
