"""One writer per run folder: `RunLock`, an exclusive `fcntl.flock` on RUN_DIR/.lock held by
the writing process for the run's life, with the holder (host, pid, start time, command)
written in the file so that a refusal can name it.

    a second writer      refused with `RunLocked` (one line naming the holder; the CLI exits
                         2) before it writes anything
    a dead holder        the kernel drops a process's `flock` when it dies, SIGKILL included,
                         so the next writer takes the lock over; the stale holder line is
                         overwritten
    one process          the lock is re-entrant within a process (a run and the audit it
                         runs, an ablation's variants, a test making two runs of one folder):
                         a process is one writer
    no flock             a file system that refuses `flock` (Lustre mounted without `flock`,
                         some NFS set-ups): the holder line is still written and checked, and
                         a live holder on this host still refuses, but a writer on another
                         host cannot be seen; one warning says so (docs/reliability.md)

Read-only commands (`rzero plan`, `rzero compare`, reading a report) take no lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from rzero.rundir.folder import LOCK_FILE, RunDirConflict

log = logging.getLogger(__name__)

# path -> (the open lock file, how many holders in this process)
_HELD: dict[str, list[Any]] = {}


class RunLocked(RunDirConflict):
    """Another process is writing this run folder."""


def holder_line(holder: dict[str, Any] | None) -> str:
    """Who holds a lock, in words, from the lock file's record."""
    if not holder:
        return "another process (its lock file names no holder)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} since {since} "
        f"({holder.get('command', '?')})"
    )


def _read_holder(path: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(path.read_text() or "null")
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _alive_here(holder: dict[str, Any] | None) -> bool:
    """Whether the recorded holder is a live process on this host."""
    if not holder or holder.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(holder["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError, TypeError):
        return False
    except PermissionError:
        return True
    return int(holder["pid"]) != os.getpid()


class RunLock:
    """The exclusive lock of one run folder; `acquire` on entry, `release` when done."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.key = str(self.run_dir.resolve())
        self.held = False

    def acquire(self) -> RunLock:
        """Take the lock, or raise `RunLocked` naming its holder. Creates RUN_DIR."""
        if self.held:
            return self
        if self.key in _HELD:  # this process already writes the folder
            _HELD[self.key][1] += 1
            self.held = True
            return self
        self.run_dir.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")  # noqa: SIM115 - held open for the run's life
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise RunLocked(
                f"{self.run_dir} is being written by {holder_line(_read_holder(self.path))}; "
                "wait for it to finish or stop it, or use another run directory"
            ) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                f.close()
                raise
            holder = _read_holder(self.path)
            if _alive_here(holder):
                f.close()
                raise RunLocked(
                    f"{self.run_dir} is being written by {holder_line(holder)}; wait for it "
                    "to finish or stop it, or use another run directory"
                ) from None
            log.warning(
                "%s: this file system refuses flock (%s); the lock file names this process, "
                "but a writer on another host cannot be refused (docs/reliability.md)",
                self.run_dir,
                os.strerror(exc.errno or 0),
            )
        f.seek(0)
        f.truncate()
        f.write(
            json.dumps(
                {
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "started": time.time(),
                    "command": " ".join(sys.argv)[:200],
                }
            )
        )
        f.flush()
        _HELD[self.key] = [f, 1]
        self.held = True
        return self

    def release(self) -> None:
        """Drop this holder; the last one in the process unlocks and closes the file."""
        if not self.held:
            return
        self.held = False
        entry = _HELD.get(self.key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _HELD[self.key]
            f = entry[0]
            try:
                fcntl.flock(f, fcntl.LOCK_UN)
            except OSError:
                pass
            f.close()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
