"""Are two answers the same mathematical object? math-verify, behind a hard guard.

R-Zero groups the solver's answers "by mathematical equivalence" (SPEC §1); we use
math-verify (``parse`` + ``verify``) and by default require ``verify`` to hold in **both**
directions, because ``verify(gold, target)`` is not symmetric (assignment simplification,
equation/interval conversion) and a pseudo-label must not depend on which answer
happened to come first.

Why a worker process. math-verify bounds its own work with ``signal.alarm``, which

- only works on the main thread (a reward function called from a trainer thread gets a
  ``ValueError`` or, with timeouts disabled, no protection at all), and
- cannot interrupt a long computation inside C code (huge integer powers, some sympy
  simplifications), so some inputs hang far past it.

So every check runs in a persistent worker process, in that process's main thread
(math-verify's own cheap timeouts still work there), and the parent enforces a hard
wall-clock limit per check (default 5 s): past it the worker is killed and a fresh one
is started. A timed-out check counts as "not equivalent" and is counted in
`equivalence_stats()`. Workers are fresh interpreters (``subprocess`` + a socket pair,
so POSIX only), never ``fork`` children: the parent may hold torch and its threads, and
no ``if __name__ == "__main__"`` guard is asked of the caller's script. A replacement is
launched as soon as a worker is killed, so its start-up (about half a second: a fresh
interpreter importing math-verify) overlaps with the caller's work.

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
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

from rzero.labeling.answers import normalize_answer

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
# the directory holding the `rzero` package, for the worker's sys.path
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

log = logging.getLogger(__name__)


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
        self._proc: subprocess.Popen | None = None
        self._conn: Any = None
        self._ready = False
        _ALL_CHECKERS.add(self)

    # --- public API ----------------------------------------------------------------

    def equivalent(
        self, a: str | None, b: str | None, *, direction: Direction | None = None
    ) -> bool:
        """Whether answers `a` and `b` are equivalent (see the class docstring)."""
        return self.check_many([(a, b)], direction=direction)[0].equivalent

    def equivalent_many(
        self,
        pairs: Sequence[tuple[str | None, str | None]],
        *,
        direction: Direction | None = None,
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
        per-question time budget; a pair cut by its deadline (or with none left) is
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
                    request = ("verify", _for_math_verify(a), _for_math_verify(b), direction)
                    todo[key] = (request, deadline, [i])
            if todo:
                keys = list(todo)
                results = self._run_in_worker(
                    [todo[k][0] for k in keys], [todo[k][1] for k in keys]
                )
                for key, (result, ran, timed_out) in zip(keys, results, strict=True):
                    if result.source in ("math_verify", "timeout"):
                        self._remember(key, result.equivalent)
                        self._slow.pop(key, None)
                        if timed_out is not None:
                            self._note_outcome(key[1:], timed_out)
                    elif result.source == "budget" and ran > 0:
                        self._note_slow(key, ran)
                    for i in todo[key][2]:
                        out[i] = result
            return [c for c in out if c is not None]

    def stats(self) -> EquivalenceStats:
        with self._lock:
            return EquivalenceStats(**self._counts)

    def reset_stats(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(self._counts, 0)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._slow.clear()
            self._record.clear()

    def close(self) -> None:
        """Stop the worker (a later check starts a new one)."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.send(None)
                except OSError:
                    pass
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
            self._kill_worker()

    def _forget_worker_after_fork(self) -> None:
        # A forked child (e.g. a fork-started data loader) must not talk to, or kill,
        # its parent's worker: drop the handles and start afresh if it checks anything.
        self._lock = threading.RLock()
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn, self._ready = None, None, False

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

    # --- the worker ----------------------------------------------------------------

    def _run_in_worker(
        self, requests: list[tuple], deadlines: list[float]
    ) -> list[tuple[Check, float, bool | None]]:
        """Send `requests` in one batch; enforce each deadline as results stream back.

        Returns, per request, its Check, the seconds it ran in the worker itself, and
        whether it timed out (the hard limit, or math-verify's own timeout inside;
        ``None`` when that says nothing about the answers: cut short, or never compared).

        A deadline below `timeout_s` is a caller's budget: it also pays for waiting on a
        worker that is still starting, and running out of it is a "budget" cut, not a
        timeout. At the full limit, start-up time is not charged to the pair.
        """
        out: list[tuple[Check, float, bool | None]] = []
        i = 0
        while i < len(requests):
            budgeted = deadlines[i] < self.timeout_s
            begun = time.monotonic()
            conn = self._ensure_worker(wait_s=deadlines[i] if budgeted else None)
            waited = time.monotonic() - begun if budgeted else 0.0
            if conn is None or deadlines[i] - waited <= 0:
                self._counts["budget_cuts"] += 1
                out.append((Check(False, "budget", waited), 0.0, None))
                i += 1
                continue
            # Stop the batch before the first pair without budget left, so that pair is
            # answered without waiting on (or killing) the worker.
            stop = i + 1
            while stop < len(requests) and deadlines[stop] > 0:
                stop += 1
            batch = [(*req, self.inner_timeout_s) for req in requests[i:stop]]
            try:
                conn.send(batch)
            except OSError:
                self._kill_worker()
                conn = self._ensure_worker()
                conn.send(batch)
            for k in range(i, stop):
                self._counts["math_verify_calls"] += 1
                charged = waited if k == i else 0.0
                started = time.monotonic()
                try:
                    ready = conn.poll(deadlines[k] - charged)
                    message = conn.recv() if ready else None
                except (EOFError, OSError):
                    self._counts["errors"] += 1
                    self._kill_worker(restart=True)
                    ran = time.monotonic() - started
                    out.append((Check(False, "error", charged + ran), ran, None))
                    i = k + 1
                    break
                ran = time.monotonic() - started
                elapsed = charged + ran
                if message is None:
                    full_limit = deadlines[k] >= self.timeout_s
                    self._counts["timeouts" if full_limit else "budget_cuts"] += 1
                    if full_limit:
                        log.warning(
                            "math-verify check exceeded %.1f s; worker replaced", self.timeout_s
                        )
                    self._kill_worker(restart=True)
                    source: Source = "timeout" if full_limit else "budget"
                    out.append((Check(False, source, elapsed), ran, True if full_limit else None))
                    i = k + 1
                    break
                verdict, ok, inner_timeouts, compared = message
                self._counts["inner_timeouts"] += inner_timeouts
                if not ok:
                    self._counts["errors"] += 1
                source = "math_verify" if ok else "error"
                # a check between two parsed answers that finished in time is evidence
                # that neither answer is pathological; one that never compared is not
                outcome = True if inner_timeouts > 0 else (False if compared else None)
                out.append((Check(bool(verdict), source, elapsed), ran, outcome))
            else:
                i = stop
        return out

    def _ensure_worker(self, wait_s: float | None = None) -> Any:
        """The ready worker's connection, starting one if needed.

        With `wait_s`, give up after that long and return ``None`` (the worker keeps
        starting for the next call); without, wait up to `start_timeout_s` or raise.
        """
        if self._proc is None or self._proc.poll() is not None:
            self._kill_worker()
            self._start_worker()
        if not self._ready:
            conn = self._conn
            if not conn.poll(self.start_timeout_s if wait_s is None else max(wait_s, 0.0)):
                if wait_s is not None:
                    return None
                self._kill_worker()
                raise RuntimeError(
                    f"the math-verify worker did not start within {self.start_timeout_s:.0f} s"
                )
            try:
                conn.recv()  # "ready"
            except (EOFError, OSError) as e:
                code = self._proc.wait(timeout=5.0)
                self._kill_worker()
                raise RuntimeError(
                    f"the math-verify worker exited during start-up (exit code {code}); "
                    "see its traceback above. Is math-verify installed?"
                ) from e
            self._ready = True
        return self._conn

    def _start_worker(self) -> None:
        """Launch a worker without waiting for it (it imports math-verify meanwhile)."""
        parent_sock, child_sock = socket.socketpair()
        fd = child_sock.fileno()
        # A fresh interpreter rather than multiprocessing: no fork of a parent that may
        # hold threads, and no re-import of the parent's __main__ (which would demand an
        # ``if __name__ == "__main__"`` guard from every script that checks answers).
        bootstrap = (
            f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
            "from rzero.labeling.equivalence import _worker_entry; _worker_entry()"
        )
        memory = str(self.memory_limit_mb or 0)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", bootstrap, str(fd), memory],
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        finally:
            child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._ready = False
        self._counts["worker_starts"] += 1

    def _kill_worker(self, *, restart: bool = False) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        self._ready = False
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait(timeout=10.0)
        if conn is not None:
            conn.close()
        if restart:
            # Start the replacement now so its start-up overlaps with the caller's work.
            self._start_worker()

    def _debug_sleep_in_worker(self, seconds: float) -> Check:
        """Test hook: make the worker sleep as if a check hung (guarded like a check)."""
        with self._lock:
            return self._run_in_worker([("sleep", seconds, "", "both")], [self.timeout_s])[0][0]

    def _math_verify_only(
        self, pairs: Sequence[tuple[str, str]], direction: Direction = "both"
    ) -> list[bool]:
        """Test hook: math-verify's verdicts with no fast path and no cache."""
        requests = [
            ("verify", _for_math_verify(a), _for_math_verify(b), direction) for a, b in pairs
        ]
        with self._lock:
            results = self._run_in_worker(requests, [self.timeout_s] * len(requests))
        return [check.equivalent for check, _, _ in results]


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


def _for_math_verify(answer: str) -> str:
    """The text math-verify parses: dollars removed, wrapped as a box (or inline math)."""
    s = answer.replace("\\$", "").replace("$", "").strip()
    depth = 0
    for ch in s:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            break
    # A box makes math-verify's LaTeX extraction take the whole answer; unbalanced
    # braces would end the box early, so those go in as inline math instead.
    return f"\\boxed{{{s}}}" if depth == 0 else f"${s}$"


# --- worker side (runs in the child process, in its main thread) -------------------------


class _TimeoutCounter(logging.Handler):
    """Counts (and swallows) math-verify's "Timeout during …" warnings."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Timeout during"):
            self.count += 1


def _worker_entry() -> None:
    """``python -c`` entry point of a worker: argv = [socket fd, memory limit MB]."""
    conn = Connection(int(sys.argv[1]))
    memory_limit_mb = int(sys.argv[2]) or None
    parent = os.getppid()

    def watchdog() -> None:
        # Exit when the parent is gone (even if it was SIGKILLed mid-check).
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        _worker_main(conn, memory_limit_mb)
    except (EOFError, OSError):
        pass  # the parent went away (or gave up on this worker): nothing to report


def _worker_main(conn: Any, memory_limit_mb: int | None) -> None:
    if memory_limit_mb is not None:
        import resource

        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from math_verify import parse, verify

    mv_log = logging.getLogger("math_verify")
    counter = _TimeoutCounter()
    mv_log.addHandler(counter)
    mv_log.propagate = False
    parsed: OrderedDict[tuple[str, int | None], list] = OrderedDict()

    def parse_cached(text: str, inner: int | None) -> list:
        key = (text, inner)
        if key in parsed:
            parsed.move_to_end(key)
            return parsed[key]
        result = parse(text, parsing_timeout=inner)
        parsed[key] = result
        if len(parsed) > 4096:
            parsed.popitem(last=False)
        return result

    conn.send(("ready", os.getpid()))
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        for op, a, b, direction, inner in batch:
            counter.count = 0
            if op == "sleep":
                time.sleep(a)
                conn.send((False, True, 0, False))
                continue
            compared = False
            try:
                pa, pb = parse_cached(a, inner), parse_cached(b, inner)
                if not pa or not pb:
                    verdict = False
                elif direction == "forward":
                    compared = True
                    verdict = verify(pa, pb, timeout_seconds=inner)
                else:
                    compared = True
                    forward = verify(pa, pb, timeout_seconds=inner)
                    if direction == "both":
                        verdict = forward and verify(pb, pa, timeout_seconds=inner)
                    else:
                        verdict = forward or verify(pb, pa, timeout_seconds=inner)
                ok = True
            except Exception:  # math-verify rarely raises; an error is "not equivalent"
                verdict, ok = False, False
            except BaseException as e:  # its TimeoutException is not an Exception
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                verdict, ok = False, True
                counter.count += 1
            conn.send((bool(verdict), ok, counter.count, compared))


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
