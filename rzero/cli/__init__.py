"""`rzero <command>` / `python -m rzero <command>`; the Makefile calls these.

    commands.py   what each command does (`cmd_*`)
    launching.py  the training launch: accelerate launch, its log, one line on how it ended
    parser.py     the argument parser: descriptions, help and defaults of every flag
    systems.py    the one map from a recipe's task to the system that runs it

`main` parses, sets up logging once for every command (through tqdm, so a line never lands
on a progress bar), and turns a user error into one line and exit code 2.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
from typing import TypeVar

from rzero.cli.commands import cmd_serve_solver
from rzero.cli.parser import _add_serve_solver_args, build_parser
from rzero.config import ConfigError
from rzero.engine.models import ModelSpecError

E = TypeVar("E", bound=BaseException)

__all__ = ["_add_serve_solver_args", "build_parser", "cmd_serve_solver", "main", "setup_logging"]


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


class _Stderr(logging.StreamHandler):
    """A handler that writes to `sys.stderr` as it is when a line is logged (a redirect, a
    test's capture), not as it was when the handler was made."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging() -> logging.Handler:
    """One logging setup for every command: rzero's INFO lines (phase starts and ends,
    evaluation and audit progress) on stderr with the time; `main` routes them through tqdm
    so a line never lands on a progress bar, and removes the handler when the command ends
    (so `main` called from Python leaves logging as it found it). Returns the handler."""
    logger = logging.getLogger("rzero")
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def _error(line: str, prefix: str = "error") -> None:
    """`PREFIX: LINE` on stderr on a line of its own: a progress bar the error cut short is
    closed first (its last state kept), so the line does not land on its tail."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()
    print(f"{prefix}: {line}", file=sys.stderr)


def _raised_from(exc: BaseException, kind: type[E]) -> E | None:
    """`exc` itself, or the error it was raised from or during, when one is a `kind`."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, kind):
        seen = seen.__cause__ or seen.__context__
    return seen


def name_the_accelerator() -> None:
    """On a machine with no NVIDIA driver, tell DeepSpeed (which TRL and accelerate import)
    that its accelerator is the CPU: left to detect it, it logs a warning on every import
    ("Setting accelerator to CPU. If you have GPU ..."), once per process. A value the
    environment already sets is kept."""
    if "DS_ACCELERATOR" not in os.environ and not (
        shutil.which("nvidia-smi") or os.path.exists("/dev/nvidiactl")
    ):
        os.environ["DS_ACCELERATOR"] = "cpu"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    name_the_accelerator()
    args = parser.parse_args(argv)
    from tqdm.contrib.logging import logging_redirect_tqdm

    from rzero.engine.logs import quiet_libraries, unfilter_warnings

    if getattr(args, "verbose", False):
        unfilter_warnings()
    else:
        quiet_libraries()
    handler = setup_logging()
    # SIGTERM (kill, a scheduler's preemption) unwinds like Ctrl-C, so model servers and
    # the solver server a run started is stopped on the way out
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
    from rzero.engine import distributed
    from rzero.engine.serving import ServerError
    from rzero.io import DamagedFileError, DiskFull
    from rzero.rundir import RunDirConflict
    from rzero.training.steps import PREEMPTED_EXIT, Preempted

    try:
        with logging_redirect_tqdm(loggers=[logging.getLogger("rzero")]):
            return args.func(args)
    except (ConfigError, ModelSpecError, RunDirConflict, DamagedFileError) as exc:
        # a user error: one line naming the file or field and the fix, exit 2
        _error(str(exc))
        return 2
    except DiskFull as exc:
        # the machine's fault, not the user's input: one line, exit 1
        _error(str(exc))
        return 1
    except Preempted as exc:
        # a scheduler's SIGTERM in a training phase: the update in progress finished and
        # its step checkpoint was written; the same command resumes there
        if distributed.is_main():
            _error(str(exc), prefix="preempted")
        return PREEMPTED_EXIT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # a server this run started died (the out-of-memory killer's usual victim): what
        # died and its log, in one line; the log's tail is in the log itself. Its death is
        # raised wherever the phase was, so a library may have wrapped it on the way out.
        died = _raised_from(exc, ServerError)
        if died is None:
            raise
        _error(died.line)
        return 1
    finally:
        logger = logging.getLogger("rzero")
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
