"""Benchmarks and scoring for the solver (SPEC §4): pass@1 of greedy outputs, checked by
math-verify on the last `\\boxed{}`.

Benchmarks, by name:
- `synthetic` (or `synthetic:SEED`): embedded and procedurally generated, so evaluation works
  offline. Five kinds (arithmetic, fractions, percentages, linear equations, word problems) in
  three difficulty tiers; every answer is computed exactly with sympy, and every item keeps
  its structured `data` so the answer can be recomputed independently.
- `math500`, `gsm8k`, `amc23`, `minerva`, `olympiadbench`, `aime24`, `aime25`: fetched from
  the Hugging Face hub with `datasets` (see `HUB_BENCHMARKS`) and cached as JSONL under
  `$RZERO_CACHE/benchmarks/`, so a machine that fetched them once works offline afterwards.
  Without network the loader fails in seconds with `BenchmarkUnavailable`.
- `path/to/file.jsonl` or `name=path/to/file.jsonl`: rows with `problem` and `answer` fields
  (`id` optional), always available.

Where we depart from the paper: the paper reports mean@32 for AMC and AIME; here one
`num_samples` applies to every benchmark. With `num_samples` k > 1 we sample at a
temperature (1.0 by default) and `pass@1` is then the mean@k estimate, so the `average`
is always over one number per benchmark.

This module imports nothing from training (no trl, no rzero.grpo or rzero.loop).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rzero.generation import Generator, SamplingParams
from rzero.io import write_json_atomic, write_jsonl_atomic, write_text_atomic
from rzero.labeling.answers import extract_boxed
from rzero.labeling.equivalence import equivalent, equivalent_many
from rzero.labeling.voting import majority_vote_many
from rzero.prompts import solver_chat

logger = logging.getLogger(__name__)

Item = dict[str, Any]

SYNTHETIC = "synthetic"
SYNTHETIC_SEED = 20250807  # fixed, so `synthetic` is the same benchmark everywhere
SYNTHETIC_PER_CELL = 16  # items per (kind, tier): 5 kinds x 3 tiers x 16 = 240
SYNTHETIC_KINDS = ("arithmetic", "fractions", "percentages", "linear", "word")
SYNTHETIC_TIERS = (1, 2, 3)
HUB_TIMEOUT_S = 3.0


class BenchmarkError(RuntimeError):
    """A benchmark that cannot be loaded; the message names it and says what to do."""


class BenchmarkUnavailable(BenchmarkError):
    """A hub benchmark requested without network access and without a cached copy."""


# ---------------------------------------------------------------- the synthetic benchmark
#
# Each generator draws parameters from `rng`, computes the answer with sympy, and returns
# (problem, answer expression, data, answer style). `data` holds every number the problem
# states, so a test can recompute the answer along a different code path.


def _sympy():
    import sympy

    return sympy


def render_answer(value, style: str = "frac") -> str:
    """An exact rational as a string math-verify parses: `12`, `-\\frac{3}{4}`, `118.8`.

    style "decimal" writes terminating decimals as decimals (money, percentages) and falls
    back to a fraction otherwise.
    """
    sp = _sympy()
    q = sp.Rational(value)
    if q.q == 1:
        return str(int(q.p))
    sign = "-" if q < 0 else ""
    p, d = abs(int(q.p)), int(q.q)
    if style == "decimal":
        twos, fives, rest = 0, 0, d
        while rest % 2 == 0:
            rest //= 2
            twos += 1
        while rest % 5 == 0:
            rest //= 5
            fives += 1
        if rest == 1:
            digits = max(twos, fives)
            scaled = p * 10**digits // d  # exact: d divides 10**digits
            whole, frac = divmod(scaled, 10**digits)
            return f"{sign}{whole}.{frac:0{digits}d}"
    return f"{sign}\\frac{{{p}}}{{{d}}}"


def _paren(n: int) -> str:
    return f"({n})" if n < 0 else str(n)


_LATEX_OP = {"+": "+", "-": "-", "*": "\\times", "/": "\\div"}


def _gen_arithmetic(rng: random.Random, tier: int):
    sp = _sympy()
    if tier == 1:
        op = rng.choice("+-*")
        a = rng.randint(10, 99)
        b = rng.randint(2, 9) if op == "*" else rng.randint(10, 99)
        tokens = [str(a), op, str(b)]
    elif tier == 2:
        ops = [rng.choice("+-*"), rng.choice("+-*")]
        nums = [rng.randint(2, 30) for _ in range(3)]
        tokens = [str(nums[0]), ops[0], str(nums[1]), ops[1], str(nums[2])]
    else:
        while True:
            a, b, c, d = (rng.randint(-12, 20) for _ in range(4))
            op1, op3 = rng.choice("+-"), rng.choice("+-")
            op2 = rng.choice("*/")
            right = c + d if op3 == "+" else c - d
            if right != 0:
                break
        tokens = ["(", _paren(a), op1, _paren(b), ")", op2, "(", _paren(c), op3, _paren(d), ")"]
    expression = " ".join(tokens).replace("( ", "(").replace(" )", ")")
    latex = " ".join(_LATEX_OP.get(t, t) for t in tokens).replace("( ", "(").replace(" )", ")")
    value = sp.parse_expr(expression, evaluate=True)  # Integer / Rational: exact
    problem = f"Compute ${latex}$."
    if not value.is_integer:
        problem += " Give your answer as a fraction in lowest terms."
    return problem, value, {"expression": expression}, "frac"


def _random_fraction(rng: random.Random, max_den: int) -> tuple[int, int]:
    from math import gcd

    while True:
        d = rng.randint(2, max_den)
        n = rng.randint(1, 2 * d)
        if gcd(n, d) == 1 and n != d:
            return n, d


def _gen_fractions(rng: random.Random, tier: int):
    sp = _sympy()
    if tier == 1:
        fracs = [_random_fraction(rng, 9) for _ in range(2)]
        ops = [rng.choice("+-")]
    elif tier == 2:
        fracs = [_random_fraction(rng, 12) for _ in range(2)]
        ops = [rng.choice("+-*/")]
    else:
        fracs = [_random_fraction(rng, 12) for _ in range(3)]
        ops = [rng.choice("+-"), rng.choice("*/")]
    # evaluated left to right; the rendering parenthesises the running left side
    value = sp.Rational(*fracs[0])
    latex = f"\\frac{{{fracs[0][0]}}}{{{fracs[0][1]}}}"
    for op, (n, d) in zip(ops, fracs[1:], strict=True):
        right = sp.Rational(n, d)
        value = {"+": value + right, "-": value - right, "*": value * right,
                 "/": value / right}[op]
        if latex.count("\\frac") > 1:
            latex = f"\\left({latex}\\right)"
        latex = f"{latex} {_LATEX_OP[op]} \\frac{{{n}}}{{{d}}}"
    problem = f"Compute ${latex}$. Give your answer as a fraction in lowest terms."
    return problem, value, {"fractions": [list(f) for f in fracs], "ops": ops}, "frac"


def _gen_percentages(rng: random.Random, tier: int):
    sp = _sympy()
    if tier == 1:
        p = rng.choice([10, 20, 25, 50, 75])
        n = 20 * rng.randint(1, 20)
        problem = f"What is {p}% of {n}?"
        value = sp.Rational(p, 100) * n
        data = {"form": "of", "p": p, "n": n}
    elif tier == 2:
        b = rng.choice([20, 25, 40, 50, 80, 125, 200, 250, 400, 500])
        a = rng.randint(1, b - 1)
        problem = (f"What percent of {b} is {a}? Give the number of percent, without "
                   "the % sign.")
        value = sp.Rational(100 * a, b)
        data = {"form": "what_percent", "a": a, "b": b}
    else:
        n = 10 * rng.randint(2, 50)
        p, q = 5 * rng.randint(1, 10), 5 * rng.randint(1, 10)
        problem = (f"A jacket costs {n} dollars. Its price is increased by {p}% and the new "
                   f"price is then decreased by {q}%. What is the final price in dollars?")
        value = n * (1 + sp.Rational(p, 100)) * (1 - sp.Rational(q, 100))
        data = {"form": "increase_decrease", "n": n, "p": p, "q": q}
    return problem, value, data, "decimal"


def _linear_latex(terms: Sequence[tuple[int, str]]) -> str:
    """`[(3, "x"), (-5, "")]` -> `3x - 5`."""
    parts: list[str] = []
    for coef, var in terms:
        if coef == 0:
            continue
        mag = abs(coef)
        body = (var if mag == 1 else f"{mag}{var}") if var else str(mag)
        if not parts:
            parts.append(body if coef > 0 else f"-{body}")
        else:
            parts.append(("+ " if coef > 0 else "- ") + body)
    return " ".join(parts) or "0"


def _nonzero(rng: random.Random, lo: int, hi: int) -> int:
    while True:
        v = rng.randint(lo, hi)
        if v != 0:
            return v


def _gen_linear(rng: random.Random, tier: int):
    sp = _sympy()
    x, y = sp.symbols("x y")
    if tier == 1:
        a, root, b = rng.randint(2, 9), rng.randint(-10, 10), rng.randint(-20, 20)
        c = a * root + b
        data = {"a": a, "b": b, "c": c}
        problem = f"Solve for $x$: ${_linear_latex([(a, 'x'), (b, '')])} = {c}$."
        (value,) = sp.solve(sp.Eq(a * x + b, c), x)
    elif tier == 2:
        while True:
            a, c = _nonzero(rng, -9, 9), _nonzero(rng, -9, 9)
            if a != c:
                break
        b, d = rng.randint(-20, 20), rng.randint(-20, 20)
        data = {"a": a, "b": b, "c": c, "d": d}
        problem = (f"Solve for $x$: ${_linear_latex([(a, 'x'), (b, '')])} = "
                   f"{_linear_latex([(c, 'x'), (d, '')])}$.")
        (value,) = sp.solve(sp.Eq(a * x + b, c * x + d), x)
        if not value.is_integer:
            problem += " Give your answer as a fraction in lowest terms."
    else:
        while True:
            a1, b1, a2, b2 = (_nonzero(rng, -6, 6) for _ in range(4))
            if a1 * b2 - a2 * b1 != 0:
                break
        sx, sy = rng.randint(-9, 9), rng.randint(-9, 9)
        c1, c2 = a1 * sx + b1 * sy, a2 * sx + b2 * sy
        ask = rng.choice(["x", "y", "x + y"])
        data = {"a1": a1, "b1": b1, "c1": c1, "a2": a2, "b2": b2, "c2": c2, "ask": ask}
        problem = (f"The numbers $x$ and $y$ satisfy ${_linear_latex([(a1, 'x'), (b1, 'y')])}"
                   f" = {c1}$ and ${_linear_latex([(a2, 'x'), (b2, 'y')])} = {c2}$. "
                   f"What is ${ask}$?")
        sol = sp.solve([sp.Eq(a1 * x + b1 * y, c1), sp.Eq(a2 * x + b2 * y, c2)], [x, y])
        value = {"x": sol[x], "y": sol[y], "x + y": sol[x] + sol[y]}[ask]
    return problem, sp.Rational(value), data, "frac"


_NAMES = ("Ava", "Ben", "Chloe", "Daniel", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jonas",
          "Kofi", "Lena", "Mateo", "Nora", "Omar", "Priya")


def _gen_word(rng: random.Random, tier: int):
    sp = _sympy()
    name = rng.choice(_NAMES)
    template = rng.choice({1: ["bags", "share"], 2: ["speed", "change"],
                           3: ["pipes", "sum_difference"]}[tier])
    style = "frac"
    if template == "bags":
        a, b, c = rng.randint(2, 30), rng.randint(2, 9), rng.randint(3, 12)
        problem = (f"{name} has {a} apples and buys {b} bags with {c} apples in each bag. "
                   f"How many apples does {name} have now?")
        value = sp.Integer(a) + b * c
        values = {"a": a, "b": b, "c": c}
    elif template == "share":
        k, each = rng.randint(2, 12), rng.randint(2, 15)
        n = k * each
        problem = (f"{name} shares {n} marbles equally among {k} friends. How many marbles "
                   "does each friend get?")
        value = sp.Rational(n, k)
        values = {"n": n, "k": k}
    elif template == "speed":
        v, t, s = rng.randint(30, 90), rng.randint(2, 6), rng.randint(2, 9)
        d = v * t
        problem = (f"A car travels {d} km in {t} hours. At the same speed, how many km does it "
                   f"travel in {s} hours?")
        value = sp.Rational(d, t) * s
        values = {"d": d, "t": t, "s": s}
    elif template == "change":
        x, p, y, q = rng.randint(2, 9), rng.randint(1, 5), rng.randint(1, 6), rng.randint(2, 8)
        z = 50 if x * p + y * q < 50 else 100
        problem = (f"{name} buys {x} pens at {p} dollars each and {y} notebooks at {q} dollars "
                   f"each, and pays with a {z}-dollar bill. How much change, in dollars, "
                   f"does {name} receive?")
        value = sp.Integer(z) - x * p - y * q
        values = {"x": x, "p": p, "y": y, "q": q, "z": z}
        style = "decimal"
    elif template == "pipes":
        a = rng.randint(2, 12)
        b = rng.choice([v for v in range(2, 13) if v != a])
        problem = (f"One pipe fills a tank in {a} hours and a second pipe fills it in {b} "
                   "hours. Working together, how many hours do the two pipes take to fill "
                   "the tank? Give your answer as a fraction in lowest terms.")
        value = 1 / (sp.Rational(1, a) + sp.Rational(1, b))
        values = {"a": a, "b": b}
    else:  # sum_difference
        small = rng.randint(5, 60)
        large = small + rng.randint(1, 40)
        s, d = large + small, large - small
        problem = (f"The sum of two numbers is {s} and their difference is {d}. What is the "
                   "larger number?")
        value = (sp.Integer(s) + d) / 2
        values = {"s": s, "d": d}
    return problem, value, {"template": template, **values}, style


_GENERATORS: dict[str, Callable[[random.Random, int], tuple[str, Any, dict, str]]] = {
    "arithmetic": _gen_arithmetic,
    "fractions": _gen_fractions,
    "percentages": _gen_percentages,
    "linear": _gen_linear,
    "word": _gen_word,
}


def synthetic_benchmark(seed: int = SYNTHETIC_SEED,
                        per_cell: int = SYNTHETIC_PER_CELL) -> list[Item]:
    """The embedded benchmark: `per_cell` items for each (tier, kind), deterministic in seed.

    Items are interleaved (round r holds one item of every tier and kind), so the first
    N items of a `--limit N` run cover all cells evenly.
    """
    sp = _sympy()
    rngs = {(tier, kind): random.Random(f"{seed}:{tier}:{kind}")
            for tier in SYNTHETIC_TIERS for kind in SYNTHETIC_KINDS}
    seen: set[str] = set()
    items: list[Item] = []
    for _ in range(per_cell):
        for tier in SYNTHETIC_TIERS:
            for kind in SYNTHETIC_KINDS:
                for _attempt in range(1000):
                    problem, value, data, style = _GENERATORS[kind](rngs[tier, kind], tier)
                    if problem not in seen:
                        break
                else:
                    raise RuntimeError(f"synthetic {kind} tier {tier}: cannot draw "
                                       f"{per_cell} distinct problems")
                seen.add(problem)
                if not isinstance(value, sp.Rational):
                    raise AssertionError(f"synthetic {kind}: non-rational answer {value!r}")
                items.append({"id": f"synthetic-{len(items):04d}", "problem": problem,
                              "answer": render_answer(value, style), "tier": tier,
                              "kind": kind, "data": data})
    return items


# ---------------------------------------------------------------- hub benchmarks


@dataclass(frozen=True)
class HubSource:
    repo: str
    config: str | None
    split: str
    problem_field: str
    answer_field: str
    gsm8k_answer: bool = False  # the answer is the text after '####'


HUB_BENCHMARKS: dict[str, HubSource] = {
    "math500": HubSource("HuggingFaceH4/MATH-500", None, "test", "problem", "answer"),
    "gsm8k": HubSource("openai/gsm8k", "main", "test", "question", "answer",
                       gsm8k_answer=True),
    "amc23": HubSource("math-ai/amc23", None, "test", "question", "answer"),
    "minerva": HubSource("math-ai/minervamath", None, "test", "question", "answer"),
    "olympiadbench": HubSource("math-ai/olympiadbench", None, "test", "question",
                               "final_answer"),
    "aime24": HubSource("HuggingFaceH4/aime_2024", None, "train", "problem", "answer"),
    "aime25": HubSource("math-ai/aime25", None, "test", "problem", "answer"),
}
_ALIASES = {"math": "math500", "minervamath": "minerva", "minervamath500": "minerva",
            "olympiad": "olympiadbench", "aime2024": "aime24", "aime2025": "aime25",
            "amc": "amc23", "amc2023": "amc23"}


def hub_name(name: str) -> str | None:
    """The HUB_BENCHMARKS key for a user-typed name (`MATH-500`, `aime_2024`), or None."""
    key = name.lower().replace("-", "").replace("_", "")
    key = _ALIASES.get(key, key)
    return key if key in HUB_BENCHMARKS else None


def hub_endpoint() -> str:
    """The endpoint `datasets` will talk to (HF_ENDPOINT as read when the hub client loaded)."""
    import huggingface_hub.constants

    return huggingface_hub.constants.ENDPOINT.rstrip("/")


def hub_problem(repo: str, timeout: float = HUB_TIMEOUT_S) -> str | None:
    """None when the hub answers for dataset `repo` within `timeout` s, else why not.

    A real HTTP request, not a TCP connect: sandboxes and proxies accept any connection.
    Name resolution ignores socket timeouts, so the probe runs in a daemon thread that we
    stop waiting for; without a network this answers in seconds, instead of the minute of
    retries `datasets` would spend.
    """
    import urllib.error
    import urllib.request

    url = f"{hub_endpoint()}/api/datasets/{repo}"
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                outcome.append(None if response.status == 200 else f"HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            outcome.append(f"HTTP {exc.code} from {url}")
        except (OSError, ValueError) as exc:  # URLError, timeouts, resets, bad URL
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            outcome.append(f"{type(exc).__name__}: {reason}" if str(reason) else
                           type(exc).__name__)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return outcome[0] if outcome else f"no answer from {url} within {timeout:.0f} s"


@contextmanager
def _hub_offline() -> Iterator[None]:
    """HF_HUB_OFFLINE for the duration: `datasets` then reads only its local cache.

    The flag is read at import time, so the already-imported modules are patched too.
    """
    import datasets.config
    import huggingface_hub.constants

    saved_env = os.environ.get("HF_HUB_OFFLINE")
    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


def _hub_answer(value: Any, source: HubSource) -> str:
    if isinstance(value, list):  # OlympiadBench: final_answer is a list of strings
        return ", ".join(str(v) for v in value)
    text = str(value).strip()
    if source.gsm8k_answer:
        text = text.split("####")[-1].strip().replace(",", "")
    return text


def _hub_cache_path(key: str) -> Path:
    from rzero.models import cache_dir

    return cache_dir() / "benchmarks" / f"{key}.jsonl"


def _unavailable(key: str, why: str) -> BenchmarkUnavailable:
    why = " ".join(why.split())  # one line, whatever the exception text held
    return BenchmarkUnavailable(
        f"benchmark {key!r}: {why}; pass a local JSONL file with `problem` and `answer` "
        f"fields instead (e.g. --benchmarks {key}=/path/to/{key}.jsonl)")


def load_hub_benchmark(name: str) -> list[Item]:
    """A hub benchmark: from our JSONL cache, else the hub, else the `datasets` cache."""
    key = hub_name(name)
    if key is None:
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {SYNTHETIC}, "
                             f"{', '.join(HUB_BENCHMARKS)}, or a path to a .jsonl file")
    source = HUB_BENCHMARKS[key]
    cached = _hub_cache_path(key)
    if cached.is_file():
        return load_jsonl_benchmark(cached, name=key)
    try:
        import datasets
    except ImportError as exc:
        raise BenchmarkError(f"benchmark {key!r} needs the `datasets` package") from exc
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    problem = "HF_HUB_OFFLINE is set" if offline else hub_problem(source.repo)
    try:
        if problem is None:
            ds = datasets.load_dataset(source.repo, source.config, split=source.split)
        else:  # perhaps `datasets` cached it on an earlier, networked run
            with _hub_offline():
                ds = datasets.load_dataset(source.repo, source.config, split=source.split)
    except Exception as exc:
        if problem is None:
            why = f"loading it from the Hugging Face hub failed ({type(exc).__name__}: {exc})"
        else:
            why = (f"the Hugging Face hub is unreachable ({problem}) and the dataset is not "
                   "in the local `datasets` cache")
        raise _unavailable(key, f"{source.repo}: {why}") from None
    missing = {source.problem_field, source.answer_field} - set(ds.column_names)
    if missing:
        raise BenchmarkError(f"benchmark {key!r}: {source.repo} has no field(s) "
                             f"{', '.join(sorted(missing))} (it has {', '.join(ds.column_names)});"
                             " the table HUB_BENCHMARKS in rzero/evaluation.py needs updating")
    items = []
    for i, row in enumerate(ds):
        items.append({"id": f"{key}-{i}", "problem": str(row[source.problem_field]),
                      "answer": _hub_answer(row[source.answer_field], source)})
    write_jsonl_atomic(cached, items)
    return items


# ---------------------------------------------------------------- local JSONL


def load_jsonl_benchmark(path: str | Path, name: str | None = None) -> list[Item]:
    """Rows with `problem` and `answer` (and optionally `id`); errors name file and line."""
    path = Path(path).expanduser()
    name = name or path.stem
    if not path.is_file():
        raise BenchmarkError(f"benchmark {name!r}: no such file {str(path)!r}")
    items: list[Item] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchmarkError(f"{where}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise BenchmarkError(f"{where}: expected a JSON object with `problem` and "
                                     f"`answer` fields, got {type(row).__name__}")
            missing = [k for k in ("problem", "answer") if row.get(k) in (None, "")]
            if missing:
                raise BenchmarkError(f"{where}: missing field(s) "
                                     f"{', '.join(repr(m) for m in missing)}; each line needs "
                                     "`problem` and `answer`")
            items.append({**row, "id": str(row.get("id", f"{name}-{len(items)}")),
                          "problem": str(row["problem"]), "answer": str(row["answer"])})
    if not items:
        raise BenchmarkError(f"benchmark {name!r}: {path} holds no items")
    return items


# ---------------------------------------------------------------- by name


def parse_benchmark_spec(spec: str) -> tuple[str, str | None]:
    """`name=path.jsonl` -> (name, path); `path.jsonl` -> (stem, path); `name` -> (name, None)."""
    spec = spec.strip()
    if "=" in spec:
        name, path = spec.split("=", 1)
        return name.strip(), path.strip()
    if spec.endswith(".jsonl"):
        return Path(spec).stem, spec
    return spec, None


def load_benchmark(spec: str) -> tuple[str, list[Item]]:
    """(display name, items) for one benchmark spec."""
    name, path = parse_benchmark_spec(spec)
    if path is not None:
        return name, load_jsonl_benchmark(path, name=name)
    if name == SYNTHETIC or name.startswith(SYNTHETIC + ":"):
        seed_text = name[len(SYNTHETIC) + 1:] or str(SYNTHETIC_SEED)
        try:
            seed = int(seed_text)
        except ValueError:
            raise BenchmarkError(f"benchmark {name!r}: the seed after 'synthetic:' must be "
                                 "an integer") from None
        return name, synthetic_benchmark(seed)
    key = hub_name(name)
    return (key or name), load_hub_benchmark(name)


def load_benchmarks(specs: Sequence[str], limit: int | None = None) -> dict[str, list[Item]]:
    """All benchmarks, each cut to its first `limit` items; fails before any model work."""
    if not specs:
        raise BenchmarkError("no benchmarks given")
    out: dict[str, list[Item]] = {}
    for spec in specs:
        name, items = load_benchmark(spec)
        if name in out:
            raise BenchmarkError(f"benchmark {name!r} given twice")
        out[name] = items[:limit] if limit is not None else items
    return out


# ---------------------------------------------------------------- scoring


def score_completion(completion: str, answer: str) -> bool:
    """True when the completion's last `\\boxed{}` is equivalent to `answer`; no box: False."""
    predicted = extract_boxed(completion)
    if predicted is None or not predicted.strip():
        return False
    return equivalent(predicted, answer)


def score_benchmark(name: str, items: Sequence[Item], completions: Sequence[Sequence[str]],
                    k: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-item records and the benchmark's row of metrics, for k completions per item.

    mean@k = mean over items of (right samples / k); maj@k = fraction of items whose
    majority answer over the k boxed answers (`majority_vote_many`) is right.
    """
    records = [{"benchmark": name, "id": item["id"], "problem": item["problem"],
                "answer": item["answer"], "completions": list(outs),
                "predictions": [extract_boxed(text) for text in outs]}
               for item, outs in zip(items, completions, strict=True)]
    if k > 1:
        all_votes = majority_vote_many([r["predictions"] for r in records])
        for r, votes in zip(records, all_votes, strict=True):
            r["majority"], r["p_hat"] = votes.label, votes.p_hat
    # one batch of math-verify checks: every sample's answer, then every majority answer
    pairs = [(p, r["answer"]) for r in records for p in r["predictions"]]
    if k > 1:
        pairs += [(r["majority"], r["answer"]) for r in records]
    verdicts = iter(equivalent_many(pairs))
    for r in records:
        r["correct"] = [next(verdicts) for _ in r["predictions"]]
        r["mean"] = sum(r["correct"]) / k
    n = len(records)
    row: dict[str, Any] = {"n": n, "pass@1": sum(r["mean"] for r in records) / n if n else 0.0}
    if k > 1:
        for r in records:
            r["majority_correct"] = next(verdicts)
        row[f"mean@{k}"] = row["pass@1"]
        row[f"maj@{k}"] = sum(r["majority_correct"] for r in records) / n if n else 0.0
    return records, row


# ---------------------------------------------------------------- evaluate


def evaluate(generator: Generator, benchmarks: Sequence[str] | Mapping[str, list[Item]], *,
             limit: int | None = None, max_new_tokens: int = 512, num_samples: int = 1,
             temperature: float = 1.0, top_p: float = 1.0, seed: int = 0, batch: int = 64,
             prompt_path: str | None = None) -> dict[str, Any]:
    """Score `generator` on benchmarks (names, or already loaded {name: items}).

    num_samples k = 1: greedy decoding; pass@1 = fraction of items whose boxed answer is
    right. k > 1: k samples at `temperature`;
      mean@k = mean over items of (right samples / k)   (also reported as pass@1),
      maj@k  = fraction of items whose majority-vote answer over the k boxed answers
               is right.
    `average` is the unweighted mean of pass@1 over benchmarks, as in the paper's tables.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples={num_samples}: need at least 1")
    if batch < 1:
        raise ValueError(f"batch={batch}: need at least 1")
    if isinstance(benchmarks, str):  # "a,b" rather than ["a", "b"]
        benchmarks = [b for b in benchmarks.split(",") if b.strip()]
    data = (dict(benchmarks) if isinstance(benchmarks, Mapping)
            else load_benchmarks(list(benchmarks), limit=limit))
    if isinstance(benchmarks, Mapping) and limit is not None:
        data = {name: items[:limit] for name, items in data.items()}
    k = num_samples
    greedy = k == 1
    params = SamplingParams(temperature=0.0 if greedy else temperature,
                            top_p=1.0 if greedy else top_p, top_k=0,
                            max_new_tokens=max_new_tokens, seed=seed)
    t_start = time.perf_counter()
    gen_seconds0, gen_tokens0 = generator.stats.seconds, generator.stats.new_tokens
    summary: dict[str, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    for name, items in data.items():
        # ---- generate, `batch` prompts per call
        prompts = [solver_chat(item["problem"], prompt_path) for item in items]
        completions: list[list[str]] = []
        for start in range(0, len(prompts), batch):
            chunk = prompts[start:start + batch]
            completions += generator.generate(chunk, k, replace(params, seed=seed + start))
            logger.info("eval %s: %d/%d items generated", name, len(completions), len(items))
        # ---- score
        item_records, row = score_benchmark(name, items, completions, k)
        records += item_records
        summary[name] = row
        logger.info("eval %s: pass@1 %.3f over %d items", name, row["pass@1"], row["n"])
    metrics = ["pass@1"] + ([] if greedy else [f"mean@{k}", f"maj@{k}"])
    averages = {m: (sum(r[m] for r in summary.values()) / len(summary) if summary else 0.0)
                for m in metrics}
    return {
        "benchmarks": summary,
        "average": averages["pass@1"],
        "averages": averages,
        "metrics": metrics,
        "settings": {"decoding": "greedy" if greedy else "sampled", "num_samples": k,
                     "temperature": params.temperature, "top_p": params.top_p,
                     "max_new_tokens": max_new_tokens, "seed": seed, "limit": limit,
                     "prompt_path": prompt_path},
        "timing": {"seconds": time.perf_counter() - t_start,
                   "generation_seconds": generator.stats.seconds - gen_seconds0,
                   "new_tokens": generator.stats.new_tokens - gen_tokens0},
        "items": records,
    }


# ---------------------------------------------------------------- reports


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def results_markdown(results: dict[str, Any]) -> str:
    """The summary as a Markdown table, accuracies in percent."""
    metrics = results["metrics"]
    settings = results["settings"]
    lines = ["# Evaluation", ""]
    if "model" in results:
        lines.append(f"Model: `{_md_cell(results['model'])}`  ")
    lines += [f"Decoding: {settings['decoding']}, {settings['num_samples']} sample(s), "
              f"temperature {settings['temperature']}, max {settings['max_new_tokens']} new "
              f"tokens, seed {settings['seed']}", "",
              "| benchmark | n | " + " | ".join(metrics) + " |",
              "|---|---:|" + "---:|" * len(metrics)]
    for name, row in results["benchmarks"].items():
        cells = " | ".join(f"{100 * row[m]:.1f}" for m in metrics)
        lines.append(f"| {_md_cell(name)} | {row['n']} | {cells} |")
    avg = " | ".join(f"{100 * results['averages'][m]:.1f}" for m in metrics)
    lines.append(f"| **average** | | {avg} |")
    return "\n".join(lines) + "\n"


def write_results(results: dict[str, Any], output_dir: str | Path) -> tuple[Path, Path]:
    """`eval.json` (everything, per-item completions included) and `eval.md`, atomically."""
    out = Path(output_dir)
    write_json_atomic(out / "eval.json", results)
    write_text_atomic(out / "eval.md", results_markdown(results))
    return out / "eval.json", out / "eval.md"


# ---------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rzero.models import DEFAULT_MODEL

    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="model spec: 'embedded:smollm2-135m-instruct', a checkpoint "
                             f"directory or a hub id (default {DEFAULT_MODEL})")
    parser.add_argument("--benchmarks", default=SYNTHETIC,
                        help="comma-separated: synthetic[:SEED], "
                             f"{', '.join(HUB_BENCHMARKS)}, path.jsonl or name=path.jsonl "
                             "(default synthetic)")
    parser.add_argument("--output", required=True,
                        help="directory for eval.json and eval.md")
    parser.add_argument("--limit", type=int, default=None,
                        help="score only the first N items of each benchmark")
    parser.add_argument("--max-new-tokens", type=int, default=512,
                        help="generation budget per answer (default 512)")
    parser.add_argument("--num-samples", type=int, default=1,
                        help="1: greedy pass@1 (default); k > 1: sample k answers and report "
                             "mean@k and maj@k")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="sampling temperature when --num-samples > 1 (default 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--batch-size", type=int, default=40,
                        help="sequences per model.generate call (default 40)")
    parser.add_argument("--prompt", default=None,
                        help="solver prompt template file (default: the built-in one)")
    parser.add_argument("--dtype", default="float32", help="model dtype (default float32)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")


def run(args: argparse.Namespace) -> int:
    from rzero.generation import HFGenerator
    from rzero.models import ModelSpecError

    specs = [s for s in (part.strip() for part in args.benchmarks.split(",")) if s]
    for flag, value in (("--limit", args.limit), ("--max-new-tokens", args.max_new_tokens),
                        ("--num-samples", args.num_samples), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            print(f"rzero eval: {flag}={value}: must be at least 1", file=sys.stderr)
            return 2
    try:
        # benchmarks first: a missing file or an offline hub fails before the model loads
        data = load_benchmarks(specs, limit=args.limit)
        generator = HFGenerator.from_spec(args.model, batch_size=args.batch_size,
                                          dtype=args.dtype, device=args.device)
    except (BenchmarkError, ModelSpecError) as exc:
        print(f"rzero eval: {exc}", file=sys.stderr)
        return 2
    results = evaluate(generator, data, limit=args.limit, max_new_tokens=args.max_new_tokens,
                       num_samples=args.num_samples, temperature=args.temperature,
                       seed=args.seed, batch=args.batch_size, prompt_path=args.prompt)
    results = {"model": args.model, **results}
    json_path, _ = write_results(results, args.output)
    print(results_markdown(results), end="")
    print(f"wrote {json_path} and eval.md")
    return 0


def cli_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rzero eval",
                                     description="Score a model on math benchmarks "
                                                 "(math-verify on the final \\boxed{}).")
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    return run(args)


if __name__ == "__main__":
    sys.exit(cli_main())
