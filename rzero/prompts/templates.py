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
them), and a large model loses nothing by seeing them. The GPU recipes use the zero-shot
prompts `challenger_zero_shot.txt` and `solver_zero_shot.txt` (also in rzero/prompts/),
which ask the same in this project's words with no examples, as the official code does.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rzero.prompts.chat import Chat


def template_path(path: str | None, default: str) -> Path:
    """Where a prompt comes from: `default` in rzero/prompts/ when `path` is None; a bare file
    name (no directory) shipped in rzero/prompts/ (e.g. `solver_zero_shot.txt`), so a recipe
    means the same prompt from any working directory; else `path` itself."""
    shipped = resources.files("rzero").joinpath("prompts")
    if path is None:
        return Path(str(shipped.joinpath(default)))
    if Path(path).name == str(path) and shipped.joinpath(str(path)).is_file():
        return Path(str(shipped.joinpath(str(path))))
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"prompt file {str(path)!r} not found (a bare name is looked up "
            f"in rzero/prompts/ first)"
        )
    return p


def read_template(path: str | None, default: str) -> str:
    return template_path(path, default).read_text()


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
