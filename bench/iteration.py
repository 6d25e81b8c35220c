"""One tiny R-Zero iteration on the embedded model: wall time per phase and the overhead.

overhead = total wall time / (time inside model generation + time inside optimiser steps)

"Generation" is every `generate` call (rollouts of the frozen solver, pool, votes,
evaluation) as timed by the backends; "optimiser steps" is TRL's GRPO step time minus the
reward calls inside it (the step's own rollouts and forward/backward passes). Everything
else — model loading and saving, answer extraction, voting, BLEU clustering, file writes —
is overhead. Target: <= 1.10.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from rzero.config import load_config
from rzero.math.run import MathRun


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    overrides = ["run.iterations=1", "eval.enabled=false", *args.overrides]
    cfg = load_config(args.config, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = MathRun(cfg, f"{tmp}/run")
        run.run()
        total = time.perf_counter() - t0
    timing = run.timing
    print("phase times (s) and peak resident memory (GiB):")
    for name, seconds in timing.phases.items():
        peak = timing.peak_rss_gib.get(name)
        print(f"  {name:<16} {seconds:8.1f}   {peak if peak is not None else float('nan'):5.2f}")
    model_time = timing.generation + timing.optimizer
    print(f"total wall time:        {total:8.1f} s")
    print(f"inside generation:      {timing.generation:8.1f} s")
    print(f"inside optimiser steps: {timing.optimizer:8.1f} s")
    print(
        f"overhead ratio total / (generation + optimiser): {total / model_time:.3f} "
        f"(target <= 1.10)"
    )


if __name__ == "__main__":
    main()
