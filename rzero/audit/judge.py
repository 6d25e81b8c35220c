"""The judge (SPEC §3): any OpenAI-compatible chat endpoint, its verdicts, and their cache.

The judge re-solves a question (temperature 0, final answer in `\\boxed{}`); its answer is
compared with the majority-vote label ỹ by math-verify. Its key comes from the environment
variable *named* by `audit.api_key_env` and is never written anywhere: `Judge.scrub` removes
it from any text we keep.

Each judge call ends in one verdict: `correct` or `wrong` (its boxed answer is / is not
math-verify-equivalent to ỹ), `ill_posed` (it answered \\boxed{ILL-POSED}), or `unjudged`
(call failed after retries, timed out, malformed response, no boxed answer). Unjudged items are
never counted as wrong. Failed calls are not cached, so a rerun tries them again; every verdict
from a reply that arrived (a reply without a box included: the judge samples at temperature 0
with a fixed seed, so asking again gives the same reply) is cached in `RUN_DIR/audit/cache.jsonl`
under a hash of (question, label, judge model, prompt version, sampling settings), so a rerun
makes no calls for them. The equivalence direction is not in the key: the cache lives in one
run directory, whose `labeling.equivalence` is fixed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rzero.config import AuditConfig, ConfigError
from rzero.io import read_jsonl
from rzero.labeling.answers import extract_boxed
from rzero.labeling.equivalence import Direction, equivalent

log = logging.getLogger(__name__)

PROMPT_VERSION = "judge-v1"
ILL_POSED = "ILL-POSED"
JUDGE_SYSTEM = "You are a careful mathematician. You check math problems by solving them."
JUDGE_PROMPT = (
    "Solve the following problem. Reason step by step, then write only the final answer "
    "inside \\boxed{{}}.\n"
    "If the problem is ill-posed (ambiguous, self-contradictory, missing information, or "
    "without a single well-defined answer), write \\boxed{{" + ILL_POSED + "}} instead.\n\n"
    "Problem:\n{question}"
)
# One worked example before the question. A strong judge does not need it; a small one (the
# embedded 135M default) almost never boxes its answer without it, and boxes most with it.
JUDGE_EXAMPLE = ("What is 6 - 4?", "6 - 4 = 2. The final answer is \\boxed{2}.")


def judge_messages(question: str) -> list[dict[str, str]]:
    """The chat sent to the judge (versioned by PROMPT_VERSION: change one, bump the other)."""
    example_q, example_a = JUDGE_EXAMPLE
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": JUDGE_PROMPT.format(question=example_q)},
        {"role": "assistant", "content": example_a},
        {"role": "user", "content": JUDGE_PROMPT.format(question=question)},
    ]


BACKOFF_BASE = 0.5  # s; retry n waits BACKOFF_BASE * 2**n, capped at BACKOFF_MAX
BACKOFF_MAX = 8.0
RETRY_AFTER_MAX = 60.0  # a server asking for a longer pause than this is not waited for
NO_BOX = "no boxed answer"  # the one unjudged reason that is the judge's own, final answer


# ---------------------------------------------------------------- the judge


@dataclass(frozen=True)
class JudgeReply:
    text: str | None  # the judge's reply, None when the call failed
    error: str | None  # why it failed (after retries)
    attempts: int


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date; rare enough to fall back to backoff


class Judge:
    """One OpenAI-compatible endpoint; `ask` never raises for a failed call."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout: float = 120.0,
        retries: int = 3,
        seed: int | None = 0,
    ):
        from openai import OpenAI

        key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key_env and not key:
            log.warning(
                "audit.api_key_env=%s: that environment variable is empty or unset", api_key_env
            )
        self._secret = key  # only to scrub it from any text we keep
        self.base_url = base_url
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retries = retries
        self.seed = seed
        # Our own retry loop (max_retries=0): it decides which failures are worth retrying
        # and turns the last one into an "unjudged" verdict instead of an exception.
        self.client = OpenAI(
            base_url=base_url, api_key=key or "EMPTY", timeout=timeout, max_retries=0
        )
        self.requests = 0
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Make every `ask` in progress give up before its next attempt."""
        self._cancelled.set()

    def scrub(self, text: str | None) -> str | None:
        if text is None or not self._secret:
            return text
        return text.replace(self._secret, "***")

    def ask(self, question: str) -> JudgeReply:
        import openai

        messages = judge_messages(question)
        error = "no attempt"
        for attempt in range(self.retries + 1):
            if self._cancelled.is_set():
                return JudgeReply(None, "cancelled", attempt)
            with self._lock:
                self.requests += 1
            wait = min(BACKOFF_BASE * 2**attempt, BACKOFF_MAX)
            try:
                resp = self.client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    seed=self.seed,
                )
                text = resp.choices[0].message.content if resp.choices else None
                if text is None:
                    raise ValueError("response has no message content")
                return JudgeReply(text, None, attempt + 1)
            except openai.APITimeoutError:
                error = "timeout"
            except openai.APIStatusError as exc:
                error = f"HTTP {exc.status_code}"
                if exc.status_code == 429:
                    retry_after = _retry_after(exc)
                    if retry_after is not None:
                        if retry_after > RETRY_AFTER_MAX:
                            return JudgeReply(
                                None,
                                f"HTTP 429, Retry-After {retry_after:.0f} s too long",
                                attempt + 1,
                            )
                        wait = retry_after
                elif exc.status_code < 500 and exc.status_code not in (408, 409):
                    # A client error (bad model name, bad key) will not heal by retrying.
                    return JudgeReply(
                        None, self.scrub(f"{error}: {exc.message}"[:300]), attempt + 1
                    )
            except openai.APIConnectionError:
                error = "connection error"
            except Exception as exc:  # malformed JSON, missing fields: a broken response
                error = f"malformed response ({type(exc).__name__})"
            if attempt < self.retries:
                self._cancelled.wait(wait)
        return JudgeReply(None, f"{error} after {self.retries + 1} attempts", self.retries + 1)


def _is_ill_posed(answer: str) -> bool:
    # Accept \text{ILL-POSED}, "ill posed", "Ill_Posed", ...
    text = re.sub(r"\\(?:text|mathrm|textbf|textrm)\s*\{([^{}]*)\}", r"\1", answer)
    return re.sub(r"[^a-z]", "", text.lower()) == "illposed"


def verdict_of(
    reply: JudgeReply, label: str, direction: Direction = "both"
) -> tuple[str, str | None, str | None]:
    """(verdict, judge's boxed answer, reason if unjudged) for one judge reply.

    `direction`: math-verify's equivalence direction (the run's labeling.equivalence).
    """
    if reply.text is None:
        return "unjudged", None, reply.error
    answer = extract_boxed(reply.text)
    if answer is None:
        return "unjudged", None, NO_BOX
    if _is_ill_posed(answer):
        return "ill_posed", answer, None
    same = equivalent(answer, label, direction=direction)
    return ("correct" if same else "wrong"), answer, None


# ---------------------------------------------------------------- cache


def cache_key(
    question: str,
    label: str,
    judge_model: str,
    *,
    temperature: float,
    max_tokens: int,
    seed: int | None,
) -> str:
    """Hash of everything that decides a verdict (never the endpoint URL or key)."""
    blob = json.dumps(
        {
            "question": question,
            "label": label,
            "judge_model": judge_model,
            "prompt_version": PROMPT_VERSION,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": seed,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def load_cache(path: Path) -> dict[str, dict[str, Any]]:
    # entries of failed calls are never written; an older cache may hold some: ask again
    return {
        r["key"]: r
        for r in read_jsonl(path)
        if r.get("verdict") is not None
        and (r.get("verdict") != "unjudged" or r.get("reason") == NO_BOX)
    }


# ---------------------------------------------------------------- the endpoint


def host_of(base_url: str) -> str:
    """The host of an endpoint, for reports: never the user part or query, which may hold
    credentials or tokens."""
    return urlparse(base_url).hostname or "?"


def only_served_model(cfg: AuditConfig) -> str:
    """audit.model unset: use the endpoint's model if it serves exactly one."""
    from openai import OpenAI

    key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
    client = OpenAI(
        base_url=cfg.base_url, api_key=key or "EMPTY", timeout=cfg.timeout, max_retries=cfg.retries
    )
    try:
        names = [m.id for m in client.models.list()]
    except Exception as exc:
        raise ConfigError(
            f"audit.model is unset and the models of {host_of(cfg.base_url)} "
            f"could not be listed ({type(exc).__name__}); set audit.model or "
            f"check audit.base_url"
        ) from None
    if len(names) != 1:
        raise ConfigError(
            f"audit.model is unset and {host_of(cfg.base_url)} serves "
            f"{len(names)} models ({', '.join(names[:5])}); set audit.model"
        )
    return names[0]
