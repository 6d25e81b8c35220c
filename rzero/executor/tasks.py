"""Absolute Zero's code tasks: triplets, proposal validity, and judging the solver's answers.

A triplet (program, input, output) satisfies output = repr(f(*input)). Hiding one part
gives a task type (AZR §3.2):
  deduction  program + input  -> the output          checked by comparing values
  abduction  program + output -> some input           checked by running the program on it
  induction  pairs + message  -> a program            checked on held-out pairs

Departures from AZR:
  * outputs are compared as `repr` strings after `ast.literal_eval` of both sides, not with
    `==` on evaluated values: `(1, 2)` equals `(1,2)`, `1` does not equal `1.0`, and `nan`
    equals `nan`; a repr that is not a literal (`Counter({...})`) is compared as text;
  * induction uses the first half (rounded up) of the valid proposed inputs as the visible
    pairs and the rest as held out, and needs at least two distinct valid inputs;
  * the determinism check runs every proposal twice in fresh processes with a fixed hash
    seed, so set order of strings is reproducible and not a reason to refuse;
  * an output that is not a literal and names a memory address (`<object object at
    0x7f...>`) is refused even when both runs agree: where address randomisation is off
    two fresh processes allocate alike, yet no solver can predict the address and another
    run of the same proposal on another machine gives another task.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rzero.executor.codecheck import NONDETERMINISTIC_MODULES, check_program, imported_modules
from rzero.executor.sandbox import DEFAULT_LIMITS, Limits, run_many

TASK_TYPES = ("deduction", "abduction", "induction")
DEFAULT_TIMEOUT_S = 2.0  # per run; AZR's programs are small
MIN_INDUCTION_PAIRS = 2  # one visible and one held out, at the least
_MAX_ANSWER_CHARS = 20_000  # longer answers are not parsed at all
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")  # the default repr of an object: <... at 0x...>


@dataclass(frozen=True)
class CodeTask:
    """One task. deduction/abduction: the triplet (program, input, output).

    induction: `program` is the reference the pairs came from (never shown to the solver),
    `visible` pairs and `message` are shown, `hidden` pairs check the solver's program.
    Inputs are Python literals (a tuple is the argument list); outputs are reprs.
    """

    kind: str
    program: str
    input: str = ""
    output: str = ""
    message: str = ""
    visible: tuple[tuple[str, str], ...] = field(default=())
    hidden: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in TASK_TYPES:
            raise ValueError(f"CodeTask.kind={self.kind!r} must be one of {TASK_TYPES}")

    def as_kind(self, kind: str) -> CodeTask:
        """The same triplet as another task type (deduction <-> abduction)."""
        return replace(self, kind=kind)

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": self.kind,
                "program": self.program,
                "input": self.input,
                "output": self.output,
                "message": self.message,
                "visible": self.visible,
                "hidden": self.hidden,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> CodeTask:
        d = json.loads(text)
        return cls(
            kind=d["kind"],
            program=d["program"],
            input=d["input"],
            output=d["output"],
            message=d["message"],
            visible=tuple(tuple(p) for p in d["visible"]),
            hidden=tuple(tuple(p) for p in d["hidden"]),
        )


# AZR's seed: the identity function on 'Hello World'
IDENTITY = CodeTask(
    kind="deduction",
    program="def f(x):\n    return x",
    input="'Hello World'",
    output="'Hello World'",
)


# -- comparing values ------------------------------------------------------------------------


def canonical(value_text: str) -> str:
    """The repr of `literal_eval(value_text)`, or the stripped text if it is not a literal."""
    text = value_text.strip()
    if len(text) > _MAX_ANSWER_CHARS:
        return text
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


def outputs_equal(predicted: str, gold: str) -> bool:
    """Deduction's check: equal reprs after literal_eval of both (`(1, 2)` == `(1,2)`)."""
    return canonical(predicted) == canonical(gold)


def call_text(inputs: str) -> str:
    """How a task shows an input to the model: `f(3, 'hi')` for the literal `(3, 'hi')`."""
    try:
        value = ast.literal_eval(inputs.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return f"f({inputs.strip()})"
    args = value if isinstance(value, tuple) else (value,)
    return "f(" + ", ".join(repr(a) for a in args) + ")"


# -- proposal validity (AZR §3.3.3) ----------------------------------------------------------


@dataclass(frozen=True)
class ProposalCheck:
    """A valid proposal's task, or why the proposal was refused."""

    task: CodeTask | None
    reason: str | None


def names_an_address(output: str) -> bool:
    """Whether an output is a default object repr (`<... at 0x...>`, alone or inside a
    container) rather than a literal; a string that merely contains such text is a literal."""
    if not _ADDRESS.search(output):
        return False
    try:
        ast.literal_eval(output.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return True
    return False


def program_reason(program: str) -> str | None:
    """Why a proposed program is refused before it runs: the filter, then AZR's ban on
    modules whose results change between runs (random, time, datetime)."""
    reason = check_program(program)
    if reason is not None:
        return reason
    banned = sorted(set(imported_modules(ast.parse(program))) & NONDETERMINISTIC_MODULES)
    return f"nondeterministic module {banned[0]!r}" if banned else None


def validate_triplets(
    proposals: Sequence[tuple[str, str, str]],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    limits: Limits = DEFAULT_LIMITS,
    max_workers: int | None = None,
) -> list[ProposalCheck]:
    """AZR's validity for deduction/abduction proposals (kind, program, input).

    Valid when the program passes `program_reason`, `f(*input)` runs within the limits, and
    two runs in fresh processes give the same output that names no memory address; the task
    is the triplet with that output. All runs of the batch share one bounded pool.
    """
    checks: list[ProposalCheck | None] = []
    jobs: list[tuple[str, str]] = []
    for _, program, inputs in proposals:
        reason = program_reason(program)
        checks.append(ProposalCheck(None, reason) if reason else None)
        if reason is None:
            jobs += [(program, inputs)] * 2
    results = iter(run_many(jobs, timeout_s, limits=limits, max_workers=max_workers))
    out = []
    for check, (kind, program, inputs) in zip(checks, proposals, strict=True):
        if check is not None:
            out.append(check)
            continue
        first, second = next(results), next(results)
        if not (first.ok and second.ok):
            out.append(ProposalCheck(None, (first.error or second.error)))
        elif first.output != second.output:
            out.append(ProposalCheck(None, "nondeterministic: two runs differ"))
        elif names_an_address(first.output or ""):
            out.append(ProposalCheck(None, "nondeterministic: the output names a memory address"))
        else:
            out.append(
                ProposalCheck(
                    CodeTask(
                        kind=kind, program=program, input=inputs.strip(), output=first.output or ""
                    ),
                    None,
                )
            )
    return out


def validate_induction(
    program: str,
    inputs: Sequence[str],
    message: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    limits: Limits = DEFAULT_LIMITS,
    max_workers: int | None = None,
) -> ProposalCheck:
    """AZR's validity for an induction proposal: inputs for a given program, and a message.

    Each distinct input is run twice; those that run and agree give the pairs. Valid with at
    least MIN_INDUCTION_PAIRS pairs and a non-empty message; the first half (rounded up) is
    shown, the rest held out.
    """
    if not message.strip():
        return ProposalCheck(None, "empty message")
    distinct = list(dict.fromkeys(i.strip() for i in inputs if i.strip()))
    checks = validate_triplets(
        [("induction", program, i) for i in distinct],
        timeout_s=timeout_s,
        limits=limits,
        max_workers=max_workers,
    )
    pairs = tuple((c.task.input, c.task.output) for c in checks if c.task is not None)
    if len(pairs) < MIN_INDUCTION_PAIRS:
        reasons = [c.reason for c in checks if c.reason]
        return ProposalCheck(
            None,
            f"{len(pairs)} valid inputs, need {MIN_INDUCTION_PAIRS}"
            + (f" ({reasons[0]})" if reasons else ""),
        )
    shown = (len(pairs) + 1) // 2
    task = CodeTask(
        kind="induction",
        program=program,
        message=message.strip(),
        visible=pairs[:shown],
        hidden=pairs[shown:],
    )
    return ProposalCheck(task, None)


# -- judging the solver ------------------------------------------------------------------------


def judge(
    tasks: Sequence[CodeTask],
    answers: Sequence[str | None],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    limits: Limits = DEFAULT_LIMITS,
    max_workers: int | None = None,
) -> list[bool | None]:
    """The executor's verdict on each answer: True/False, or None when there is no answer.

    deduction: `outputs_equal(answer, output)`; abduction: the program run on the proposed
    input gives an equal output (any input that does is right, AZR); induction: the
    proposed program gives the held-out outputs on every held-out input.
    """
    verdicts: list[bool | None] = []
    jobs: list[tuple[str, str]] = []
    wanted: list[list[str]] = []  # per task: the outputs its jobs must produce
    for task, answer in zip(tasks, answers, strict=True):
        if answer is None:
            verdicts.append(None)
            wanted.append([])
        elif task.kind == "deduction":
            verdicts.append(outputs_equal(answer, task.output))
            wanted.append([])
        elif task.kind == "abduction":
            verdicts.append(None)
            jobs.append((task.program, answer))
            wanted.append([task.output])
        else:
            verdicts.append(None)
            jobs += [(answer, inputs) for inputs, _ in task.hidden]
            wanted.append([output for _, output in task.hidden])
    results = iter(run_many(jobs, timeout_s, limits=limits, max_workers=max_workers))
    for k, outputs in enumerate(wanted):
        if outputs:
            runs = [next(results) for _ in outputs]
            verdicts[k] = all(
                r.ok and r.output is not None and outputs_equal(r.output, o)
                for r, o in zip(runs, outputs, strict=True)
            )
    return verdicts
