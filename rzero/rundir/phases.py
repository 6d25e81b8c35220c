"""The one phase runner every system's run uses (`rzero.rundir.run.Run`), and where a
phase's time and memory are measured.

`PhaseRunner.run(k, phase, fn, *args)` skips a phase whose marker is committed; otherwise
it runs `fn(k, *args)` (the phase's marker-to-be), closes the generators the phase opened,
returns its memory, and commits: crash point ``PHASE:commit``, the loop's `before_commit`
hooks (the self-play watch adds its numbers and warnings), the marker (`RunDir.commit`,
the commit point), then the `after_commit` hooks (trackers, the report rebuild). Every
marker, fresh or found, then goes through the `on_marker` hooks (the stop rules raise
there). The layout's training phases run on every training process; the main one
commits.

RunDir renders nothing and knows no loop: what happens around a commit is the loop's
choice, handed to the runner as hooks.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rzero.config import RZeroConfig
from rzero.engine import distributed, trackers
from rzero.engine.models import compute_dtypes
from rzero.faults import crash_point
from rzero.generation.backends import make_generator
from rzero.io import disk_full, exception_chain
from rzero.rundir.folder import RunDir

Hook = Callable[[int, str, dict[str, Any]], Any]
log = logging.getLogger(__name__)


class PhaseRunner:
    """Resume-or-run, timing, peak memory, generator lifetimes and commit hooks of one run."""

    def __init__(
        self,
        cfg: RZeroConfig,
        rundir: RunDir,
        *,
        before_commit: Sequence[Hook] = (),
        after_commit: Sequence[Hook] = (),
        on_marker: Sequence[Callable[[dict[str, Any]], None]] = (),
    ):
        self.cfg = cfg
        self.rundir = rundir
        self.before_commit = list(before_commit)  # (k, phase, info) -> info
        self.after_commit = list(after_commit)  # (k, phase, marker) -> None
        self.on_marker = list(on_marker)  # (marker) -> None, committed now or before
        self.timing = Timing()
        self._generators: list = []  # the current phase's, closed when it ends

    def generator(self, checkpoint: str):
        """A generator (`generation.backend`) of `checkpoint`, closed when the phase ends."""

        return self.track(make_generator(self.cfg, checkpoint))

    def track(self, gen):
        """Close `gen` (and count its generation time) when the current phase ends."""
        self._generators.append(gen)
        return gen

    def run(
        self, k: int, phase: str, fn: Callable[..., dict[str, Any]], *args: Any
    ) -> dict[str, Any]:
        """Skip a committed phase; else run it, measure it and commit its marker. Returns
        the marker with its checkpoint resolved against the run directory."""
        done = distributed.on_main(self.rundir.marker, k, phase)
        where = f"iteration {k}/{self.cfg.run.iterations} · {phase}"
        if done is not None and distributed.is_main():
            log.info("%s: committed before, skipped", where)
        if done is None:
            if distributed.is_main():
                log.info("%s", where)
            try:
                if phase in self.rundir.layout.training:
                    # every training process trains; the main one commits, the others get it
                    done = distributed.on_main(
                        self._commit, k, phase, *self._work(k, phase, fn, args)
                    )
                else:
                    done = distributed.on_main(
                        lambda: self._commit(k, phase, *self._work(k, phase, fn, args))
                    )
            except Exception as exc:
                # a write that failed for want of space: one line naming the device and the
                # path; the marker was not written, so the phase is redone on resume
                outputs = self.rundir.layout.outputs.get(phase) or (phase,)
                full = disk_full(exc, _filename(exc) or self.rundir.iter_dir(k) / outputs[0])
                if full is None:
                    raise
                raise full from exc
        for hook in self.on_marker:
            hook(done)
        if "checkpoint" in done:
            done = {**done, "checkpoint": self.rundir.resolve(done["checkpoint"])}
        return done

    def _work(
        self, k: int, phase: str, fn: Callable[..., dict[str, Any]], args: tuple
    ) -> tuple[dict[str, Any], float]:
        reset_peak_rss()
        trackers.enter_phase(self.rundir.path, k, phase, self.cfg.run.report_to)
        self._generators = []
        t0 = time.perf_counter()
        try:
            info = {**fn(k, *args), "compute": compute_dtypes(self.cfg)}
        finally:
            for g in self._generators:  # an engine's processes end with its phase
                g.close()
        if self._generators:
            info["engines"] = sorted({g.engine for g in self._generators})
        if phase in self.rundir.layout.training:
            info["launch"] = distributed.launch_info()
        self.timing.generation += sum(g.stats.seconds for g in self._generators)
        self._generators = []
        release_memory()  # the phase's models and buffers, before the next phase's
        peak = peak_rss_gib()
        if peak is not None:
            info["peak_rss_gib"] = round(peak, 3)
        return info, time.perf_counter() - t0

    def _commit(self, k: int, phase: str, info: dict[str, Any], seconds: float) -> dict[str, Any]:
        crash_point(f"{phase}:commit")
        for hook in self.before_commit:
            info = hook(k, phase, info)
        self.timing.record(f"{k}/{phase}", seconds, info.get("peak_rss_gib"))
        marker = self.rundir.commit(self.cfg, k, phase, info, seconds)
        log.info("iteration %d/%d · %s: done in %.0f s", k, self.cfg.run.iterations, phase, seconds)
        for hook in self.after_commit:
            hook(k, phase, marker)
        return marker


class TrackerLog:
    """An `after_commit` hook: the phase's scalar metrics, by iteration, and its challenger
    steps, by global step, to the run's trackers (`run.report_to`); its warnings as text,
    and their count as ``watch/warnings``."""

    def __init__(self, cfg: RZeroConfig, run_dir: Path):
        self.cfg = cfg
        self.trackers = trackers.Trackers(cfg.run.report_to, run_dir)

    def __call__(self, k: int, phase: str, info: dict[str, Any]) -> None:
        t = self.trackers
        t.scalars(
            {f"{phase}/{key}": v for key, v in info.get("metrics", {}).items()}
            | {"watch/warnings": len(info.get("warnings", []))},
            k,
            "iteration",
        )
        for row in info.get("steps", []):
            gstep = (k - 1) * self.cfg.challenger.steps + int(row["step"])
            t.scalars(
                {f"challenger_step/{key}": v for key, v in row.items() if key != "step"},
                gstep,
                "global_step",
            )
        lines = list(info.get("warnings", [])) + ([info["warning"]] if info.get("warning") else [])
        t.text(f"warnings/{phase}", lines, k)
        t.flush()

    def close(self) -> None:
        self.trackers.close()


# ---------------------------------------------------------------- time and memory


@dataclass
class Timing:
    """Where the wall time went, for the overhead ratio of bench/iteration.py."""

    generation: float = 0.0  # inside model.generate (rollouts, votes, pool, eval)
    optimizer: float = 0.0  # GRPO steps minus their reward calls
    phases: dict[str, float] = field(default_factory=dict)
    peak_rss_gib: dict[str, float] = field(default_factory=dict)  # per phase, this process

    def record(self, key: str, seconds: float, peak_rss_gib: float | None) -> None:
        """One committed phase (`key` is ``k/phase``): its time and peak memory."""
        self.phases[key] = seconds
        if peak_rss_gib is not None:
            self.peak_rss_gib[key] = peak_rss_gib


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc keeps them otherwise,
    so the next phase's models would stack on the last phase's high-water mark)."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc


def reset_peak_rss() -> None:
    """Start a new peak-memory window (Linux: writing 5 to clear_refs resets VmHWM)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # not Linux, or not permitted: the peak is then the process's peak so far


def peak_rss_gib() -> float | None:
    """Peak resident memory of this process since the last `reset_peak_rss`, in GiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB -> GiB
    except OSError:
        pass
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def _filename(exc: BaseException) -> str | None:
    """The file an OSError in `exc`'s chain names, if any."""
    for link in exception_chain(exc):
        if isinstance(link, OSError) and link.filename:
            return str(link.filename)
    return None
