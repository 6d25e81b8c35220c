"""Chat types: a prompt is a list of messages, or a plain string for one user message; a
completion as TRL hands it to a reward function is a string or a list of messages."""

from __future__ import annotations

from typing import Any

Message = dict[str, str]
Chat = list[Message]
Prompt = Chat | str


def as_chat(prompt: Prompt) -> Chat:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def completion_text(completion: Any) -> str:
    """The text of one completion: TRL passes conversational completions as
    [{'role': 'assistant', 'content': ...}] (the contents are joined), plain ones as a string,
    and a single message as a dict."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return "".join(str(m.get("content", "")) for m in completion or [])
