"""The math-verify worker process behind `rzero.labeling.equivalence`, and its hard limit.

Why a worker process. math-verify bounds its own work with ``signal.alarm``, which

- only works on the main thread (a reward function called from a trainer thread gets a
  ``ValueError`` or, with timeouts disabled, no protection at all), and
- cannot interrupt a long computation inside C code (huge integer powers, some sympy
  simplifications), so some inputs hang far past it.

So every check runs in a persistent worker process, in that process's main thread
(math-verify's own cheap timeouts still work there), and the parent enforces a hard
wall-clock limit per check (default 5 s): past it the worker is killed and a fresh one
is started. Workers are fresh interpreters (``subprocess`` + a socket pair, so POSIX
only), never ``fork`` children: the parent may hold torch and its threads, and no
``if __name__ == "__main__"`` guard is asked of the caller's script. A replacement is
launched as soon as a worker is killed, so its start-up (about half a second: a fresh
interpreter importing math-verify) overlaps with the caller's work.

Parent side: `WorkerProcess`, owned by an `EquivalenceChecker`, which serialises every
call to it under its lock. Child side: `_worker_entry` (the ``python -c`` entry point)
and `_worker_main`, which answers batches of requests one message per request.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any, Literal, NamedTuple

__all__ = ["WorkerProcess", "WorkerResult", "sleep_request", "verify_request"]

# the directory holding the `rzero` package, for the worker's sys.path
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

log = logging.getLogger(__name__)


def verify_request(a: str, b: str, direction: str) -> tuple:
    """The request checking answers `a` and `b` in `direction` (see `WorkerProcess.run`)."""
    return ("verify", _for_math_verify(a), _for_math_verify(b), direction)


def sleep_request(seconds: float) -> tuple:
    """Test hook: a request that makes the worker sleep as if a check hung."""
    return ("sleep", seconds, "", "both")


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


class WorkerResult(NamedTuple):
    """Outcome of one request sent to the worker."""

    equivalent: bool
    source: Literal["math_verify", "timeout", "budget", "error"]
    seconds: float  # charged to the request, including start-up waited for under a budget
    ran: float  # seconds it ran in the worker itself
    # whether it timed out (the hard limit, or math-verify's own timeout inside); ``None``
    # when that says nothing about the answers: cut short, or never compared
    timed_out: bool | None


class WorkerProcess:
    """The parent's handle on the math-verify worker: started lazily, replaced on timeout.

    Not thread-safe: the owner serialises calls (`EquivalenceChecker` holds its lock).

    Args:
        timeout_s: the hard wall-clock limit of one request.
        inner_timeout_s: math-verify's own timeouts inside the worker (``None``: off).
        start_timeout_s: how long a new worker may take to become ready.
        memory_limit_mb: optional ``RLIMIT_AS`` for the worker.
        counts: the owner's counters (``math_verify_calls``, ``timeouts``,
            ``inner_timeouts``, ``budget_cuts``, ``errors``, ``worker_starts``), updated
            in place; the owner must reset them in place too.
    """

    def __init__(
        self,
        *,
        timeout_s: float,
        inner_timeout_s: int | None,
        start_timeout_s: float,
        memory_limit_mb: int | None,
        counts: dict[str, int],
    ) -> None:
        self.timeout_s = timeout_s
        self.inner_timeout_s = inner_timeout_s
        self.start_timeout_s = start_timeout_s
        self.memory_limit_mb = memory_limit_mb
        self._counts = counts
        self._proc: subprocess.Popen | None = None
        self._conn: Any = None
        self._ready = False

    def run(
        self, requests: list[tuple], deadlines: list[float], *, budget: bool = False
    ) -> list[WorkerResult]:
        """Send `requests` in one batch; enforce each deadline as results stream back.

        Requests come from `verify_request` (or the test hook `sleep_request`).

        With `budget` (or where a deadline is below `timeout_s`) the deadlines are a
        caller's budget: it also pays for waiting on a worker that is still starting, and
        running out of it before the full limit is a "budget" cut, not a timeout. Without
        one, start-up time is not charged to the request.
        """
        out: list[WorkerResult] = []
        i = 0
        while i < len(requests):
            budgeted = budget or deadlines[i] < self.timeout_s
            begun = time.monotonic()
            conn = self._ensure(wait_s=deadlines[i] if budgeted else None)
            waited = time.monotonic() - begun if budgeted else 0.0
            if conn is None or deadlines[i] - waited <= 0:
                self._counts["budget_cuts"] += 1
                out.append(WorkerResult(False, "budget", waited, 0.0, None))
                i += 1
                continue
            # Stop the batch before the first request without budget left, so that one is
            # answered without waiting on (or killing) the worker.
            stop = i + 1
            while stop < len(requests) and deadlines[stop] > 0:
                stop += 1
            batch = [(*req, self.inner_timeout_s) for req in requests[i:stop]]
            try:
                conn.send(batch)
            except OSError:
                self._kill()
                conn = self._ensure()
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
                    self._kill(restart=True)
                    ran = time.monotonic() - started
                    out.append(WorkerResult(False, "error", charged + ran, ran, None))
                    i = k + 1
                    break
                ran = time.monotonic() - started
                elapsed = charged + ran
                if message is None:
                    full_limit = deadlines[k] - charged >= self.timeout_s
                    self._counts["timeouts" if full_limit else "budget_cuts"] += 1
                    if full_limit:
                        log.warning(
                            "math-verify check exceeded %.1f s; worker replaced", self.timeout_s
                        )
                    self._kill(restart=True)
                    if full_limit:
                        out.append(WorkerResult(False, "timeout", elapsed, ran, True))
                    else:
                        out.append(WorkerResult(False, "budget", elapsed, ran, None))
                    i = k + 1
                    break
                verdict, ok, inner_timeouts, compared = message
                self._counts["inner_timeouts"] += inner_timeouts
                if not ok:
                    self._counts["errors"] += 1
                # a check between two parsed answers that finished in time is evidence
                # that neither answer is pathological; one that never compared is not
                outcome = True if inner_timeouts > 0 else (False if compared else None)
                source = "math_verify" if ok else "error"
                out.append(WorkerResult(bool(verdict), source, elapsed, ran, outcome))
            else:
                i = stop
        return out

    def close(self) -> None:
        """Ask the worker to exit, then make sure it has (a later `run` starts a new one)."""
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
        self._kill()

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's worker without talking to, or killing, it;
        the child starts its own if it checks anything."""
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn, self._ready = None, None, False

    def _ensure(self, wait_s: float | None = None) -> Any:
        """The ready worker's connection, starting one if needed.

        With `wait_s`, give up after that long and return ``None`` (the worker keeps
        starting for the next call); without, wait up to `start_timeout_s` or raise.
        """
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._start()
        if not self._ready:
            conn = self._conn
            if not conn.poll(self.start_timeout_s if wait_s is None else max(wait_s, 0.0)):
                if wait_s is not None:
                    return None
                self._kill()
                raise RuntimeError(
                    f"the math-verify worker did not start within {self.start_timeout_s:.0f} s"
                )
            try:
                conn.recv()  # "ready"
            except (EOFError, OSError) as e:
                code = self._proc.wait(timeout=5.0)
                self._kill()
                raise RuntimeError(
                    f"the math-verify worker exited during start-up (exit code {code}); "
                    "see its traceback above. Is math-verify installed?"
                ) from e
            self._ready = True
        return self._conn

    def _start(self) -> None:
        """Launch a worker without waiting for it (it imports math-verify meanwhile)."""
        parent_sock, child_sock = socket.socketpair()
        fd = child_sock.fileno()
        # A fresh interpreter rather than multiprocessing: no fork of a parent that may
        # hold threads, and no re-import of the parent's __main__ (which would demand an
        # ``if __name__ == "__main__"`` guard from every script that checks answers).
        bootstrap = (
            f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
            "from rzero.labeling.equivalence_worker import _worker_entry; _worker_entry()"
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

    def _kill(self, *, restart: bool = False) -> None:
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
            self._start()


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
