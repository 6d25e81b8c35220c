"""The challenger's prompt: the default few-shot chat, or a file given by
`challenger.prompt_file` (format in `rzero.prompts.templates`)."""

from __future__ import annotations

from collections.abc import Sequence

from rzero.prompts.chat import Chat
from rzero.prompts.templates import read_template, to_chat


def challenger_chat(path: str | None = None) -> Chat:
    return to_chat(read_template(path, "challenger.txt"))


def grounded_challenger_chat(
    anchors: Sequence[tuple[str, str]], ask: str, path: str | None = None
) -> Chat:
    """R-Few's grounded prompt: the challenger template's system message (if it has one),
    then each (problem, answer) anchor as an earlier exchange (`ask`, then the anchor in the
    format the challenger must write), then `ask` again. The template's own worked examples
    are left out: the anchors take their place. On the untrained embedded model this wording
    matters as much as the anchors: four anchors with the plain ask gave 24 of 32 well-formed
    questions, 10 exactly computable; with the default template's closing ask for a hard,
    different problem, 13 and 0."""
    template = challenger_chat(path)
    chat: Chat = [m for m in template[:1] if m["role"] == "system"]
    for problem, answer in anchors:
        chat.append({"role": "user", "content": ask})
        chat.append(
            {
                "role": "assistant",
                "content": f"<question>{problem}</question>\nThe answer is \\boxed{{{answer}}}.",
            }
        )
    chat.append({"role": "user", "content": ask})
    return chat
