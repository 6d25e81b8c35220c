"""The run folder (SPEC §5) and the one phase runner every loop uses.

    folder.py  RunDir: config.yaml and its fingerprint, iter_KK folders, markers written
               last, verify (sizes / SHA-256 against the markers); renders nothing
    phases.py  PhaseRunner: resume-or-run, timing, peak memory, generator lifetimes, the
               commit crash point and the loop's hooks around each commit; TrackerLog
    hub.py     HubPush: run.push_to_hub, each trained checkpoint a branch, the model card
"""

from rzero.rundir.folder import (
    PHASES,
    SOLVER_PHASES,
    SPAG_PHASES,
    SPIN_PHASES,
    RunDir,
    RunDirConflict,
    phases_for,
)
from rzero.rundir.phases import (
    TRAINING_PHASES,
    PhaseRunner,
    Timing,
    TrackerLog,
    peak_rss_gib,
    release_memory,
    reset_peak_rss,
)

__all__ = ["PHASES", "SOLVER_PHASES", "SPAG_PHASES", "SPIN_PHASES", "TRAINING_PHASES", "PhaseRunner", "RunDir",
           "RunDirConflict", "Timing", "TrackerLog", "peak_rss_gib", "phases_for",
           "release_memory", "reset_peak_rss"]
