"""The solver's prompt: the default few-shot chat, or a file given by `solver.prompt_file`
(format in `rzero.prompts.templates`). The same prompt asks the frozen solver's votes, trains the
solver and evaluates it, so all three see the question the same way."""

from __future__ import annotations

from rzero.prompts.chat import Chat
from rzero.prompts.templates import read_template, to_chat


def solver_chat(question: str, path: str | None = None) -> Chat:
    template = read_template(path, "solver.txt")
    if "{question}" not in template.rsplit("user:", 1)[-1]:
        raise ValueError(f"solver prompt {path or 'solver.txt'!r} has no {{question}} field")
    return to_chat(template, question=question)
