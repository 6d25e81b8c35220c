"""Pull the question and the final answer out of model text, and normalise answers.

Everything here is a linear scan: completions are adversarial (a challenger under RL
pressure will produce 100,000-character outputs, 500-deep braces and runs of
backslashes), so there are no backtracking regexes and no recursion.

- `extract_boxed` returns the content of the **last** ``\\boxed{…}`` (or ``\\fbox{…}``,
  or the brace-less ``\\boxed 5``), as R-Zero does for both roles.
- `extract_question` returns the content of the last ``<question>…</question>``.
- `normalize_answer` is the string fast path in front of math-verify. It is
  deliberately conservative: two answers with equal normal forms are always the same
  mathematical answer; everything it cannot decide is left to math-verify.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rzero.prompts.boxed import BRACE_TOKEN, closing_brace

__all__ = ["extract_boxed", "extract_question", "normalize_answer"]

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_SPACE = frozenset(" \t\r\n\f\v")


def extract_boxed(text: str | None) -> str | None:
    """Content of the last ``\\boxed{…}`` / ``\\fbox{…}`` in `text`, stripped.

    Nested braces are balanced (escaped ``\\{``/``\\}`` do not count). The brace-less
    form ``\\boxed 5`` yields the next whitespace-delimited token (up to ``$``) with
    sentence punctuation (``.,;:``) removed from its end. Returns ``None`` when there is
    no box, when the last box is empty or unbalanced; an earlier box is never used as a
    fallback, because the last box is the model's final answer.
    """
    if not text:
        return None
    end = len(text)
    while True:
        pos, command = max((text.rfind(c, 0, end), c) for c in _BOX_COMMANDS)
        if pos < 0:
            return None
        after = pos + len(command)
        if after < len(text) and text[after].isalpha():
            end = pos  # ``\boxedsomething`` is a different command: keep looking left
            continue
        return _box_argument(text, after)


def _box_argument(text: str, start: int) -> str | None:
    i = start
    n = len(text)
    while i < n and text[i] in _SPACE:
        i += 1
    if i >= n:
        return None
    if text[i] == "{":
        end = closing_brace(text, i)
        return None if end is None else text[i + 1 : end].strip() or None  # None: unbalanced
    if i == start and not (text[i].isdigit() or text[i] in "\\-+."):
        return None  # ``\boxed}`` or ``\boxed$``: no argument
    j = i
    while j < n and text[j] not in _SPACE and text[j] != "$":
        j += 1
    token = text[i:j].rstrip(".,;:")
    if not token or not _braces_balanced(token):
        return None
    return token


def _braces_balanced(s: str) -> bool:
    depth = 0
    for match in BRACE_TOKEN.finditer(s):
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


_OPEN_TAG = "<question>"
_CLOSE_TAG = "</question>"


def extract_question(text: str | None) -> str | None:
    """Content of the last ``<question>…</question>`` in `text`, stripped.

    ``None`` when there is no complete tag pair or the question is empty. For nested or
    repeated open tags the innermost (last) open tag before the last close tag wins.
    """
    if not text:
        return None
    close = text.rfind(_CLOSE_TAG)
    if close < 0:
        return None
    open_ = text.rfind(_OPEN_TAG, 0, close)
    if open_ < 0:
        return None
    return text[open_ + len(_OPEN_TAG) : close].strip() or None


# --- normalisation ---------------------------------------------------------------------

# Each rewrite below maps a string to one that typesets to the same mathematics, so the
# normal form never merges two different answers. Anything subtler (``0.5`` vs
# ``\frac12``, units, ``x = 3`` vs ``3``) is math-verify's job.
_UNICODE = str.maketrans({"\u2212": "-", "\u2013": "-", "\u00a0": " ", "~": " "})
_NOT_LETTER = r"(?![A-Za-z])"
_DROP = re.compile(r"\\(?:left|right|displaystyle|textstyle)" + _NOT_LETTER + r"|\\[!,;:]|\\\$|\$")
_FRAC = re.compile(r"\\[dt]frac" + _NOT_LETTER)
_TEXT_WRAPPER = re.compile(r"\\(?:text|textrm|textbf|textit|mathrm|mbox)\s*\{([^{}]*)\}")


def normalize_answer(s: str) -> str:
    """Conservative normal form of an answer string, for the string fast path.

    Strips surrounding whitespace and ``$``; drops ``\\left``/``\\right``,
    ``\\displaystyle`` and the spacing commands ``\\! \\, \\; \\:``; rewrites
    ``\\dfrac``/``\\tfrac`` to ``\\frac``; unwraps ``\\text{…}``-style wrappers whose
    argument has no braces; maps the unicode minus to ``-``; removes whitespace except a
    single space between two letters (``\\pi r`` must not become ``\\pir``); drops one
    trailing sentence period.
    """
    # Only short strings are memoised: an adversarial 100,000-character answer must not
    # pin megabytes in the cache.
    return _normalize_cached(s) if len(s) <= 512 else _normalize(s)


@lru_cache(maxsize=1 << 16)
def _normalize_cached(s: str) -> str:
    return _normalize(s)


def _normalize(s: str) -> str:
    s = s.translate(_UNICODE)
    s = _DROP.sub("", s)
    s = _FRAC.sub(r"\\frac", s)
    for _ in range(8):  # wrappers may be nested: \text{\textbf{A}}
        unwrapped = _TEXT_WRAPPER.sub(r"\1", s)
        if unwrapped == s:
            break
        s = unwrapped
    s = _squeeze_spaces(s)
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1]
    return s


def _squeeze_spaces(s: str) -> str:
    parts = s.split()
    if len(parts) <= 1:
        return parts[0] if parts else ""
    out = [parts[0]]
    for part in parts[1:]:
        if out[-1][-1].isalpha() and part[0].isalpha():
            out.append(" ")
        out.append(part)
    return "".join(out)
