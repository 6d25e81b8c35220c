"""Prompt templates for both roles, overridable by file.

A template file's first line may be `system: ...`, the system message; the rest is the user
message. The solver template holds `{question}`. The defaults follow the official R-Zero
prompts in substance: the challenger is asked for one hard, self-contained problem in
`<question>` tags with its answer in `\\boxed{}`; the solver to reason step by step and box
its final answer.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rzero.generation import Chat


def read_template(path: str | None, default: str) -> str:
    if path is None:
        return resources.files("rzero").joinpath("prompts", default).read_text()
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"prompt file {path!r} not found")
    return p.read_text()


def to_chat(template: str, **fields: str) -> Chat:
    lines = template.strip("\n").split("\n")
    messages = []
    if lines and lines[0].startswith("system:"):
        messages.append({"role": "system", "content": lines[0][len("system:"):].strip()})
        lines = lines[1:]
    body = "\n".join(lines).strip()
    # str.replace, not str.format: templates and questions hold LaTeX braces
    for key, value in fields.items():
        body = body.replace("{" + key + "}", value)
    messages.append({"role": "user", "content": body})
    return messages


def challenger_chat(path: str | None = None) -> Chat:
    return to_chat(read_template(path, "challenger.txt"))


def solver_chat(question: str, path: str | None = None) -> Chat:
    template = read_template(path, "solver.txt")
    if "{question}" not in template:
        raise ValueError(f"solver prompt {path or 'solver.txt'!r} has no {{question}} field")
    return to_chat(template, question=question)
