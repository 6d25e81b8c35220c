"""A full disk loses nothing (rzero.io.disk_full, the phase runner): a write that fails for
want of space stops the run with one line naming the device and the path, the phase stays
uncommitted, what was committed before is kept, and a rerun with space resumes."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys

import pytest
from conftest import tiny_overrides

from rzero.io import disk_full, space_error


def test_a_failed_write_for_want_of_space_is_recognised_through_wrapping_libraries():
    assert space_error(OSError(errno.ENOSPC, "No space left on device")) == "no space left on"
    assert space_error(OSError(errno.EDQUOT, "Disk quota exceeded")).startswith("the disk quota")
    # safetensors (Rust) and torch wrap the OS error in their own exception's text
    wrapped = RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")
    assert space_error(wrapped) == "no space left on"
    try:
        try:
            raise OSError(errno.EFBIG, "File too large")
        except OSError as inner:
            raise ValueError("save failed") from inner
    except ValueError as outer:
        assert space_error(outer).startswith("the file size limit")
    assert space_error(ValueError("bad value")) is None
    full = disk_full(OSError(errno.ENOSPC, "No space left on device"), "/tmp/run/iter_01/solver")
    assert str(full).startswith(
        "no space left on /"
    ) and "while writing /tmp/run/iter_01/solver" in str(full)


def _file_size_limit(limit: int):
    def apply() -> None:
        # past the limit a write fails with EFBIG, as a full disk fails with ENOSPC
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_stops_the_run_in_one_line_and_a_rerun_resumes(
    format_checkpoint, tmp_path
):
    run_dir = tmp_path / "run"
    args = [sys.executable, "-m", "rzero", "iterate", "--run-dir", str(run_dir)]
    for o in tiny_overrides(format_checkpoint, **{"run.report_to": "none"}):
        args += ["--set", o]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    # 1 MiB: the evaluation and the reports fit, the challenger's checkpoint does not
    full = subprocess.run(
        args,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=_file_size_limit(1 << 20),
    )
    assert full.returncode == 1, full.stderr[-2000:]
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the file size limit (RLIMIT_FSIZE) is reached on /"), last
    assert f"while writing {run_dir}/iter_01/" in last and "rerun the same command" in last
    eval0 = json.loads((run_dir / "iter_00" / "phases" / "eval.json").read_text())
    assert not (run_dir / "iter_01" / "phases" / "challenger.json").exists()
    # with space again the same command resumes: iteration 0 is not redone
    again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((run_dir / "iter_00" / "phases" / "eval.json").read_text()) == eval0
    assert (run_dir / "iter_01" / "phases" / "eval.json").is_file()
