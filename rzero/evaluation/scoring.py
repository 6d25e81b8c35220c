"""Scoring (SPEC §4): pass@1 of greedy outputs, checked by math-verify on the last `\\boxed{}`,
and the results files (eval.json, eval.md).

The paper reports mean@32 for AMC and AIME and greedy accuracy elsewhere: a benchmark spec
ending in `@k` (`aime24@32`, see `rzero.evaluation.loaders`) is sampled k times whatever
`num_samples` the others use. With k > 1 we sample at a temperature (1.0 by default) and
`pass@1` is then the mean@k estimate, so the `average` is always over one number per
benchmark.

The general-reasoning benchmarks (MMLU-Pro, SuperGPQA, BBEH) are scored by their items'
`scoring` (`rzero.evaluation.general`: the option named in the box, or BBEH's tolerant text
match) instead of math-verify; everything else is the same.

`direction` is math-verify's equivalence direction ("both": verify(answer, reference) and
verify(reference, answer); "either": one of them). A run passes its `labeling.equivalence`,
so evaluation checks answers the way the labelling compared them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rzero.evaluation.general import majority_general, problem_text, score_general
from rzero.evaluation.loaders import load_benchmarks, split_samples
from rzero.evaluation.synthetic import Item
from rzero.generation.interface import Generator, SamplingParams
from rzero.io import write_json_atomic, write_text_atomic
from rzero.labeling.answers import extract_boxed
from rzero.labeling.equivalence import Direction, equivalent, equivalent_many
from rzero.labeling.voting import majority_vote_many
from rzero.prompts.solver import solver_chat
from rzero.render import markdown_cell, markdown_table
from rzero.stats import mean_interval, wilson_interval

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- scoring


def score_completion(completion: str, answer: str, direction: Direction = "both") -> bool:
    """True when the completion's last `\\boxed{}` is equivalent to `answer`; no box: False."""
    predicted = extract_boxed(completion)
    if predicted is None or not predicted.strip():
        return False
    return equivalent(predicted, answer, direction=direction)


def label_correct(label: str | None, answer: str | None, direction: Direction) -> bool | None:
    """Whether a pseudo-label is equivalent to the known `answer` (None when there is none;
    no label: False)."""
    if answer is None:
        return None
    if label is None:
        return False
    return score_completion(f"\\boxed{{{label}}}", answer, direction)


def score_benchmark(
    name: str,
    items: Sequence[Item],
    completions: Sequence[Sequence[str]],
    k: int,
    direction: Direction = "both",
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-item records and the benchmark's row of metrics, for k completions per item.

    mean@k = mean over items of (right samples / k); maj@k = fraction of items whose
    majority answer over the k boxed answers (`majority_vote_many`) is right. Items with a
    `scoring` field are checked by `rzero.evaluation.general`, the rest by math-verify.
    """
    records = [
        {
            "benchmark": name,
            "id": item["id"],
            "problem": item["problem"],
            "answer": item["answer"],
            "completions": list(outs),
            "predictions": [extract_boxed(text) for text in outs],
        }
        for item, outs in zip(items, completions, strict=True)
    ]
    math = [r for r, item in zip(records, items, strict=True) if "scoring" not in item]
    general = [(r, item) for r, item in zip(records, items, strict=True) if "scoring" in item]
    if k > 1:
        all_votes = majority_vote_many([r["predictions"] for r in math])
        for r, votes in zip(math, all_votes, strict=True):
            r["majority"], r["p_hat"] = votes.label, votes.p_hat
        for r, item in general:
            r["majority"] = majority_general(r["predictions"], item)
    for r, item in general:
        r["correct"] = [score_general(p, item) for p in r["predictions"]]
        if k > 1:
            r["majority_correct"] = score_general(r["majority"], item)
    # one batch of math-verify checks: every sample's answer, then every majority answer
    pairs = [(p, r["answer"]) for r in math for p in r["predictions"]]
    if k > 1:
        pairs += [(r["majority"], r["answer"]) for r in math]
    verdicts = iter(equivalent_many(pairs, direction=direction))
    for r in math:
        r["correct"] = [next(verdicts) for _ in r["predictions"]]
    for r in records:
        r["mean"] = sum(r["correct"]) / k
    n = len(records)
    row: dict[str, Any] = {
        "n": n,
        "pass@1": sum(r["mean"] for r in records) / n if n else 0.0,
        "pass@1_interval": pass_at_1_interval([r["mean"] for r in records], k),
    }
    if k > 1:
        for r in math:
            r["majority_correct"] = next(verdicts)
        row[f"mean@{k}"] = row["pass@1"]
        row[f"maj@{k}"] = sum(r["majority_correct"] for r in records) / n if n else 0.0
    return records, row


def pass_at_1_interval(means: Sequence[float], k: int) -> list[float] | None:
    """The 95 % interval of a benchmark's pass@1 from its items' fractions right (`means`).

    k = 1 (greedy, each item right or wrong): the Wilson interval of c right out of n items,
    as the run report and `rzero compare` give it. k > 1 (mean@k): x̄ ± t·s/√n over the n
    items' fractions, since an item's k samples are not independent draws of the benchmark
    (a Wilson interval over n·k samples would be too narrow); clipped to [0, 1]. None with
    fewer than 2 items sampled k > 1 times."""
    if k == 1:
        return list(wilson_interval(round(sum(means)), len(means)))
    if len(means) < 2:
        return None
    _, low, high = mean_interval(means)
    return [max(0.0, low), min(1.0, high)]


# ---------------------------------------------------------------- evaluate


def evaluate(
    generator: Generator,
    benchmarks: Sequence[str] | Mapping[str, list[Item]],
    *,
    limit: int | None = None,
    max_new_tokens: int = 512,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    batch: int = 64,
    prompt_path: str | None = None,
    direction: Direction = "both",
) -> dict[str, Any]:
    """Score `generator` on benchmarks (names, or already loaded {name: items}).

    num_samples k = 1: greedy decoding; pass@1 = fraction of items whose boxed answer is
    right. k > 1 (or a benchmark named `name@k`, which uses its own k): k samples at
    `temperature`;
      mean@k = mean over items of (right samples / k)   (also reported as pass@1),
      maj@k  = fraction of items whose majority-vote answer over the k boxed answers
               is right.
    `average` is the unweighted mean of pass@1 over benchmarks, as in the paper's tables.
    `direction`: math-verify's equivalence direction (the run's labeling.equivalence).
    """
    if num_samples < 1:
        raise ValueError(f"num_samples={num_samples}: need at least 1")
    if batch < 1:
        raise ValueError(f"batch={batch}: need at least 1")
    if isinstance(benchmarks, str):  # "a,b" rather than ["a", "b"]
        benchmarks = [b for b in benchmarks.split(",") if b.strip()]
    data = (
        dict(benchmarks)
        if isinstance(benchmarks, Mapping)
        else load_benchmarks(list(benchmarks), limit=limit)
    )
    if isinstance(benchmarks, Mapping) and limit is not None:
        data = {name: items[:limit] for name, items in data.items()}
    samples = {name: split_samples(name)[1] or num_samples for name in data}
    greedy = num_samples == 1

    def sampling(k: int) -> SamplingParams:
        return SamplingParams(
            temperature=0.0 if k == 1 else temperature,
            top_p=1.0 if k == 1 else top_p,
            top_k=0,
            max_new_tokens=max_new_tokens,
            seed=seed,
        )

    params = sampling(num_samples)
    t_start = time.perf_counter()
    gen_seconds0, gen_tokens0 = generator.stats.seconds, generator.stats.new_tokens
    summary: dict[str, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    bar = tqdm(
        total=sum(len(items) for items in data.values()), desc="eval", unit="item", leave=False
    )  # with an ETA: a 300-item set takes minutes on a CPU
    for name, items in data.items():
        # ---- generate, `batch` prompts per call
        bar.set_postfix_str(name)
        k = samples[name]
        prompts = [solver_chat(problem_text(item), prompt_path) for item in items]
        completions: list[list[str]] = []
        for start in range(0, len(prompts), batch):
            chunk = prompts[start : start + batch]
            completions += generator.generate(chunk, k, replace(sampling(k), seed=seed + start))
            bar.update(len(chunk))
            logger.debug("eval %s: %d/%d items generated", name, len(completions), len(items))
        # ---- score
        item_records, row = score_benchmark(name, items, completions, k, direction)
        records += item_records
        summary[name] = row
        logger.info("eval %s: pass@1 %.3f over %d items", name, row["pass@1"], row["n"])
    bar.close()
    # pass@1 for every benchmark, then mean@k and maj@k for each k sampled
    metrics = ["pass@1"] + [
        m
        for k in dict.fromkeys(sorted(samples.values()))
        if k > 1
        for m in (f"mean@{k}", f"maj@{k}")
    ]
    averages = {}
    for m in metrics:
        rows = [r[m] for r in summary.values() if m in r]
        averages[m] = sum(rows) / len(rows) if rows else 0.0
    return {
        "benchmarks": summary,
        "average": averages["pass@1"],
        "averages": averages,
        "metrics": metrics,
        "settings": {
            "decoding": "greedy" if greedy else "sampled",
            "num_samples": num_samples,
            "samples": samples,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_new_tokens": max_new_tokens,
            "seed": seed,
            "limit": limit,
            "prompt_path": prompt_path,
            "equivalence": direction,
        },
        "timing": {
            "seconds": time.perf_counter() - t_start,
            "generation_seconds": generator.stats.seconds - gen_seconds0,
            "new_tokens": generator.stats.new_tokens - gen_tokens0,
        },
        "items": records,
    }


# ---------------------------------------------------------------- reports


def results_markdown(results: dict[str, Any]) -> str:
    """The summary as a Markdown table, accuracies in percent, pass@1 with its 95 % interval
    (`pass_at_1_interval`)."""
    metrics = results["metrics"]
    settings = results["settings"]
    lines = ["# Evaluation", ""]
    if "model" in results:
        lines.append(f"Model: `{markdown_cell(results['model'])}`  ")
    lines += [
        f"Decoding: {settings['decoding']}, {settings['num_samples']} sample(s), "
        f"temperature {settings['temperature']}, max {settings['max_new_tokens']} new "
        f"tokens, seed {settings['seed']}",
        "",
    ]

    def interval(row: dict[str, Any]) -> str:
        iv = row.get("pass@1_interval")
        return f"[{100 * iv[0]:.1f}, {100 * iv[1]:.1f}]" if iv else "–"

    rows = [
        [
            name,
            row["n"],
            *(f"{100 * row[m]:.1f}" if m in row else "–" for m in metrics[:1]),
            interval(row),
            *(f"{100 * row[m]:.1f}" if m in row else "–" for m in metrics[1:]),
        ]
        for name, row in results["benchmarks"].items()
    ]
    rows.append(
        [
            "**average**",
            "",
            f"{100 * results['averages'][metrics[0]]:.1f}",
            "",
            *(f"{100 * results['averages'][m]:.1f}" for m in metrics[1:]),
        ]
    )
    table = markdown_table(
        ["benchmark", "n", metrics[0], "95 % interval", *metrics[1:]],
        rows,
        align="lrrr" + "r" * (len(metrics) - 1),
    )
    note = (
        "\npass@1's interval: Wilson over the n items (greedy), or the t-interval of the "
        "items' fractions right (k samples each). The average (unweighted over "
        "benchmarks, as in the paper's tables) has none.\n"
    )
    return "\n".join(lines) + "\n" + table + note


def write_results(results: dict[str, Any], output_dir: str | Path) -> tuple[Path, Path]:
    """`eval.json` (everything, per-item completions included) and `eval.md`, atomically."""
    out = Path(output_dir)
    write_json_atomic(out / "eval.json", results)
    write_text_atomic(out / "eval.md", results_markdown(results))
    return out / "eval.json", out / "eval.md"


def evaluation_phase(
    generator: Generator, cfg, out_dir: str | Path, *, prompt_path: str | None = None
) -> dict[str, Any]:
    """A loop's evaluation phase: `evaluate` on `cfg.eval`'s benchmarks, limit, lengths and
    samples with the run's seed and grader direction, the results written to `out_dir`
    (eval.json, eval.md), and the marker's metrics: the average and every benchmark's
    pass@1 and item count."""
    e = cfg.eval
    results = evaluate(
        generator,
        e.benchmarks,
        limit=e.limit,
        max_new_tokens=e.max_new_tokens,
        num_samples=e.num_samples,
        seed=cfg.run.seed,
        prompt_path=prompt_path,
        direction=cfg.labeling.equivalence,
    )
    write_results(results, out_dir)
    return {
        "metrics": {"average": results["average"]}
        | {
            f"{name}/{key}": r[key]
            for name, r in results["benchmarks"].items()
            for key in ("pass@1", "n")
        }
    }
