"""Are two answers the same mathematical object? math-verify, behind a hard guard.

R-Zero groups the solver's answers "by mathematical equivalence" (SPEC §1); we use
math-verify (``parse`` + ``verify``) and by default require ``verify`` to hold in **both**
directions, because ``verify(gold, target)`` is not symmetric (assignment simplification,
equation/interval conversion) and a pseudo-label must not depend on which answer
happened to come first.

Every check runs in a persistent math-verify worker process under a hard wall-clock
limit per check (default 5 s; see `rzero.labeling.equivalence_worker` for why, and how).
A timed-out check counts as "not equivalent" and is counted in `equivalence_stats()`.

In front of the worker sit fast paths that never merge different answers (equal
`normalize_answer` forms; two plain integers of at most 15 digits, compared exactly as
math-verify would; answers longer than 2,000 characters or nested more than 32 braces
deep, which match only an identical string) and an LRU cache keyed by the normalised
pair (order-free for the symmetric directions). Timeouts are cached too, so a slow pair
costs its time limit once, not once per vote; and an answer that times out in at least
three and at least half of its comparisons (``10^{10^{10}}`` against any number) gets
no more worker time at all. Callers with a time budget (voting) pass per-pair deadlines
(`EquivalenceChecker.check_many`); a pair cut by one is "not equivalent" but not cached.

Every call is thread-safe (one lock per checker) and works from any thread.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rzero.labeling.answers import normalize_answer
from rzero.labeling.equivalence_worker import WorkerProcess, sleep_request, verify_request

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Check",
    "Direction",
    "EquivalenceChecker",
    "EquivalenceStats",
    "configure",
    "equivalence_stats",
    "equivalent",
    "equivalent_many",
    "get_checker",
    "reset_equivalence_stats",
    "shutdown",
    "use_settings",
]

Direction = Literal["both", "either", "forward"]
Source = Literal["fast_path", "cache", "math_verify", "timeout", "budget", "slow_answer", "error"]

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_DIRECTION: Direction = "both"
DEFAULT_CACHE_SIZE = 1 << 17
_DIRECTIONS = ("both", "either", "forward")
# At most 15 digits: math-verify compares numbers to 15 significant digits, so beyond
# that an exact integer comparison could disagree with it.
_PLAIN_INT = re.compile(r"-?[0-9]{1,15}")
# Answers longer than this, or nested deeper, never reach math-verify: no real answer
# looks like that, and parsing them is where math-verify spends seconds (a 500-deep brace
# nest takes its whole parse timeout). They still match an identical string.
_MAX_ANSWER_CHARS = 2_000
_MAX_BRACE_DEPTH = 32


@dataclass(frozen=True)
class EquivalenceStats:
    """Counters of one checker since it was created (or last reset)."""

    calls: int  # pairs asked about
    cache_hits: int
    fast_path_hits: int
    math_verify_calls: int  # pairs actually sent to the worker
    timeouts: int  # hard wall-clock limit hit: worker killed and replaced
    inner_timeouts: int  # math-verify's own signal timeout fired inside the worker
    budget_cuts: int  # pairs not checked (or cut short) because a caller's budget ran out
    slow_answer_skips: int  # pairs not checked because one answer keeps timing out
    errors: int  # worker died or raised
    worker_starts: int


@dataclass(frozen=True)
class Check:
    """Outcome of one pair: the verdict, where it came from, and worker seconds spent."""

    equivalent: bool
    source: Source
    seconds: float = 0.0


class EquivalenceChecker:
    """Guarded, cached math-verify equivalence.

    Args:
        timeout_s: hard wall-clock limit for one pair (parsing both answers and verifying
            in the requested directions), enforced by killing the worker.
        direction: ``"both"`` (verify(a, b) and verify(b, a)), ``"either"`` (one of
            them) or ``"forward"`` (verify(gold=a, target=b) only).
        cache_size: entries of the verdict LRU cache.
        inner_timeout_s: math-verify's own ``parsing_timeout``/``timeout_seconds`` inside
            the worker (whole seconds; ``None`` disables them). Default: a quarter of
            `timeout_s`, at least 1 s, so Python-level slowness is usually stopped
            cheaply before the hard limit has to kill the worker.
        start_timeout_s: how long a new worker may take to become ready.
        memory_limit_mb: optional ``RLIMIT_AS`` for the worker (POSIX only); a check
            that runs out of memory is an error, i.e. "not equivalent".
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        direction: Direction = DEFAULT_DIRECTION,
        cache_size: int = DEFAULT_CACHE_SIZE,
        inner_timeout_s: int | None | Literal["auto"] = "auto",
        start_timeout_s: float = 120.0,
        memory_limit_mb: int | None = None,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        _check_direction(direction)
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size!r}")
        if inner_timeout_s == "auto":
            inner_timeout_s = max(1, int(timeout_s // 4))
        self.timeout_s = float(timeout_s)
        self.direction: Direction = direction
        self.cache_size = cache_size
        self.inner_timeout_s = inner_timeout_s
        self.start_timeout_s = start_timeout_s
        self.memory_limit_mb = memory_limit_mb
        self._lock = threading.RLock()
        self._cache: OrderedDict[tuple[str, str, str], bool] = OrderedDict()
        self._slow: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        # normalised answer -> [checks that timed out, checks that completed]
        self._record: OrderedDict[str, list[int]] = OrderedDict()
        self._counts = dict.fromkeys(EquivalenceStats.__dataclass_fields__, 0)
        # the worker updates the counters in place (so they are reset in place too)
        self._worker = WorkerProcess(
            timeout_s=self.timeout_s,
            inner_timeout_s=inner_timeout_s,
            start_timeout_s=start_timeout_s,
            memory_limit_mb=memory_limit_mb,
            counts=self._counts,
        )
        _ALL_CHECKERS.add(self)

    # --- public API ----------------------------------------------------------------

    def equivalent(
        self, a: str | None, b: str | None, *, direction: Direction | None = None
    ) -> bool:
        """Whether answers `a` and `b` are equivalent (see the class docstring)."""
        return self.check_many([(a, b)], direction=direction)[0].equivalent

    def equivalent_many(
        self, pairs: Sequence[tuple[str | None, str | None]], *, direction: Direction | None = None
    ) -> list[bool]:
        """Verdicts for many pairs with one round-trip to the worker."""
        return [c.equivalent for c in self.check_many(pairs, direction=direction)]

    def check_many(
        self,
        pairs: Sequence[tuple[str | None, str | None]],
        *,
        direction: Direction | None = None,
        deadlines: Sequence[float] | None = None,
    ) -> list[Check]:
        """Like `equivalent_many`, with provenance and optional per-pair deadlines.

        `deadlines[i]` (seconds) caps pair i below `timeout_s`, so a caller can spend a
        per-question time budget (waiting on a worker that is still starting is charged to
        it, even where a deadline equals the limit); a pair cut by its deadline (or with none left) is
        "not equivalent" with source ``"budget"`` and is not cached, since it never got
        the full limit. Fast-path and cached pairs cost no budget.
        """
        direction = direction or self.direction
        _check_direction(direction)
        if deadlines is not None and len(deadlines) != len(pairs):
            raise ValueError(f"got {len(deadlines)} deadlines for {len(pairs)} pairs")
        with self._lock:
            self._counts["calls"] += len(pairs)
            out: list[Check | None] = [None] * len(pairs)
            # unique unresolved cache key -> (request, deadline, indices)
            todo: dict[tuple[str, str, str], tuple[tuple, float, list[int]]] = {}
            for i, (a, b) in enumerate(pairs):
                verdict, key = self._resolve_locally(a, b, direction)
                if verdict is not None:
                    out[i] = verdict
                    continue
                assert key is not None and a is not None and b is not None
                deadline = (
                    self.timeout_s if deadlines is None else min(self.timeout_s, deadlines[i])
                )
                if deadline <= self._slow.get(key, 0.0):
                    # an earlier check of this pair already ran out of a longer budget
                    self._counts["budget_cuts"] += 1
                    out[i] = Check(False, "budget")
                    continue
                if key in todo:
                    request, previous, indices = todo[key]
                    todo[key] = (request, max(previous, deadline), indices + [i])
                else:
                    todo[key] = (verify_request(a, b, direction), deadline, [i])
            if todo:
                keys = list(todo)
                results = self._worker.run(
                    [todo[k][0] for k in keys],
                    [todo[k][1] for k in keys],
                    budget=deadlines is not None,
                )
                for key, done in zip(keys, results, strict=True):
                    result = Check(done.equivalent, done.source, done.seconds)
                    if result.source in ("math_verify", "timeout"):
                        self._remember(key, result.equivalent)
                        self._slow.pop(key, None)
                        if done.timed_out is not None:
                            self._note_outcome(key[1:], done.timed_out)
                    elif result.source == "budget" and done.ran > 0:
                        self._note_slow(key, done.ran)
                    for i in todo[key][2]:
                        out[i] = result
            return [c for c in out if c is not None]

    def stats(self) -> EquivalenceStats:
        with self._lock:
            return EquivalenceStats(**self._counts)

    def reset_stats(self) -> None:
        with self._lock:
            for name in self._counts:
                self._counts[name] = 0

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._slow.clear()
            self._record.clear()

    def close(self) -> None:
        """Stop the worker (a later check starts a new one)."""
        with self._lock:
            self._worker.close()

    def _forget_worker_after_fork(self) -> None:
        # A forked child (e.g. a fork-started data loader) must not talk to, or kill,
        # its parent's worker: drop the handles and start afresh if it checks anything.
        self._lock = threading.RLock()
        self._worker.forget_after_fork()

    def __enter__(self) -> EquivalenceChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- local resolution ----------------------------------------------------------

    def _resolve_locally(
        self, a: str | None, b: str | None, direction: Direction
    ) -> tuple[Check | None, tuple[str, str, str] | None]:
        if a is None or b is None:
            return self._fast(False), None
        na, nb = normalize_answer(a), normalize_answer(b)
        if not na or not nb:
            return self._fast(False), None
        if na == nb:
            return self._fast(True), None
        if _PLAIN_INT.fullmatch(na) and _PLAIN_INT.fullmatch(nb):
            return self._fast(int(na) == int(nb)), None
        if _too_complex(na) or _too_complex(nb):
            return self._fast(False), None
        key = (direction, na, nb) if direction == "forward" or na <= nb else (direction, nb, na)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self._counts["cache_hits"] += 1
            return Check(cached, "cache"), key
        if self._is_slow_answer(na) or self._is_slow_answer(nb):
            self._counts["slow_answer_skips"] += 1
            return Check(False, "slow_answer"), None
        return None, key

    def _is_slow_answer(self, answer: str) -> bool:
        # An answer that made math-verify time out against three partners, and in at
        # least half of its comparisons, is one sympy cannot handle (10^{10^{10}} against
        # any number): give it no more worker time. It still matches identical strings.
        record = self._record.get(answer)
        return record is not None and record[0] >= 3 and record[0] >= record[1]

    def _note_outcome(self, answers: tuple[str, str], timed_out: bool) -> None:
        for answer in answers:
            record = self._record.setdefault(answer, [0, 0])
            record[0 if timed_out else 1] += 1
            self._record.move_to_end(answer)
        while len(self._record) > 1 << 16:
            self._record.popitem(last=False)

    def _note_slow(self, key: tuple[str, str, str], seconds: float) -> None:
        # Remember how long a budget-cut pair ran, so a later call with no more budget
        # than that does not spend it again on the same pair.
        self._slow[key] = max(seconds, self._slow.get(key, 0.0))
        self._slow.move_to_end(key)
        while len(self._slow) > 4096:
            self._slow.popitem(last=False)

    def _fast(self, verdict: bool) -> Check:
        self._counts["fast_path_hits"] += 1
        return Check(verdict, "fast_path")

    def _remember(self, key: tuple[str, str, str], verdict: bool) -> None:
        if self.cache_size == 0:
            return
        self._cache[key] = verdict
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # --- test hooks ---------------------------------------------------------------

    def _debug_sleep_in_worker(self, seconds: float) -> Check:
        """Test hook: make the worker sleep as if a check hung (guarded like a check)."""
        with self._lock:
            [done] = self._worker.run([sleep_request(seconds)], [self.timeout_s])
        return Check(done.equivalent, done.source, done.seconds)

    def _math_verify_only(
        self, pairs: Sequence[tuple[str, str]], direction: Direction = "both"
    ) -> list[bool]:
        """Test hook: math-verify's verdicts with no fast path and no cache."""
        requests = [verify_request(a, b, direction) for a, b in pairs]
        with self._lock:
            results = self._worker.run(requests, [self.timeout_s] * len(requests))
        return [done.equivalent for done in results]


def _too_complex(answer: str) -> bool:
    if len(answer) > _MAX_ANSWER_CHARS:
        return True
    if answer.count("{") <= _MAX_BRACE_DEPTH:
        return False
    depth = deepest = 0
    for ch in answer:
        if ch == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "}":
            depth -= 1
    return deepest > _MAX_BRACE_DEPTH


_ALL_CHECKERS: weakref.WeakSet[EquivalenceChecker] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for checker in list(_ALL_CHECKERS):
        checker._forget_worker_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_direction(direction: str) -> None:
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be one of {_DIRECTIONS}, got {direction!r}")


# --- module-level default checker ---------------------------------------------------------

_default: EquivalenceChecker | None = None
_default_lock = threading.Lock()


def get_checker() -> EquivalenceChecker:
    """The process-wide checker used by `equivalent` and by voting."""
    global _default
    with _default_lock:
        if _default is None:
            _default = EquivalenceChecker()
        return _default


def configure(**kwargs: Any) -> EquivalenceChecker:
    """Replace the process-wide checker (``timeout_s=``, ``direction=`` …, see
    `EquivalenceChecker`); the old one's worker is stopped and its cache dropped."""
    global _default
    new = EquivalenceChecker(**kwargs)
    with _default_lock:
        old, _default = _default, new
    if old is not None:
        old.close()
    return new


def use_settings(*, timeout_s: float, direction: Direction) -> EquivalenceChecker:
    """Make the process-wide checker grade with `direction` and `timeout_s` (the run's
    `labeling.equivalence` and `labeling.equivalence_timeout`); replaced only when they
    differ, so its warm worker and cache survive repeated calls."""
    global _default
    new = EquivalenceChecker(timeout_s=timeout_s, direction=direction)  # validated; no worker yet
    with _default_lock:
        old = _default
        if old is not None and (old.timeout_s, old.direction) == (new.timeout_s, new.direction):
            return old
        _default = new
    if old is not None:
        old.close()
    return new


def equivalent(a: str | None, b: str | None, *, direction: Direction | None = None) -> bool:
    """Whether two answers are mathematically equivalent (process-wide checker).

    ``None`` or empty answers are never equivalent to anything. `direction` defaults to
    the checker's (``"both"``: math-verify must hold in both directions).
    """
    return get_checker().equivalent(a, b, direction=direction)


def equivalent_many(
    pairs: Sequence[tuple[str | None, str | None]], *, direction: Direction | None = None
) -> list[bool]:
    """`equivalent` for many pairs, with one round-trip to the worker."""
    return get_checker().equivalent_many(pairs, direction=direction)


def equivalence_stats() -> EquivalenceStats:
    """Counters of the process-wide checker: calls, cache and fast-path hits,
    math-verify calls, timeouts, errors, worker starts."""
    return get_checker().stats()


def reset_equivalence_stats() -> None:
    get_checker().reset_stats()


def shutdown() -> None:
    """Stop the process-wide checker's worker (registered with atexit)."""
    with _default_lock:
        checker = _default
    if checker is not None:
        checker.close()


atexit.register(shutdown)
