"""The run engine every system runs on (SPEC §5): the run folder, the phase runner and the
base of a system's run. It names no system: each declares its own `Layout`.

    folder.py  RunDir: config.yaml and its fingerprint, iter_KK folders, markers written
               last, verify (sizes / SHA-256 against the markers); Layout, what a system's
               folder holds; renders nothing
    phases.py  PhaseRunner: resume-or-run, timing, peak memory, generator lifetimes, the
               commit crash point and the system's hooks around each commit; TrackerLog
    hub.py     HubPush: run.push_to_hub, each trained checkpoint a branch, the model card
    export.py  export_run: the run's JSONL tables as a `datasets` dataset (Parquet) and card
    lock.py    RunLock: one writer per run folder (flock, and the holder named)
    record.py  keep_record: a finished run without its weights (`rzero ablate --records`),
               read by the reports and `rzero compare` like the run itself
    run.py     Run: the set-up, phase runner, trackers, hub push, report rebuild and stop
               every system's run shares; StopRun and the stop rule
"""

from rzero.rundir.folder import Layout, RunDir, RunDirConflict
from rzero.rundir.lock import RunLock, RunLocked
from rzero.rundir.phases import (
    PhaseRunner,
    Timing,
    TrackerLog,
    peak_rss_gib,
    release_memory,
    reset_peak_rss,
)
from rzero.rundir.run import Run, StopRun, check_stop, stop_of

__all__ = [
    "Layout",
    "PhaseRunner",
    "Run",
    "RunDir",
    "RunDirConflict",
    "RunLock",
    "RunLocked",
    "StopRun",
    "Timing",
    "TrackerLog",
    "check_stop",
    "peak_rss_gib",
    "release_memory",
    "reset_peak_rss",
    "stop_of",
]
