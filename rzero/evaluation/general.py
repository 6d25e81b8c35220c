"""General-reasoning benchmarks (MMLU-Pro, SuperGPQA, BBEH): how their items are asked and
scored, beside the math sets that math-verify scores.

An item's `scoring` field says how its answer is checked:

- absent (the math sets): math-verify on the last `\\boxed{}` (`rzero.evaluation.scoring`);
- ``"choice"`` (MMLU-Pro, SuperGPQA): the item has `choices` (option texts) and its `answer`
  is the correct option's letter. The question is asked with its options lettered (A), (B),
  ... and the boxed answer counts when it names the right option, by its letter (``B``,
  ``(B)``, ``B. text``) or by the option's text (`choice_letter`);
- ``"text"`` (BBEH): a short free-form answer, compared after normalisation with the
  tolerances of BBEH's own scorer (`text_match`): case, a trailing full stop, ``(a)`` against
  ``a``, numbers by value, quotes, brackets.

Where we depart from the official R-Zero scripts: they take the first option letter that
appears anywhere in the boxed text and guess a random letter when nothing parses; here an
answer that names no option scores 0, so an unparsed answer is never right by chance.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from rzero.evaluation.synthetic import Item

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SCORINGS = ("choice", "text")


def problem_text(item: Item) -> str:
    """The question as the solver sees it: a multiple-choice item gets its lettered options
    and asks for the letter in the box."""
    if item.get("scoring") != "choice":
        return item["problem"]
    options = "\n".join(f"({LETTERS[i]}) {text}" for i, text in enumerate(item["choices"]))
    last = LETTERS[len(item["choices"]) - 1]
    return (
        f"{item['problem']}\n\nOptions:\n{options}\n\nExactly one option is correct. Put "
        f"only its letter (A to {last}) in the box, e.g. \\boxed{{A}}."
    )


def _normalize(text: str) -> str:
    text = re.sub(r"\\(?:text|textbf|mathrm|texttt)\{([^{}]*)\}", r"\1", text)
    text = text.replace("$", "").replace("**", "")
    return " ".join(text.lower().split()).strip(" .:")


def choice_letter(prediction: str | None, choices: Sequence[str]) -> str | None:
    """The option a boxed answer names, as a letter, or None.

    Accepted: the letter alone (``C``, ``(c)``, ``\\text{C}``), the letter followed by the
    option (``C. 42``, ``(C) 42``), or the option's text alone (``42``)."""
    if prediction is None:
        return None
    text = _normalize(prediction)
    letters = LETTERS[: len(choices)].lower()
    options = [_normalize(c) for c in choices]
    m = re.fullmatch(r"\(?([a-z])\)?", text)  # the letter alone
    if m is None and text not in options:
        # the letter, a separator, then the option: "b. 42", "(b) 42", "b: 42"
        m = re.fullmatch(r"(?:\(([a-z])\)|([a-z])[.:)])\s*\S.*", text)
    if m is not None:
        letter = next(g for g in m.groups() if g)
        return letter.upper() if letter in letters else None
    if text in options:
        return LETTERS[options.index(text)]
    return None


def answer_letter(answer: str, choices: Sequence[str]) -> str | None:
    """A stored answer as a letter: the letter itself, or the text of one of the options."""
    return choice_letter(answer, choices)


def text_match(prediction: str | None, reference: str) -> bool:
    """BBEH's tolerant comparison of a short free-form answer with the reference."""
    if prediction is None:
        return False
    p, r = _normalize(prediction).replace(", ", ","), _normalize(reference).replace(", ", ",")
    if not p:
        return False
    if p == r:
        return True
    for a, b in ((p, r), (r, p)):  # "(a)" against "a"
        if len(a) == 3 and a[0] == "(" and a[2] == ")" and a[1] == b:
            return True
    try:
        if float(p) == float(r):
            return True
    except ValueError:
        pass
    if p.replace("'", "").replace('"', "") == r.replace("'", "").replace('"', ""):
        return True
    if p in (f"[{r}]", f"{r}?") or r == f"[{p}]":
        return True
    return False


def score_general(prediction: str | None, item: Item) -> bool:
    """Whether one boxed answer is right for a `choice` or `text` item."""
    if item["scoring"] == "choice":
        return choice_letter(prediction, item["choices"]) == item["answer"]
    return text_match(prediction, item["answer"])


def majority_general(predictions: Sequence[str | None], item: Item) -> str | None:
    """The most common answer of k samples (letters for a `choice` item, normalised text
    otherwise); ties go to the answer seen first; None when nothing parsed."""
    if item["scoring"] == "choice":
        keys = [choice_letter(p, item["choices"]) for p in predictions]
    else:
        keys = [_normalize(p) if p is not None and _normalize(p) else None for p in predictions]
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(k for k in keys if k is not None and counts[k] == top)
