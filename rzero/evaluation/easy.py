"""The embedded benchmark `easy`: one- and two-step problems with small numbers.

`synthetic` measures what a run is aiming at, but the embedded 135M model solves almost none
of it, so a CPU run could never show a change there. `easy` is the tier the base model
partly solves (measured greedy pass@1 in docs/recipes.md), so a solver that learns something
from its pseudo-labels can show it, and one that forgets can show that too.

Twelve templates, 40 items each (480), drawn with a fixed seed; every answer is computed
with sympy, and every item keeps the numbers it states in `data`. Bare arithmetic and short
word problems alternate, so a model that only learned one surface form does not pass as
better. The items come in two blocks, each interleaved (item r of each template in turn):
items 0-319 are the first eight templates, the tier as it was first measured (the base
model scored 19.7 % on them, just under the 20 % the tier is meant to clear); items 320-479
are four smaller one-step templates (`SMALL`), chosen by the base model's score on a
development draw, so the whole tier sits inside the range where a change can show. A
`limit` of at most 320 therefore takes the first block, as earlier runs evaluated it.

`easy:SEED` is a development split for choosing a recipe: the same templates drawn with
another seed, with every problem of the held-out `easy` left out, so settings can be
compared on it without ever scoring them on the items the reports evaluate.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rzero.evaluation.synthetic import Item, render_answer

EASY = "easy"
EASY_SEED = 20251130
EASY_PER_TEMPLATE = 40

_NAMES = (
    "Ava",
    "Ben",
    "Chloe",
    "Dan",
    "Emma",
    "Finn",
    "Gia",
    "Hugo",
    "Ivy",
    "Jack",
    "Lena",
    "Max",
    "Nora",
    "Omar",
    "Pia",
    "Sam",
)
_THINGS = ("apples", "pencils", "stickers", "marbles", "books", "cookies", "stamps", "shells")


def _add(rng: random.Random) -> tuple[str, int, dict]:
    a, b = rng.randint(2, 40), rng.randint(2, 40)
    return f"What is {a} + {b}?", a + b, {"a": a, "b": b}


def _sub(rng: random.Random) -> tuple[str, int, dict]:
    b = rng.randint(2, 30)
    a = b + rng.randint(1, 40)
    return f"What is {a} - {b}?", a - b, {"a": a, "b": b}


def _mul(rng: random.Random) -> tuple[str, int, dict]:
    a, b = rng.randint(2, 12), rng.randint(2, 9)
    return f"What is {a} times {b}?", a * b, {"a": a, "b": b}


def _add_sub(rng: random.Random) -> tuple[str, int, dict]:
    a, b = rng.randint(5, 40), rng.randint(2, 30)
    c = rng.randint(1, a + b - 1)
    return f"What is {a} + {b} - {c}?", a + b - c, {"a": a, "b": b, "c": c}


def _mul_add(rng: random.Random) -> tuple[str, int, dict]:
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 20)
    return f"What is {a} times {b}, plus {c}?", a * b + c, {"a": a, "b": b, "c": c}


def _word_more(rng: random.Random) -> tuple[str, int, dict]:
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    a, b = rng.randint(2, 30), rng.randint(2, 20)
    return (
        f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?",
        a + b,
        {"a": a, "b": b},
    )


def _word_left(rng: random.Random) -> tuple[str, int, dict]:
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    b = rng.randint(2, 20)
    a = b + rng.randint(1, 30)
    return (
        f"{name} had {a} {thing} and gave {b} of them away. How many {thing} does {name} "
        "have left?",
        a - b,
        {"a": a, "b": b},
    )


def _word_groups(rng: random.Random) -> tuple[str, int, dict]:
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    a, b, c = rng.randint(2, 6), rng.randint(2, 9), rng.randint(1, 10)
    return (
        f"{name} has {a} boxes with {b} {thing} in each box, and {c} more {thing} on the "
        f"table. How many {thing} does {name} have in all?",
        a * b + c,
        {"a": a, "b": b, "c": c},
    )


def _sub_small(rng: random.Random) -> tuple[str, int, dict]:
    b = rng.randint(1, 9)
    a = rng.randint(b + 1, 19)
    return f"What is {a} - {b}?", a - b, {"a": a, "b": b}


def _add_tens(rng: random.Random) -> tuple[str, int, dict]:
    a, b = 10 * rng.randint(1, 9), rng.randint(1, 9)
    first, second = (a, b) if rng.random() < 0.5 else (b, a)
    return f"What is {first} + {second}?", a + b, {"a": a, "b": b}


def _double(rng: random.Random) -> tuple[str, int, dict]:
    a = rng.randint(2, 99)
    return f"What is {a} + {a}?", 2 * a, {"a": a}


def _word_more_small(rng: random.Random) -> tuple[str, int, dict]:
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return (
        f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?",
        a + b,
        {"a": a, "b": b},
    )


Draw = Callable[[random.Random], tuple[str, int, dict]]
FIRST: dict[str, Draw] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "add_sub": _add_sub,
    "mul_add": _mul_add,
    "word_more": _word_more,
    "word_left": _word_left,
    "word_groups": _word_groups,
}
SMALL: dict[str, Draw] = {
    "sub_small": _sub_small,
    "add_tens": _add_tens,
    "double": _double,
    "word_more_small": _word_more_small,
}
TEMPLATES: dict[str, Draw] = {**FIRST, **SMALL}
ONE_STEP = ("add", "sub", "mul", "word_more", "word_left", *SMALL)


def easy_benchmark(
    seed: int = EASY_SEED,
    per_template: int = EASY_PER_TEMPLATE,
    exclude: frozenset[str] = frozenset(),
) -> list[Item]:
    """`per_template` distinct items of every template, block by block (`FIRST`, then
    `SMALL`), interleaved within a block (item r of each template in turn), deterministic in
    `seed`, none of whose problems is in `exclude`; answers computed with sympy."""
    import sympy as sp

    rngs = {name: random.Random(f"{seed}:{name}") for name in TEMPLATES}
    seen: set[str] = set(exclude)
    prefix = EASY if seed == EASY_SEED else f"{EASY}{seed}"
    items: list[Item] = []
    for block in (FIRST, SMALL):
        for _ in range(per_template):
            for name, draw in block.items():
                for _attempt in range(1000):
                    problem, value, data = draw(rngs[name])
                    if problem not in seen:
                        break
                else:
                    raise RuntimeError(f"easy {name}: cannot draw {per_template} distinct items")
                seen.add(problem)
                answer = sp.sympify(value)  # exact; every template's answer is a whole number
                items.append(
                    {
                        "id": f"{prefix}-{len(items):04d}",
                        "problem": problem,
                        "answer": render_answer(answer),
                        "kind": name,
                        "tier": 1 if name in ONE_STEP else 2,
                        "data": data,
                    }
                )
    return items


def easy_dev_benchmark(seed: int) -> list[Item]:
    """`easy:SEED`: the templates drawn with `seed`, disjoint from the held-out `easy` (its
    problems are excluded word for word); `easy:20251130` is `easy` itself."""
    if seed == EASY_SEED:
        return easy_benchmark()
    held_out = frozenset(item["problem"] for item in easy_benchmark())
    return easy_benchmark(seed, exclude=held_out)
