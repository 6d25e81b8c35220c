"""Chat templates read from prompt files: the format both roles' prompts are written in.

A template is a chat: a line starting with `system:`, `user:` or `assistant:` starts a new
message, and the text up to the next such line is its content (text before any role line is
a user message). The last message must be the user's. The solver template holds
`{question}`.

The defaults ask what the official R-Zero prompts ask (the challenger: one hard,
self-contained problem in `<question>` tags with its answer in `\\boxed{}`; the solver:
reason step by step and box the final answer) and add two worked examples as earlier chat
turns. That is a departure from the paper: a 135M model almost never follows the format
from instructions alone (measured with the embedded SmolLM2: 0 of 12 challenger samples
well-formed and 0 of 10 solver answers boxed without examples; 5 of 16 and 14 of 20 with
them), and a large model loses nothing by seeing them.
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


ROLES = ("system", "user", "assistant")


def to_chat(template: str, **fields: str) -> Chat:
    messages: list[dict[str, str]] = []
    for line in template.strip("\n").split("\n"):
        role, sep, rest = line.partition(":")
        if sep and role in ROLES:
            messages.append({"role": role, "content": rest.strip()})
        elif messages:
            messages[-1]["content"] += "\n" + line
        else:
            messages.append({"role": "user", "content": line})
    if not messages or messages[-1]["role"] != "user":
        raise ValueError("a prompt template must end with a user message")
    for m in messages:
        m["content"] = m["content"].strip()
    # str.replace, not str.format: templates and questions hold LaTeX braces; only the
    # last message is filled, so a question never lands in an example
    for key, value in fields.items():
        messages[-1]["content"] = messages[-1]["content"].replace("{" + key + "}", value)
    return messages
