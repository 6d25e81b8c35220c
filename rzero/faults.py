"""Crash points for the resume tests: `RZERO_KILL_AT=<point>` SIGKILLs the process there.

A point is `<phase>:mid` (after the phase has done part of its work) or `<phase>:commit`
(after its outputs are written, before its marker). Unset, this costs one dict lookup.
"""

from __future__ import annotations

import os
import signal


def crash_point(point: str) -> None:
    if os.environ.get("RZERO_KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
