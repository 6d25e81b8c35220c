"""The SFT sets SPIN trains on (and SPAG mixes into its updates): rows of (prompt chat, data
answer y), split into training and held-out.

    embedded:easy-worked   the `easy` templates drawn with their own seed, every problem of
                           the evaluation tier `easy` and of its development split `easy:7`
                           left out word for word, each answered by `worked_solution` in one
                           fixed step-by-step style ending in \\boxed{answer}. The base model
                           does not write this style (it imitates its few-shot prompt), so
                           p_data is a distribution it does not already match, and the data
                           answers are right: a controllable synthetic p_data, as seed §6.1
                           recommends for calibrating a discriminator.
    a .jsonl file          rows {prompt, response}; or {messages}: the last assistant turn
                           is y, the turns before it the prompt; or {prompt, messages}
                           (Ultrachat's layout): the prompt and the first assistant reply,
                           the single-turn pairs the official SPIN data is made of; or
                           {instruction, input, output} (Alpaca's layout, SPAG's SFT data)
    a hub dataset id       the same columns, `id[:split]` (HuggingFaceH4/ultrachat_200k:
                           train_sft for the paper's recipe)

The embedded set's prompt is the solver's prompt (`rzero.prompts.solver`), the one the
evaluation asks with, so what SPIN trains is what `easy` measures. Held-out rows are the
first `heldout` of the set and training rows the next `prompts`; an iteration's prompts are
the same every iteration (the paper resamples nothing: its 50k prompts are fixed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rzero.config import ConfigError
from rzero.evaluation.easy import TEMPLATES, easy_benchmark, easy_dev_benchmark
from rzero.prompts.chat import Chat
from rzero.prompts.solver import solver_chat

EMBEDDED = "embedded:easy-worked"
SFT_SEED = 20261201  # the embedded set's draw; `easy` is 20251130, its dev split easy:7
DEV_SEED = 7


@dataclass(frozen=True)
class SFTRow:
    id: str
    prompt: Chat  # the chat that asks (system, few-shot turns, the user's question)
    response: str  # the data answer y
    answer: str | None = None  # the final answer, where the set knows it (embedded)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "prompt": self.prompt,
            "response": self.response,
            "answer": self.answer,
        }


# ---------------------------------------------------------------- the worked style

_WHAT = re.compile(r"^What is (\d+) (\+|-|times) (\d+)(?:, plus (\d+)| ([+-]) (\d+))?\?$")
_MORE = re.compile(r"^(\w+) has (\d+) (\w+) and gets (\d+) more\.")
_LEFT = re.compile(r"^(\w+) had (\d+) (\w+) and gave (\d+) of them away\.")
_GROUPS = re.compile(r"^(\w+) has (\d+) boxes with (\d+) (\w+) in each box, and (\d+) more")


def _op(a: int, sign: str, b: int) -> tuple[str, int]:
    if sign == "+":
        return f"{a} + {b} = {a + b}", a + b
    if sign == "-":
        return f"{a} - {b} = {a - b}", a - b
    return f"{a} * {b} = {a * b}", a * b


def worked_solution(problem: str) -> str:
    """The data answer to an `easy` problem: each operation on its own line, in order, as
    "First, ... Then, ...", quantities named in the word problems, and the last line
    "The answer is \\boxed{N}." ValueError for a problem outside the templates."""
    m = _WHAT.match(problem)
    if m:
        a, word, b, plus, sign2, c = m.groups()
        sign = "*" if word == "times" else word
        line, value = _op(int(a), sign, int(b))
        if plus is None and sign2 is None:
            return f"We compute {line}.\nThe answer is \\boxed{{{value}}}."
        second, total = _op(value, "+" if plus else sign2, int(plus or c))
        return f"First, {line}.\nThen, {second}.\nThe answer is \\boxed{{{total}}}."
    m = _MORE.match(problem)
    if m:
        name, a, thing, b = m.groups()
        line, value = _op(int(a), "+", int(b))
        return (
            f"{name} starts with {a} {thing}.\nGetting {b} more gives {line} {thing}.\n"
            f"The answer is \\boxed{{{value}}}."
        )
    m = _LEFT.match(problem)
    if m:
        name, a, thing, b = m.groups()
        line, value = _op(int(a), "-", int(b))
        return (
            f"{name} starts with {a} {thing}.\nGiving away {b} leaves {line} {thing}.\n"
            f"The answer is \\boxed{{{value}}}."
        )
    m = _GROUPS.match(problem)
    if m:
        _, a, b, thing, c = m.groups()
        first, boxed = _op(int(a), "*", int(b))
        second, total = _op(boxed, "+", int(c))
        return (
            f"First, {a} boxes of {b} {thing} hold {first} {thing}.\nThen, with {c} more "
            f"on the table, {second} {thing}.\nThe answer is \\boxed{{{total}}}."
        )
    raise ValueError(f"not an easy-template problem: {problem!r}")


def embedded_rows(n: int, *, key: str = "spin.data") -> list[SFTRow]:
    """`n` rows of the embedded set, in a fixed order: one problem of each `easy` template in
    turn (a template whose distinct problems run out drops out of the turn), none of them
    a problem of `easy` or of `easy:7`; ConfigError if the templates cannot give `n`."""
    import random

    taken = {item["problem"] for item in easy_benchmark()}
    taken |= {item["problem"] for item in easy_dev_benchmark(DEV_SEED)}
    rngs = {name: random.Random(f"{SFT_SEED}:{name}") for name in TEMPLATES}
    live = list(TEMPLATES)
    rows: list[SFTRow] = []
    while len(rows) < n and live:
        for name in list(live):
            for _attempt in range(200):
                problem, value, _ = TEMPLATES[name](rngs[name])
                if problem not in taken:
                    break
            else:
                live.remove(name)  # its distinct problems are used up
                continue
            taken.add(problem)
            rows.append(
                SFTRow(
                    f"sft-{len(rows):05d}",
                    solver_chat(problem),
                    worked_solution(problem),
                    str(value),
                )
            )
            if len(rows) == n:
                break
    if len(rows) < n:
        raise ConfigError(
            f"{key}={EMBEDDED!r}: the easy templates give {len(rows)} "
            f"distinct problems outside the evaluation items, not {n}"
        )
    return rows


# ---------------------------------------------------------------- files and the hub


def _row(i: int, raw: dict[str, Any], where: str) -> SFTRow:
    if isinstance(raw.get("prompt"), str) and "messages" in raw and "response" not in raw:
        # Ultrachat's layout: the first user turn and the first reply, as the official SPIN
        # data takes them
        reply = next((m["content"] for m in raw["messages"] if m.get("role") == "assistant"), None)
        if reply is None:
            raise ConfigError(f"{where}: row {i}: 'messages' holds no assistant turn")
        return SFTRow(
            str(raw.get("prompt_id", raw.get("id", i))),
            [{"role": "user", "content": raw["prompt"]}],
            str(reply),
        )
    if "messages" in raw:
        messages = list(raw["messages"])
        if not messages or messages[-1].get("role") != "assistant" or len(messages) < 2:
            raise ConfigError(
                f"{where}: row {i}: 'messages' must end with an assistant turn "
                f"after at least one other turn"
            )
        return SFTRow(str(raw.get("id", i)), messages[:-1], str(messages[-1]["content"]))
    if "instruction" in raw and "output" in raw:  # Alpaca's layout (SPAG's SFT data)
        text = str(raw["instruction"]) + (f"\n\n{raw['input']}" if raw.get("input") else "")
        return SFTRow(
            str(raw.get("id", i)), [{"role": "user", "content": text}], str(raw["output"])
        )
    if "prompt" in raw and "response" in raw:
        prompt = raw["prompt"]
        chat = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        return SFTRow(str(raw.get("id", i)), chat, str(raw["response"]), raw.get("answer"))
    raise ConfigError(
        f"{where}: row {i} has neither 'prompt' and 'response' nor 'messages' "
        f"(keys: {', '.join(sorted(raw)) or 'none'})"
    )


def _jsonl_rows(path: Path, n: int, key: str) -> list[SFTRow]:
    rows = []
    with path.open() as f:
        for i, line in enumerate(f):
            if len(rows) == n:
                break
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{key}={str(path)!r}: line {i + 1} is not JSON ({exc.msg})"
                ) from None
            rows.append(_row(i, raw, f"{key}={str(path)!r}"))
    return rows


def _hub_rows(spec: str, n: int, key: str) -> list[SFTRow]:
    from datasets import load_dataset

    name, _, split = spec.partition(":")
    try:
        data = load_dataset(name, split=f"{split or 'train'}[:{n}]")
    except Exception as exc:  # datasets raises many kinds; one line names the set
        raise ConfigError(
            f"{key}={spec!r}: cannot load it from the hub "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        ) from None
    return [_row(i, dict(r), f"{key}={spec!r}") for i, r in enumerate(data)]


Loader = Callable[[str, int], list[SFTRow]]


def load_sft(
    spec: str, n: int, *, key: str = "spin.data", need: str = "spin.heldout + spin.prompts"
) -> list[SFTRow]:
    """The first `n` rows of the SFT set `spec` (see the module docstring); ConfigError,
    naming the config field `key` and what needs the rows (`need`), if it cannot be read or
    has fewer than `n` rows."""
    if spec == EMBEDDED:
        rows = embedded_rows(n, key=key)
    elif spec.endswith(".jsonl"):
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"{key}={spec!r}: no such file")
        rows = _jsonl_rows(path, n, key)
    else:
        rows = _hub_rows(spec, n, key)
    if len(rows) < n:
        raise ConfigError(f"{key}={spec!r}: {len(rows)} rows, but {need} needs {n}")
    return rows


def split(rows: list[SFTRow], heldout: int) -> tuple[list[SFTRow], list[SFTRow]]:
    """(training rows, held-out rows): the first `heldout` rows are held out."""
    return rows[heldout:], rows[:heldout]
