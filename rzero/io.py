"""Atomic file writes and JSONL reading: every file a run writes goes through here."""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # mkstemp makes 0600 files; run files should read like any other


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_jsonl_atomic(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def append_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append `rows` to a JSONL log in one write (creating its folder): a step log grows
    during its phase, and a kill mid-write leaves at most a torn last line, which
    `read_jsonl(..., torn_tail_ok=True)` drops."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


class DamagedFileError(ValueError):
    """A file the run wrote that cannot be read back; the message names file and line."""


def read_jsonl(path: str | Path, *, torn_tail_ok: bool = False) -> list[dict[str, Any]]:
    """Rows of a JSONL file (none if it does not exist).

    Files written atomically are whole or absent, so a line that does not parse means the
    file was damaged: DamagedFileError names the file and the line, never a shorter list.
    With `torn_tail_ok` (files appended to while a phase runs, e.g. the challenger's step
    log) an unparsable *last* line is dropped, as left by a process killed mid-append.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if torn_tail_ok and number == len(lines):
                break
            raise DamagedFileError(
                f"{path}: line {number} is not valid JSON ({exc.msg}); the file is damaged"
            ) from None
        if not isinstance(row, dict):
            raise DamagedFileError(f"{path}: line {number} is not a JSON object")
        rows.append(row)
    return rows


class DiskFull(OSError):
    """A write failed for want of space (ENOSPC, a quota, the file size limit); what was
    committed before stays, and a rerun after freeing space resumes."""


# errno -> what ran out; and the same as the words libraries wrap an OS error in (Rust's
# safetensors writer, torch's stream writer)
_SPACE = {
    errno.ENOSPC: "no space left on",
    errno.EDQUOT: "the disk quota is exceeded on",
    errno.EFBIG: "the file size limit (RLIMIT_FSIZE) is reached on",
}
_SPACE_WORDS = re.compile(
    r"No space left|StorageFull|os error 28|Disk quota|os error 122|"
    r"File too large|FileTooLarge|os error 27"
)


def exception_chain(exc: BaseException | None):
    """`exc` and the exceptions it was raised from (`__cause__`, else `__context__`)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def space_error(exc: BaseException) -> str | None:
    """What ran out, when `exc` (or an exception it was raised from) is a failed write for
    want of space; None otherwise."""
    for link in exception_chain(exc):
        if isinstance(link, OSError) and link.errno in _SPACE:
            return _SPACE[link.errno]
        text = str(link)
        if (m := _SPACE_WORDS.search(text)) is not None:
            word = m.group(0)
            if word in ("File too large", "FileTooLarge", "os error 27"):
                return _SPACE[errno.EFBIG]
            if word in ("Disk quota", "os error 122"):
                return _SPACE[errno.EDQUOT]
            return _SPACE[errno.ENOSPC]
    return None


def mount_point(path: str | Path) -> str:
    """The mount point of the file system `path` is on (its first existing parent's)."""
    p = Path(path).resolve()
    while not p.exists():
        p = p.parent
    while not os.path.ismount(p):
        p = p.parent
    return str(p)


def disk_full(exc: BaseException, path: str | Path) -> DiskFull | None:
    """A `DiskFull` naming the device and the path being written, when `exc` is a write
    that failed for want of space; None otherwise."""
    what = space_error(exc)
    if what is None:
        return None
    return DiskFull(
        f"{what} {mount_point(path)} while writing {path}; what was committed "
        "before is kept: free space and rerun the same command to resume"
    )
