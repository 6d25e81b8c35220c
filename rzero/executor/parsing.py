"""Reading the model's answers: code in ```python fences, inputs and outputs in tags.

The last fence or tag wins (a small model often echoes the worked example first), and
anything inside <think>…</think> is ignored. Departure from AZR: AZR reads inputs and
outputs from ```input / ```output fences inside an <answer> tag; tags alone are easier for a
135M model to produce and to close.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MAX_CHARS = 20_000  # longer completions are cut before any regex runs
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def _visible(text: str) -> str:
    return _THINK.sub("", text[:_MAX_CHARS])


def extract_code(text: str) -> str | None:
    """The last ```python (or ```py) block, stripped; None if there is none or it is empty."""
    blocks = _FENCE.findall(_visible(text))
    code = blocks[-1].strip() if blocks else ""
    return code or None


def extract_tags(text: str, tag: str) -> list[str]:
    """Every <tag>…</tag> body, stripped, in order; empty bodies are dropped."""
    pattern = re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL | re.IGNORECASE)
    return [body.strip() for body in pattern.findall(_visible(text)) if body.strip()]


def extract_tag(text: str, tag: str) -> str | None:
    """The last non-empty <tag>…</tag> body, or None."""
    bodies = extract_tags(text, tag)
    return bodies[-1] if bodies else None


@dataclass(frozen=True)
class ProgramProposal:
    """A deduction or abduction proposal: a program and one input for it."""

    program: str
    input: str


@dataclass(frozen=True)
class InductionProposal:
    """An induction proposal: inputs for a given program, and a message hinting what it does."""

    inputs: tuple[str, ...]
    message: str


def parse_program_proposal(text: str) -> ProgramProposal | None:
    """A ```python block and an <input> tag; None when either is missing."""
    program, inputs = extract_code(text), extract_tag(text, "input")
    if program is None or inputs is None:
        return None
    return ProgramProposal(program=program, input=inputs)


def parse_induction_proposal(text: str) -> InductionProposal | None:
    """One or more <input> tags and a <message> tag; None when either is missing."""
    inputs, message = extract_tags(text, "input"), extract_tag(text, "message")
    if not inputs or message is None:
        return None
    return InductionProposal(inputs=tuple(inputs), message=message)


def parse_answer(kind: str, text: str) -> str | None:
    """The solver's answer: <output> for deduction, <input> for abduction, code for induction."""
    if kind == "deduction":
        return extract_tag(text, "output")
    if kind == "abduction":
        return extract_tag(text, "input")
    if kind == "induction":
        return extract_code(text)
    raise ValueError(f"unknown task kind {kind!r}; expected deduction, abduction or induction")
