"""The training launch of `rzero iterate` on several processes: run `accelerate launch`,
copy what it prints to the terminal and `RUN_DIR/logs/launch.log`, and say in one line how it
ended (a process that died, or a preemption that saved a step checkpoint)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rzero.engine.launch import SHUTDOWN_SECONDS
from rzero.training.steps import PREEMPTED_EXIT


def launch_and_wait(argv: list[str], env: dict[str, str], log_path: Path | None = None) -> int:
    """Run the training launcher and return its exit code. It dies with this process, even
    by SIGKILL (and its ranks with it: `distributed.init`), so no rank outlives the
    command; Ctrl-C and SIGTERM reach it too and it stops its ranks itself. With `log_path`
    everything the ranks and the launcher print is also appended there, and a launch that
    fails ends with one line naming the process that died first (`launch_failure`)."""
    import contextlib
    import threading

    from rzero.engine.serving import die_with_parent

    lock = threading.Lock()  # the pumps' writes, and the log's close after them

    def close(log) -> None:
        with lock:
            log.close()

    with contextlib.ExitStack() as stack:
        log = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "ab")  # noqa: SIM115 - closed by the stack, after the pumps
            stack.callback(close, log)
            log.write(f"$ {' '.join(argv)}\n".encode())
        pipe = subprocess.PIPE if log is not None else None
        proc = subprocess.Popen(argv, env=env, preexec_fn=die_with_parent, stdout=pipe, stderr=pipe)
        pumps, tail = [], bytearray()  # the launch's last output, for `launch_failure`
        if log is not None:
            for source, sink in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
                pump = threading.Thread(
                    target=_pump, args=(source, sink, log, tail, lock), daemon=True
                )
                pump.start()
                pumps.append(pump)
        interrupted = False
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            interrupted = True  # the user's own stop, not a process dying
            proc.terminate()
            try:
                # the ranks finish their update and save first (torch elastic waits for them
                # TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds: `cmd_iterate` sets it)
                code = proc.wait(timeout=SHUTDOWN_SECONDS + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise KeyboardInterrupt from None
        finally:
            for pump in pumps:
                # the launcher has exited: its pipes end once its ranks have (they die with it)
                pump.join(timeout=30)
    if interrupted:
        # SIGTERM reached the ranks through the launcher: in a training phase they finish
        # the update, write a step checkpoint and say so (`rzero.training.steps`)
        line = preempted_line(tail.decode(errors="replace"))
        if line is not None:
            print(f"preempted: {line}", file=sys.stderr)
            return PREEMPTED_EXIT
    elif code != 0 and log_path is not None:
        print(
            f"error: {launch_failure(tail.decode(errors='replace'), code, log_path)}",
            file=sys.stderr,
        )
    return code


def preempted_line(text: str) -> str | None:
    """The line in which the main training process said it stopped after saving a step
    checkpoint (`Preempted`), from a launch's last output; None when it did not."""
    for line in reversed(text.splitlines()):
        head, sep, rest = line.partition("preempted: ")
        if sep and rest.startswith("stopped by SIGTERM"):
            return rest.strip()
    return None


TAIL_BYTES = 65536


def _pump(source, sink, log, tail: bytearray, lock) -> None:
    """Copy a launcher pipe to this process's stream and the launch log as it comes (bytes,
    so a progress bar's carriage returns pass through), keeping the last TAIL_BYTES."""
    out = sink.buffer if hasattr(sink, "buffer") else None
    for chunk in iter(lambda: source.read1(65536), b""):
        with lock:
            tail.extend(chunk)
            del tail[:-TAIL_BYTES]
            if not log.closed:  # a straggler after the launch ended only reaches the screen
                log.write(chunk)
                log.flush()
        if out is not None:
            out.write(chunk)
            out.flush()
        else:
            sink.write(chunk.decode(errors="replace"))
            sink.flush()


def launch_failure(text: str, code: int, log_path: Path) -> str:
    """One line for a launch that exited with `code` after printing `text` (its last
    output): the first process that died, as the launcher reported it (torch elastic's
    "Root Cause" block: rank, pid, exit code or signal), and the launch's log."""
    import re

    before, _, block = text.rpartition("Root Cause (first observed failure):")
    # a rank that saw the cause said so in rzero's own one line (a server or engine that died
    # under it): that is the line, whichever rank the launcher saw fail first
    said = [m.strip() for m in re.findall(r"(?:^|[\r\n])[ \t]*error: ([^\r\n]+)", before)]
    if said:
        return f"{said[-1]}; the launch's log: {log_path}"
    rank = re.search(r"rank\s*:\s*(\d+)", block)
    pid = re.search(r"exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)", block)
    why = re.search(r"traceback\s*:\s*(.+)", block)
    if not (rank and pid):
        return f"the training launch exited with code {code}; its log: {log_path}"
    cause = why.group(1).strip() if why else f"exit code {pid.group(1)}"
    cause = re.sub(r"\s*received by PID \d+$", "", cause)
    if cause.startswith("To enable traceback"):  # a Python error: the rank printed it
        cause = f"exit code {pid.group(1)}"
    return (
        f"training process rank {rank.group(1)} (pid {pid.group(2)}) died: {cause}; "
        f"the launch's log: {log_path}"
    )
