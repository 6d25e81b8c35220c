"""The embedded benchmark `synthetic` (SPEC §4): procedurally generated, so evaluation works
offline.

Five kinds (arithmetic, fractions, percentages, linear equations, word problems) in three
difficulty tiers; every answer is computed exactly with sympy, and every item keeps its
structured `data` so the answer can be recomputed independently (the tests do, with plain
fractions).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

Item = dict[str, Any]

SYNTHETIC = "synthetic"
SYNTHETIC_SEED = 20250807  # fixed, so `synthetic` is the same benchmark everywhere
SYNTHETIC_PER_CELL = 16  # items per (kind, tier): 5 kinds x 3 tiers x 16 = 240
SYNTHETIC_KINDS = ("arithmetic", "fractions", "percentages", "linear", "word")
SYNTHETIC_TIERS = (1, 2, 3)


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
        value = {"+": value + right, "-": value - right, "*": value * right, "/": value / right}[op]
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
        problem = f"What percent of {b} is {a}? Give the number of percent, without the % sign."
        value = sp.Rational(100 * a, b)
        data = {"form": "what_percent", "a": a, "b": b}
    else:
        n = 10 * rng.randint(2, 50)
        p, q = 5 * rng.randint(1, 10), 5 * rng.randint(1, 10)
        problem = (
            f"A jacket costs {n} dollars. Its price is increased by {p}% and the new "
            f"price is then decreased by {q}%. What is the final price in dollars?"
        )
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
        problem = (
            f"Solve for $x$: ${_linear_latex([(a, 'x'), (b, '')])} = "
            f"{_linear_latex([(c, 'x'), (d, '')])}$."
        )
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
        problem = (
            f"The numbers $x$ and $y$ satisfy ${_linear_latex([(a1, 'x'), (b1, 'y')])}"
            f" = {c1}$ and ${_linear_latex([(a2, 'x'), (b2, 'y')])} = {c2}$. "
            f"What is ${ask}$?"
        )
        sol = sp.solve([sp.Eq(a1 * x + b1 * y, c1), sp.Eq(a2 * x + b2 * y, c2)], [x, y])
        value = {"x": sol[x], "y": sol[y], "x + y": sol[x] + sol[y]}[ask]
    return problem, sp.Rational(value), data, "frac"


_NAMES = (
    "Ava",
    "Ben",
    "Chloe",
    "Daniel",
    "Emma",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nora",
    "Omar",
    "Priya",
)


def _gen_word(rng: random.Random, tier: int):
    sp = _sympy()
    name = rng.choice(_NAMES)
    template = rng.choice(
        {1: ["bags", "share"], 2: ["speed", "change"], 3: ["pipes", "sum_difference"]}[tier]
    )
    style = "frac"
    if template == "bags":
        a, b, c = rng.randint(2, 30), rng.randint(2, 9), rng.randint(3, 12)
        problem = (
            f"{name} has {a} apples and buys {b} bags with {c} apples in each bag. "
            f"How many apples does {name} have now?"
        )
        value = sp.Integer(a) + b * c
        values = {"a": a, "b": b, "c": c}
    elif template == "share":
        k, each = rng.randint(2, 12), rng.randint(2, 15)
        n = k * each
        problem = (
            f"{name} shares {n} marbles equally among {k} friends. How many marbles "
            "does each friend get?"
        )
        value = sp.Rational(n, k)
        values = {"n": n, "k": k}
    elif template == "speed":
        v, t, s = rng.randint(30, 90), rng.randint(2, 6), rng.randint(2, 9)
        d = v * t
        problem = (
            f"A car travels {d} km in {t} hours. At the same speed, how many km does it "
            f"travel in {s} hours?"
        )
        value = sp.Rational(d, t) * s
        values = {"d": d, "t": t, "s": s}
    elif template == "change":
        x, p, y, q = rng.randint(2, 9), rng.randint(1, 5), rng.randint(1, 6), rng.randint(2, 8)
        z = 50 if x * p + y * q < 50 else 100
        problem = (
            f"{name} buys {x} pens at {p} dollars each and {y} notebooks at {q} dollars "
            f"each, and pays with a {z}-dollar bill. How much change, in dollars, "
            f"does {name} receive?"
        )
        value = sp.Integer(z) - x * p - y * q
        values = {"x": x, "p": p, "y": y, "q": q, "z": z}
        style = "decimal"
    elif template == "pipes":
        a = rng.randint(2, 12)
        b = rng.choice([v for v in range(2, 13) if v != a])
        problem = (
            f"One pipe fills a tank in {a} hours and a second pipe fills it in {b} "
            "hours. Working together, how many hours do the two pipes take to fill "
            "the tank? Give your answer as a fraction in lowest terms."
        )
        value = 1 / (sp.Rational(1, a) + sp.Rational(1, b))
        values = {"a": a, "b": b}
    else:  # sum_difference
        small = rng.randint(5, 60)
        large = small + rng.randint(1, 40)
        s, d = large + small, large - small
        problem = (
            f"The sum of two numbers is {s} and their difference is {d}. What is the larger number?"
        )
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


def synthetic_benchmark(
    seed: int = SYNTHETIC_SEED, per_cell: int = SYNTHETIC_PER_CELL
) -> list[Item]:
    """The embedded benchmark: `per_cell` items for each (tier, kind), deterministic in seed.

    Items are interleaved (round r holds one item of every tier and kind), so the first
    N items of a `--limit N` run cover all cells evenly.
    """
    sp = _sympy()
    rngs = {
        (tier, kind): random.Random(f"{seed}:{tier}:{kind}")
        for tier in SYNTHETIC_TIERS
        for kind in SYNTHETIC_KINDS
    }
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
                    raise RuntimeError(
                        f"synthetic {kind} tier {tier}: cannot draw {per_cell} distinct problems"
                    )
                seen.add(problem)
                if not isinstance(value, sp.Rational):
                    raise AssertionError(f"synthetic {kind}: non-rational answer {value!r}")
                items.append(
                    {
                        "id": f"synthetic-{len(items):04d}",
                        "problem": problem,
                        "answer": render_answer(value, style),
                        "tier": tier,
                        "kind": kind,
                        "data": data,
                    }
                )
    return items
