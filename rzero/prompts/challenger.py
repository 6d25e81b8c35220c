"""The challenger's prompt: the default few-shot chat, or a file given by
`challenger.prompt_file` (format in `rzero.prompts.templates`)."""

from __future__ import annotations

from rzero.prompts.chat import Chat
from rzero.prompts.templates import read_template, to_chat


def challenger_chat(path: str | None = None) -> Chat:
    return to_chat(read_template(path, "challenger.txt"))
