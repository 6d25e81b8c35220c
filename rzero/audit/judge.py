"""Label-accuracy audit (SPEC §3): an external judge re-solves a sample of pseudo-labelled
questions, and we report how often the majority-vote label ỹ agrees with it.

What is sampled (seeded, and stable when later iterations are added):
- from every challenger GRPO step (rows of `iter_KK/challenger_steps.jsonl` with a valid
  question and a label, grouped by (iteration, step)): `audit.per_step` distinct questions;
- from each iteration's labelled pool (`iter_KK/labelled.jsonl`, rows with a label): two
  independent samples of `audit.per_step`, one of the kept questions (the solver's training
  set) and one of all labelled questions, so each reported accuracy is a simple random sample
  of the set it describes. A question drawn twice is judged once.

The judge is any OpenAI-compatible chat endpoint (`audit.base_url`, `audit.model`, key from the
environment variable *named* by `audit.api_key_env`; the key is never written anywhere). With
no endpoint configured the run's base model is served locally with `transformers serve`, which
only shows that the machinery works: a model judging its own labels is not ground truth.

Each judge call ends in one verdict: `correct` or `wrong` (its boxed answer is / is not
math-verify-equivalent to ỹ), `ill_posed` (it answered \\boxed{ILL-POSED}), or `unjudged`
(call failed after retries, timed out, malformed response, no boxed answer). Unjudged items are
never counted as wrong. Failed calls are not cached, so a rerun tries them again; every verdict
from a reply that arrived (a reply without a box included: the judge samples at temperature 0
with a fixed seed, so asking again gives the same reply) is cached in `RUN_DIR/audit/cache.jsonl`
under a hash of (question, label, judge model, prompt version, sampling settings), so a rerun
makes no calls for them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from rzero.config import AuditConfig
from rzero.io import read_jsonl, write_jsonl_atomic
from rzero.labeling.answers import extract_boxed
from rzero.labeling.equivalence import equivalent
from rzero.labeling.report import build_report, write_report

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
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": JUDGE_PROMPT.format(question=example_q)},
            {"role": "assistant", "content": example_a},
            {"role": "user", "content": JUDGE_PROMPT.format(question=question)}]


EMBEDDED_CONCURRENCY = 2  # requests in flight to the embedded judge's local server
EMBEDDED_TIMEOUT = 900.0  # s; a 512-token answer takes ~40-70 s there, longer under load
BACKOFF_BASE = 0.5  # s; retry n waits BACKOFF_BASE * 2**n, capped at BACKOFF_MAX
BACKOFF_MAX = 8.0
RETRY_AFTER_MAX = 60.0  # a server asking for a longer pause than this is not waited for
NO_BOX = "no boxed answer"  # the one unjudged reason that is the judge's own, final answer
MAX_STORED_RESPONSE = 4000  # characters of the judge's full reply kept in cache and report
CACHE_WRITE_EVERY = 2.0  # s between cache rewrites while an audit runs

EMBEDDED_NOTE = ("This judge is the run's base model itself ({spec}), served locally: its "
                 "verdicts show that the audit machinery works, not whether the labels are "
                 "true. Configure audit.base_url and audit.model to audit with a stronger model.")


# ---------------------------------------------------------------- what gets audited


@dataclass(frozen=True)
class AuditItem:
    source: str  # "step" | "labelled_kept" | "labelled_all"
    iteration: int
    step: int | None
    global_step: int | None
    question: str
    label: str
    p_hat: float
    kept: bool | None


def _iteration_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    out = []
    for d in run_dir.glob("iter_*"):
        suffix = d.name[len("iter_"):]
        if d.is_dir() and suffix.isdigit():
            out.append((int(suffix), d))
    return sorted(out)


def _sample(rows: list[dict[str, Any]], k: int, seed_text: str) -> list[dict[str, Any]]:
    """k distinct (question, label) rows, drawn with a seed that names the group.

    Seeding each group by its own name (not one stream for the whole run) keeps a group's
    sample unchanged when later iterations are added, so their verdicts stay cached.
    """
    distinct: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        distinct.setdefault((r["question"], str(r["label"])), r)
    pool = list(distinct.values())
    return random.Random(seed_text).sample(pool, min(k, len(pool)))


def _steps_per_iteration(run_dir: Path) -> int | None:
    """challenger.steps from the run's config.yaml, for logs that predate `global_step`."""
    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        return int(cfg["challenger"]["steps"])
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        return None


def select_items(run_dir: str | Path, per_step: int, seed: int) -> list[AuditItem]:
    """The audit sample of a run directory (see the module docstring)."""
    items: list[AuditItem] = []
    per_iteration = _steps_per_iteration(Path(run_dir))
    for iteration, d in _iteration_dirs(Path(run_dir)):
        steps: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for r in read_jsonl(d / "challenger_steps.jsonl"):
            if r.get("valid") and r.get("label") is not None and r.get("question"):
                group = (int(r.get("iteration", iteration)), int(r.get("step", 0)))
                steps.setdefault(group, []).append(r)
        for (it, step), rows in sorted(steps.items()):
            for r in _sample(rows, per_step, f"{seed}:step:{it}:{step}"):
                global_step = r.get("global_step")
                if global_step is None and per_iteration is not None:
                    global_step = (it - 1) * per_iteration + step
                items.append(AuditItem("step", it, step, global_step, r["question"],
                                       str(r["label"]), float(r["p_hat"]), None))
        labelled = [r for r in read_jsonl(d / "labelled.jsonl")
                    if r.get("label") is not None and r.get("question")]
        for source, rows in (("labelled_kept", [r for r in labelled if r.get("kept")]),
                             ("labelled_all", labelled)):
            for r in _sample(rows, per_step, f"{seed}:{source}:{iteration}"):
                items.append(AuditItem(source, iteration, None, None, r["question"],
                                       str(r["label"]), float(r["p_hat"]),
                                       bool(r.get("kept"))))
    return items


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

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = None,
                 max_tokens: int = 512, temperature: float = 0.0, timeout: float = 120.0,
                 retries: int = 3, seed: int | None = 0):
        from openai import OpenAI

        key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key_env and not key:
            log.warning("audit.api_key_env=%s: that environment variable is empty or unset",
                        api_key_env)
        self._secret = key  # only to scrub it from any text we keep
        self.base_url = base_url
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retries = retries
        self.seed = seed
        # Our own retry loop (max_retries=0): it decides which failures are worth retrying
        # and turns the last one into an "unjudged" verdict instead of an exception.
        self.client = OpenAI(base_url=base_url, api_key=key or "EMPTY", timeout=timeout,
                             max_retries=0)
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
            wait = min(BACKOFF_BASE * 2 ** attempt, BACKOFF_MAX)
            try:
                resp = self.client.chat.completions.create(
                    model=self.model, messages=messages, temperature=self.temperature,
                    max_tokens=self.max_tokens, seed=self.seed)
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
                            return JudgeReply(None, f"HTTP 429, Retry-After {retry_after:.0f} s "
                                                    "too long", attempt + 1)
                        wait = retry_after
                elif exc.status_code < 500 and exc.status_code not in (408, 409):
                    # A client error (bad model name, bad key) will not heal by retrying.
                    return JudgeReply(None, self.scrub(f"{error}: {exc.message}"[:300]),
                                      attempt + 1)
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


def verdict_of(reply: JudgeReply, label: str) -> tuple[str, str | None, str | None]:
    """(verdict, judge's boxed answer, reason if unjudged) for one judge reply."""
    if reply.text is None:
        return "unjudged", None, reply.error
    answer = extract_boxed(reply.text)
    if answer is None:
        return "unjudged", None, NO_BOX
    if _is_ill_posed(answer):
        return "ill_posed", answer, None
    return ("correct" if equivalent(answer, label) else "wrong"), answer, None


# ---------------------------------------------------------------- cache


def cache_key(question: str, label: str, judge_model: str, *, temperature: float,
              max_tokens: int, seed: int | None) -> str:
    """Hash of everything that decides a verdict (never the endpoint URL or key)."""
    blob = json.dumps({"question": question, "label": label, "judge_model": judge_model,
                       "prompt_version": PROMPT_VERSION, "temperature": temperature,
                       "max_tokens": max_tokens, "seed": seed}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def load_cache(path: Path) -> dict[str, dict[str, Any]]:
    # entries of failed calls are never written; an older cache may hold some: ask again
    return {r["key"]: r for r in read_jsonl(path)
            if r.get("verdict") is not None
            and (r.get("verdict") != "unjudged" or r.get("reason") == NO_BOX)}


# ---------------------------------------------------------------- the audit


def _host(base_url: str) -> str:
    # Host only: a URL may carry credentials or tokens in its user part or query.
    return urlparse(base_url).hostname or "?"


def _run_base_model(run_dir: Path) -> str | None:
    path = run_dir / "config.yaml"
    if not path.is_file():
        return None
    raw = yaml.safe_load(path.read_text()) or {}
    return (raw.get("model") or {}).get("name")


def _keys(items: Sequence[AuditItem], judge_name: str, cfg: AuditConfig) -> list[str]:
    return [cache_key(it.question, it.label, judge_name, temperature=cfg.temperature,
                      max_tokens=cfg.max_tokens, seed=cfg.seed) for it in items]


def _uncached(items: Sequence[AuditItem], judge_name: str, cfg: AuditConfig,
              cache_path: Path) -> int:
    return len(set(_keys(items, judge_name, cfg)) - set(load_cache(cache_path)))


def _judge_all(judge: Judge | None, judge_name: str, items: Sequence[AuditItem],
               cfg: AuditConfig, cache_path: Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Verdicts for all items, from the cache where possible; returns report rows + counts.

    `judge` may be None only when every verdict is cached.
    """
    cache = load_cache(cache_path)
    keys = _keys(items, judge_name, cfg)
    todo: dict[str, AuditItem] = {}
    for key, it in zip(keys, items, strict=True):
        if key not in cache:
            todo.setdefault(key, it)
    cached = len(set(keys) - set(todo))
    log.info("audit: %d items, %d distinct to judge, %d verdicts cached",
             len(items), len(todo), cached)
    fresh: dict[str, dict[str, Any]] = {}
    last_write = time.monotonic()
    if todo:
        if judge is None:
            raise RuntimeError("audit: verdicts missing from the cache and no judge to ask")
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency)
        try:
            futures = {pool.submit(judge.ask, it.question): key for key, it in todo.items()}
            for done, future in enumerate(as_completed(futures), 1):
                key = futures[future]
                it = todo[key]
                reply = future.result()
                # math-verify runs here, in the main thread, one check at a time.
                verdict, answer, reason = verdict_of(reply, it.label)
                fresh[key] = {"key": key, "question": it.question, "label": it.label,
                              "judge_model": judge_name, "prompt_version": PROMPT_VERSION,
                              "verdict": verdict, "judge_answer": judge.scrub(answer),
                              "reason": reason, "attempts": reply.attempts,
                              "response": judge.scrub((reply.text or "")[:MAX_STORED_RESPONSE])}
                if reply.error is None:  # the judge's own answer, boxed or not: final
                    cache[key] = fresh[key]
                if time.monotonic() - last_write > CACHE_WRITE_EVERY:
                    write_jsonl_atomic(cache_path, cache.values())
                    last_write = time.monotonic()
                log.info("audit: %d/%d judged: %s%s", done, len(futures), verdict,
                         f" ({reason})" if reason else "")
        except BaseException:
            # Interrupted: keep what is judged, and do not wait for requests in flight (the
            # caller stopping a local server ends them).
            judge.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            write_jsonl_atomic(cache_path, cache.values())
        pool.shutdown()
    rows = []
    for key, it in zip(keys, items, strict=True):
        v = fresh.get(key) or cache[key]
        rows.append({"source": it.source, "iteration": it.iteration, "step": it.step,
                     "global_step": it.global_step, "question": it.question, "label": it.label,
                     "p_hat": it.p_hat, "kept": it.kept, "key": key, "verdict": v["verdict"],
                     "judge_answer": v["judge_answer"], "reason": v.get("reason"),
                     "response": v.get("response")})
    return rows, {"requests": judge.requests if judge else 0, "cached": cached,
                  "judged_now": len(todo)}


def _audit_with(judge: Judge | None, judge_name: str, host: str, note: str | None, run_dir: Path,
                cfg: AuditConfig, items: Sequence[AuditItem]) -> dict[str, Any]:
    audit_dir = run_dir / "audit"
    rows, counts = _judge_all(judge, judge_name, items, cfg, audit_dir / "cache.jsonl")
    judge_info = {"model": judge_name, "host": host, "prompt_version": PROMPT_VERSION,
                  "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
                  "seed": cfg.seed, "embedded": note is not None, "note": note}
    extra = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "sample": {"per_step": cfg.per_step, "seed": cfg.seed}, **counts}
    report = build_report(rows, judge_info, extra)
    write_report(report, audit_dir)
    return report


def audit_run(run_dir: str | Path, cfg: AuditConfig, *,
              model_spec: str | None = None) -> dict[str, Any]:
    """Audit the pseudo-labels of a run directory; write and return the report.

    With `cfg.base_url` unset, the judge is `model_spec` (default: the run's base model from
    its config.yaml, else the embedded default) served by `transformers serve` on loopback for
    the duration of the audit.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"audit: run directory {str(run_dir)!r} does not exist")
    items = select_items(run_dir, cfg.per_step, cfg.seed)
    if not items:
        log.warning("audit: %s holds no labelled questions yet (iter_*/challenger_steps.jsonl, "
                    "iter_*/labelled.jsonl)", run_dir)

    if cfg.base_url is not None:
        model = cfg.model or _only_served_model(cfg)
        judge = Judge(cfg.base_url, model, api_key_env=cfg.api_key_env,
                      max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                      timeout=cfg.timeout, retries=cfg.retries, seed=cfg.seed)
        return _audit_with(judge, model, _host(cfg.base_url), None, run_dir, cfg, items)

    # ---- embedded default: serve the base model itself, audit, stop it
    from rzero.models import DEFAULT_MODEL, resolve_model
    from rzero.serving import serve_checkpoint

    spec = model_spec or _run_base_model(run_dir) or DEFAULT_MODEL
    note = EMBEDDED_NOTE.format(spec=spec)
    log.warning("audit: no judge configured (audit.base_url); %s", note)
    # Cached under the spec, not the served path (which differs between machines), so a
    # rerun with every verdict cached does not even start the server.
    if not _uncached(items, spec, cfg, run_dir / "audit" / "cache.jsonl"):
        return _audit_with(None, spec, "127.0.0.1", note, run_dir, cfg, items)
    path = resolve_model(spec)
    # One CPU process serves the judge: requests in flight share its cores rather than run
    # faster, and one the client gives up on keeps generating, so a short timeout turns into
    # a pile of retries. Two in flight, and a timeout that covers a full-length answer.
    local = dataclasses.replace(cfg, concurrency=min(cfg.concurrency, EMBEDDED_CONCURRENCY),
                                timeout=max(cfg.timeout, EMBEDDED_TIMEOUT))
    with serve_checkpoint(path, log_path=run_dir / "audit" / "judge_server.log") as served:
        judge = Judge(served.base_url, served.model, max_tokens=local.max_tokens,
                      temperature=local.temperature, timeout=local.timeout,
                      retries=local.retries, seed=local.seed)
        return _audit_with(judge, spec, _host(served.base_url), note, run_dir, local, items)


def _only_served_model(cfg: AuditConfig) -> str:
    """audit.model unset: use the endpoint's model if it serves exactly one."""
    from openai import OpenAI

    key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
    client = OpenAI(base_url=cfg.base_url, api_key=key or "EMPTY", timeout=cfg.timeout,
                    max_retries=cfg.retries)
    try:
        names = [m.id for m in client.models.list()]
    except Exception as exc:
        raise ValueError(f"audit.model is unset and the models of {_host(cfg.base_url)} could "
                         f"not be listed ({type(exc).__name__}); set audit.model") from None
    if len(names) != 1:
        raise ValueError(f"audit.model is unset and {_host(cfg.base_url)} serves "
                         f"{len(names)} models ({', '.join(names[:5])}); set audit.model")
    return names[0]
