"""Benchmarks and scoring for the solver (SPEC §4): pass@1 of greedy outputs, checked by
math-verify on the last `\\boxed{}`.

    synthetic.py  the embedded, procedurally generated benchmark (answers computed by sympy)
    easy.py       the embedded benchmark `easy`: one- and two-step problems, small numbers
    loaders.py    benchmarks by name: synthetic, the hub's (cached as JSONL), local JSONL
    general.py    MMLU-Pro, SuperGPQA, BBEH: options in the prompt, choice and text scoring
    scoring.py    score_completion, score_benchmark, evaluate, write_results, and
                  evaluation_phase (every loop's evaluation phase)

`rzero eval` (rzero/cli/commands.py) scores a model from the command line. This package imports
nothing from training (no trl, no rzero.training.grpo or rzero.math.run).
"""

from rzero.evaluation.loaders import (
    GENERAL_BENCHMARKS,
    HUB_BENCHMARKS,
    BenchmarkError,
    BenchmarkUnavailable,
    hub_name,
    load_benchmark,
    load_benchmarks,
    load_jsonl_benchmark,
    load_question_set,
    parse_benchmark_spec,
    split_samples,
)
from rzero.evaluation.scoring import (
    evaluate,
    evaluation_phase,
    label_correct,
    pass_at_1_interval,
    results_markdown,
    score_benchmark,
    score_completion,
    write_results,
)
from rzero.evaluation.synthetic import SYNTHETIC, Item, render_answer, synthetic_benchmark

__all__ = [
    "load_question_set",
    "pass_at_1_interval",
    "GENERAL_BENCHMARKS",
    "HUB_BENCHMARKS",
    "SYNTHETIC",
    "BenchmarkError",
    "BenchmarkUnavailable",
    "Item",
    "evaluate",
    "evaluation_phase",
    "hub_name",
    "load_benchmark",
    "load_benchmarks",
    "load_jsonl_benchmark",
    "parse_benchmark_spec",
    "render_answer",
    "results_markdown",
    "score_benchmark",
    "label_correct",
    "score_completion",
    "split_samples",
    "synthetic_benchmark",
    "write_results",
]
