"""Run model-written Python in a locked-down child process: `run_program`, `run_many`.

The contract: `program` defines `f`; `inputs` is a Python literal (a tuple is the argument
list, any other value is the one argument), parsed with `ast.literal_eval` in the child,
never `eval`; the result is `repr(f(*inputs))`, or an error. Each call is one fresh process
(`_runner.py`), so a hung or killed worker is simply gone and the next call gets a new one;
`run_many` drives calls from a bounded thread pool.

The walls, outermost first (`sandbox_probe` shows what a confined child sees: ids, limits,
interfaces, root; tests/code/test_executor.py runs hostile programs against each wall):
  * a separate process in its own session, killed as a group at `timeout_s` plus a start-up
    grace, and always killed as a group before it is reaped, so nothing outlives a call;
  * when we run as root (the usual case here): new network namespace, through libc's
    unshare(CLONE_NEWNET) by ctypes (os.unshare needs Python 3.12), so there is no interface
    but a downed loopback and no connection even to 127.0.0.1; new IPC and UTS namespaces
    (best effort: root without CAP_SYS_ADMIN cannot unshare; the probe's `netns` says);
    chroot into an empty, read-only temporary directory that is removed afterwards; all
    groups dropped and uid/gid set to an unprivileged id no other process uses (a base plus
    a slot per concurrent call), so the program cannot signal the parent, another sandbox or
    any system service, and RLIMIT_NPROC (which the kernel ignores for root) holds. The
    child starts as root and drops only after it has imported everything a program may
    import, so the interpreter (here under /root/.pyenv) need not be readable by that uid;
  * no-new-privileges, not dumpable, parent-death SIGKILL (tied to the thread that started
    the child, which always outlives it), and resource limits: RLIMIT_CPU (floor(timeout) +
    1 s), RLIMIT_AS (`Limits.memory_bytes`), RLIMIT_NPROC 0 (no fork, no thread), RLIMIT_FSIZE (the
    result file only), RLIMIT_NOFILE 4 (no new file or socket at all), RLIMIT_CORE 0;
  * a minimal environment (PATH, locale, PYTHONHASHSEED=0 so set order is reproducible):
    no API keys or anything else inherited; stdin/stdout/stderr are /dev/null to the program;
  * the filter of `codecheck.py` (AZR's): imports, dangerous builtins, dunder access, checked
    before any process starts, and the same builtins removed from the child's namespace.

What it does NOT protect against:
  * kernel bugs: there is no seccomp filter, the program shares the host kernel;
  * machine-wide exhaustion: limits are per process, not a cgroup, so `run_many` may use up
    to workers x `memory_bytes` of memory and workers x one CPU;
  * a forged result: code that gets past the filter can write any JSON to the result
    descriptor; only the determinism check and the type checks here stand in its way;
  * a program that catches the alarm keeps running until the parent kills it (timeout_s +
    startup_grace_s), and one that sleeps is bounded by that wall clock, not by RLIMIT_CPU;
  * when not run as root there is no namespace, no chroot and no uid change: the program runs
    as the caller, with rlimits and the filter only (it could signal the caller, read the
    caller's files or open network connections if it got past the filter);
  * two processes whose pids are equal modulo 4096 may hand out the same sandbox uids.

Departures from AZR: AZR runs programs in a subprocess of its own (or SandboxFusion) with a
text blacklist and says plainly that its executor is for research only; the OS walls here
are ours. Interpreter start-up is not counted in `timeout_s` (the child arms its alarm just
before it parses the input).
"""

from __future__ import annotations

import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rzero.executor.codecheck import ALLOWED_MODULES, FORBIDDEN_BUILTINS, check_program

RUNNER = Path(__file__).with_name("_runner.py")
DEFAULT_TIMEOUT_S = 5.0
_ENV = {
    "PATH": "/usr/bin:/bin",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
_SLOTS = 256  # concurrent calls per process; each gets its own uid
_PID_BUCKETS = 4096


@dataclass(frozen=True)
class ExecResult:
    """One run: `ok` with the `repr` of the return value in `output`, or `error`."""

    ok: bool
    output: str | None
    error: str | None


@dataclass(frozen=True)
class Limits:
    """Bounds on one call (the wall-clock timeout is an argument of `run_program`)."""

    memory_bytes: int = 512 * 2**20  # RLIMIT_AS of the child (the interpreter needs ~40 MiB)
    max_output_chars: int = 10_000  # a longer repr is an error, not an output
    max_program_chars: int = 20_000
    max_input_chars: int = 10_000
    startup_grace_s: float = 2.0  # wall clock on top of timeout_s before the group is killed
    uid_base: int = 1_700_000_000  # sandbox uids are uid_base + pid bucket * 256 + slot

    def __post_init__(self) -> None:
        if self.memory_bytes < 64 * 2**20:
            raise ValueError(
                f"Limits.memory_bytes={self.memory_bytes} is too small for the "
                "interpreter; use at least 64 MiB (67108864)"
            )
        for name in ("max_output_chars", "max_program_chars", "max_input_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name}={getattr(self, name)} must be at least 1")
        if not self.startup_grace_s > 0:
            raise ValueError(f"Limits.startup_grace_s={self.startup_grace_s} must be > 0")
        top = self.uid_base + _PID_BUCKETS * _SLOTS
        if not 1000 <= self.uid_base or top >= 2**32 - 1:
            raise ValueError(
                f"Limits.uid_base={self.uid_base} must leave [base, base + "
                f"{_PID_BUCKETS * _SLOTS}) inside unprivileged uids (1000 .. 2**32-2)"
            )


DEFAULT_LIMITS = Limits()

_free_slots: queue.SimpleQueue[int] = queue.SimpleQueue()
for _slot in range(_SLOTS):
    _free_slots.put(_slot)


def run_program(
    program: str,
    inputs: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    limits: Limits = DEFAULT_LIMITS,
    filter_code: bool = True,
) -> ExecResult:
    """Run `f(*literal_eval(inputs))` from `program` in the sandbox.

    `filter_code=False` skips the `codecheck` filter and the child's restricted builtins; it
    exists so that tests can show the operating-system walls hold on their own.
    """
    if not isinstance(program, str) or not isinstance(inputs, str):
        return ExecResult(False, None, "program and inputs must be strings")
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s={timeout_s!r} must be a positive number of seconds")
    if len(program) > limits.max_program_chars:
        return ExecResult(False, None, f"program longer than {limits.max_program_chars} chars")
    if len(inputs) > limits.max_input_chars:
        return ExecResult(False, None, f"inputs longer than {limits.max_input_chars} chars")
    if filter_code:
        reason = check_program(program)
        if reason is not None:
            return ExecResult(False, None, f"refused: {reason}")
    payload = {"program": program, "inputs": inputs, "filter": filter_code, "probe": False}
    return _spawn(payload, float(timeout_s), limits)


def run_many(
    jobs: Sequence[tuple[str, str]],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    max_workers: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
    filter_code: bool = True,
) -> list[ExecResult]:
    """`run_program` on every (program, inputs) pair, at most `max_workers` at a time.

    Results come back in the order of `jobs`. The default concurrency is the CPU count
    (capped at 8): each call is one process busy on one core.
    """
    if not jobs:
        return []
    workers = max_workers if max_workers is not None else min(8, os.cpu_count() or 1)
    if workers < 1:
        raise ValueError(f"max_workers={max_workers} must be at least 1")

    def one(job: tuple[str, str]) -> ExecResult:
        program, inputs = job
        return run_program(program, inputs, timeout_s, limits=limits, filter_code=filter_code)

    with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        return list(pool.map(one, jobs))


def check_deterministic(
    program: str,
    inputs: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    runs: int = 2,
    limits: Limits = DEFAULT_LIMITS,
) -> ExecResult:
    """Run `runs` times one after another (AZR: j = 2); ok only if every output is equal."""
    if runs < 2:
        raise ValueError(f"runs={runs} must be at least 2 to compare anything")
    results = [run_program(program, inputs, timeout_s, limits=limits) for _ in range(runs)]
    for result in results:
        if not result.ok:
            return result
    outputs = {result.output for result in results}
    if len(outputs) > 1:
        return ExecResult(
            False, None, f"nondeterministic: {len(outputs)} different outputs in {runs} runs"
        )
    return results[0]


def sandbox_probe(limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """What a trusted probe sees inside a confined child: ids, rlimits, interfaces, fork.

    Keys: uid, euid, gid, groups, cwd, root_listing, rlimits, netns, interfaces,
    loopback_connect, no_new_privs, dumpable, fork, write, write_after_limits. Raises
    RuntimeError if the child could not be set up.
    """
    result = _spawn({"program": "", "inputs": "()", "filter": True, "probe": True}, 5.0, limits)
    if not result.ok or result.output is None:
        raise RuntimeError(f"sandbox probe failed: {result.error}")
    return json.loads(result.output)


def confined_as_root() -> bool:
    """Whether calls get the namespaces, chroot and uid drop (only possible as root)."""
    return os.geteuid() == 0


def _spawn(payload: dict[str, Any], timeout_s: float, limits: Limits) -> ExecResult:
    slot = _free_slots.get()
    try:
        with tempfile.TemporaryDirectory(prefix="rzero-sandbox-") as work:
            return _spawn_in(work, slot, payload, timeout_s, limits)
    except OSError as e:  # no process could be started (or the directory could not be made)
        return ExecResult(False, None, f"sandbox could not run: {type(e).__name__}: {e}")
    finally:
        _free_slots.put(slot)


def _spawn_in(
    work: str, slot: int, payload: dict[str, Any], timeout_s: float, limits: Limits
) -> ExecResult:
    root = os.path.join(work, "root")
    os.mkdir(root)
    os.chmod(root, 0o555)  # empty and read-only: the program can write nothing here
    uid = limits.uid_base + (os.getpid() % _PID_BUCKETS) * _SLOTS + slot
    payload = dict(
        payload,
        root=root if confined_as_root() else None,
        uid=uid,
        gid=uid,
        timeout_s=timeout_s,
        memory_bytes=limits.memory_bytes,
        max_output_chars=limits.max_output_chars,
        fsize_bytes=_result_bytes(limits),
        allowed_modules=sorted(ALLOWED_MODULES),
        forbidden_builtins=sorted(FORBIDDEN_BUILTINS),
    )
    in_path, out_path = os.path.join(work, "payload.json"), os.path.join(work, "result.json")
    err_path = os.path.join(work, "stderr.txt")  # the runner's own failures, if any
    with open(in_path, "w", encoding="utf-8") as f:
        json.dump(payload, f)
    with open(in_path, "rb") as fin, open(out_path, "wb") as fout, open(err_path, "wb") as ferr:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-s", "-B", str(RUNNER)],
            stdin=fin,
            stdout=fout,
            stderr=ferr,
            cwd=root,
            env=dict(_ENV),
            close_fds=True,
            start_new_session=True,
        )
    try:
        exited = _wait_unreaped(proc.pid, timeout_s + limits.startup_grace_s)
    finally:
        # the group id stays ours while the leader is unreaped, so this cannot hit a
        # stranger; it takes down anything the child may have started
        _kill_group(proc.pid)
        proc.wait()
    with open(out_path, "rb") as f:
        raw = f.read(_result_bytes(limits) + 1)
    with open(err_path, "rb") as f:
        stderr = f.read(4096).decode("utf-8", "replace").strip()
    return _parse_result(raw, exited, proc.returncode, timeout_s, limits, stderr)


def _result_bytes(limits: Limits) -> int:
    # a JSON-escaped output is at most 6 bytes per character, plus the error and the keys
    return 6 * limits.max_output_chars + 4096


def _wait_unreaped(pid: int, timeout_s: float) -> bool:
    """Wait for `pid` to exit without reaping it; False on timeout."""
    deadline = time.monotonic() + timeout_s
    delay = 0.0005
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(2 * delay, 0.02)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _parse_result(
    raw: bytes,
    exited: bool,
    returncode: int | None,
    timeout_s: float,
    limits: Limits,
    stderr: str = "",
) -> ExecResult:
    if not exited:
        return ExecResult(False, None, f"timeout after {timeout_s}s (killed)")
    try:
        result = json.loads(raw.decode("utf-8"))
        ok, output, error = result["ok"], result["output"], result["error"]
    except (ValueError, KeyError, TypeError):
        if returncode is not None and returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"signal {-returncode}"
            why = {
                "SIGXCPU": "CPU time limit",
                "SIGKILL": "killed (memory or CPU limit)",
                "SIGSEGV": "crashed (stack overflow?)",
            }.get(name, "killed")
            return ExecResult(False, None, f"{why}: {name}")
        tail = f": {stderr.splitlines()[-1][:300]}" if stderr else ""
        return ExecResult(False, None, f"no result from the sandbox (exit code {returncode}){tail}")
    if ok is True and isinstance(output, str) and len(output) <= limits.max_output_chars:
        return ExecResult(True, output, None)
    if ok is True:
        return ExecResult(False, None, "malformed or over-long output from the sandbox")
    return ExecResult(False, None, str(error)[:500] if error is not None else "failed")
