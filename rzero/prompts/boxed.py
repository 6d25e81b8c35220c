"""The answer format the prompts ask for, `\\boxed{…}`: the one brace scanner that both the
stop rule (`first_box_end`) and the answer extraction (`rzero.labeling.answers`) use."""

from __future__ import annotations

import re

# one token per escaped character or brace: consuming a backslash together with the next
# character is what keeps ``\{`` out of the depth count, with no look-behind and no
# backtracking (runs of backslashes are consumed two at a time)
BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)


def closing_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the ``{`` at `start`, or None while it is unbalanced
    (escaped braces do not count)."""
    depth = 0
    for match in BRACE_TOKEN.finditer(text, start):
        if match.group() == "{":
            depth += 1
        elif match.group() == "}":
            depth -= 1
            if depth == 0:
                return match.start()
    return None


def first_box_end(text: str) -> int | None:
    """Index just past the closing brace of the first `\\boxed{…}` in `text`, or None while
    it is not closed (escaped braces do not count)."""
    start = text.find("\\boxed{")
    if start < 0:
        return None
    end = closing_brace(text, start + len("\\boxed"))
    return None if end is None else end + 1
