"""The run folder (SPEC §5): its layout, phase markers, resume checks.

    folder.py  RunDir: config.yaml and its fingerprint, iter_KK folders, markers written
               last, verify (sizes / SHA-256 against the markers)
"""

from rzero.rundir.folder import (
    PHASES,
    RunDir,
    RunDirConflict,
    Timing,
    peak_rss_gib,
    release_memory,
    reset_peak_rss,
)

__all__ = ["PHASES", "RunDir", "RunDirConflict", "Timing", "peak_rss_gib", "release_memory",
           "reset_peak_rss"]
