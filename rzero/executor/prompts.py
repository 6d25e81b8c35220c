"""Chat prompts for the code tasks: a proposer and a solver prompt per task type.

Each prompt is a list of {"role", "content"} messages: a short system instruction, one
worked example as a user/assistant exchange, then the real request. They are short on
purpose, so that a 135M instruct model has a chance to follow the format.

Departures from AZR: AZR's prompts are long single user messages in the R1 <think>/<answer>
format with banned-package lists and several rules; here the rules are one sentence each,
the worked example shows the format, and answers use bare tags (see `parsing.py`). Inputs
are shown as calls, `f(3, 'hi')`, rather than as argument literals.
"""

from __future__ import annotations

from collections.abc import Sequence

from rzero.executor.tasks import CodeTask, call_text

Messages = list[dict[str, str]]

_RULES = (
    "The function must be named f, be deterministic, use only the standard library "
    "(no os, sys, random, time, files or network) and return a value. Put the code in a "
    "```python block and the input, a Python literal, between <input> and </input>; "
    "write several arguments as a tuple, e.g. <input>(3, 'ab')</input>."
)

_PROPOSE_GOAL = {
    "deduction": "Write a new Python function and one input for it, so that working out "
    "its output takes a few careful steps.",
    "abduction": "Write a new Python function and one input for it, so that the input is "
    "hard to guess from the output.",
}

# one argument: a 135M model mostly writes `def f(x)`, and copied a two-argument example's
# tuple input onto it (19 of 32 proposals failed so at temperature 0.7)
_EXAMPLE_PROGRAM = "def f(nums):\n    return sorted(n * 2 for n in nums if n % 2)"
_EXAMPLE_INPUT = "[3, 8, 5, 2]"


def _show_triplet(task: CodeTask) -> str:
    return f"```python\n{task.program}\n```\n<input>{task.input}</input>"


def _propose_request(references: Sequence[CodeTask]) -> str:
    shown = "\n\n".join(_show_triplet(t) for t in references)
    return f"Reference puzzles:\n\n{shown}\n\nWrite one new puzzle, different from the references."


def proposer_messages(
    kind: str, references: Sequence[CodeTask] = (), program: str = "", num_inputs: int = 6
) -> Messages:
    """The proposer's prompt.

    deduction/abduction: `references` are triplets from the buffer (AZR's K references);
    induction: `program` is the buffer program to write `num_inputs` inputs and a message for.
    """
    if kind in _PROPOSE_GOAL:
        system = f"{_PROPOSE_GOAL[kind]} {_RULES}"
        example_refs = [
            CodeTask(kind=kind, program="def f(x):\n    return x", input="'Hello World'")
        ]
        example_answer = f"```python\n{_EXAMPLE_PROGRAM}\n```\n<input>{_EXAMPLE_INPUT}</input>"
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": _propose_request(example_refs)},
            {"role": "assistant", "content": example_answer},
            {"role": "user", "content": _propose_request(references)},
        ]
    if kind == "induction":
        system = (
            f"You are given a Python function f. Write {num_inputs} different inputs "
            "for it, each a Python literal between <input> and </input> (several "
            "arguments as a tuple), and one short sentence between <message> and "
            "</message> that hints what f does without showing the code."
        )
        example = "def f(s):\n    return s[::-1].upper()"
        example_answer = (
            "<input>'abc'</input>\n<input>'level'</input>\n<input>''</input>\n"
            "<input>'a b'</input>\n<message>Reverse the text and capitalise "
            "it.</message>"
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": f"```python\n{example}\n```"},
            {"role": "assistant", "content": example_answer},
            {"role": "user", "content": f"```python\n{program}\n```"},
        ]
    raise ValueError(f"unknown task kind {kind!r}; expected deduction, abduction or induction")


def _deduction_request(task: CodeTask) -> str:
    return f"```python\n{task.program}\n```\nWhat does {call_text(task.input)} return?"


def _abduction_request(task: CodeTask) -> str:
    return f"```python\n{task.program}\n```\nFind an input for which f returns {task.output}."


def _induction_request(task: CodeTask) -> str:
    pairs = "\n".join(f"{call_text(i)} == {o}" for i, o in task.visible)
    return f"{pairs}\nHint: {task.message}"


_SOLVE = {
    "deduction": (
        "Work out what the Python function returns. Think step by step, then give the "
        "return value as a Python literal between <output> and </output>.",
        CodeTask(
            kind="deduction",
            program="def f(a, b):\n    return [a * 2, b + '!']",
            input="(3, 'hi')",
            output="[6, 'hi!']",
        ),
        "a * 2 = 6 and b + '!' = 'hi!'.\n<output>[6, 'hi!']</output>",
        _deduction_request,
    ),
    "abduction": (
        "Find an input for which the Python function returns the given output. Think step "
        "by step, then give the input as a Python literal between <input> and </input>; "
        "write several arguments as a tuple.",
        CodeTask(
            kind="abduction",
            program="def f(x, y):\n    return x * 3 - y",
            input="(4, 2)",
            output="10",
        ),
        "With y = 2 we need x * 3 = 12, so x = 4.\n<input>(4, 2)</input>",
        _abduction_request,
    ),
    "induction": (
        "Write a Python function named f that gives each output from its input. Put the code "
        "in a ```python block.",
        CodeTask(
            kind="induction",
            program="def f(x):\n    return 2 * x",
            message="Double it.",
            visible=(("1", "2"), ("5", "10")),
        ),
        "```python\ndef f(x):\n    return 2 * x\n```",
        _induction_request,
    ),
}


def solver_messages(task: CodeTask) -> Messages:
    """The solver's prompt for `task`; the induction program itself is never shown."""
    system, example, example_answer, request = _SOLVE[task.kind]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": request(example)},
        {"role": "assistant", "content": example_answer},
        {"role": "user", "content": request(task)},
    ]
