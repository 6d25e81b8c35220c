"""Fit the `cpu-2` throughputs of `rzero plan --hardware` to a finished run of the math loop.

    .venv/bin/python scripts/calibrate_plan.py runs/tiny

Each committed phase's wall time t is modelled as G/g + F/f + c, G the tokens it generates
(at their maximum length), F the FLOPs it trains (`rzero.math.estimate.phase_costs`), and the
three unknowns (g tokens/s, f FLOP/s, c seconds per phase) are fitted by least squares on
relative error (each phase weighted by 1/t, so a short phase counts as much as a long one).
Prints the fitted values, to be written into `rzero.engine.hardware.CPU_2` with the run's
machine, and each phase's measured and fitted time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rzero.config import load_config
from rzero.engine.hardware import CPU_2, Hardware, params_billions
from rzero.math.estimate import phase_costs


def main(run_dir: str) -> None:
    run = Path(run_dir)
    cfg = load_config(run / "config.yaml", run_folder=True)
    params_b = params_billions(cfg.model.name)
    costs = {p.phase: p for p in phase_costs(cfg, Hardware(CPU_2, 1), 1.0)}
    rows, times, names = [], [], []
    for marker in sorted(run.glob("iter_*/phases/*.json")):
        import json

        m = json.loads(marker.read_text())
        cost = costs.get(m["phase"])
        if cost is None or m.get("skipped"):
            continue
        flops = cost.trained * cost.flops_per_token_n * params_b * 1e9
        rows.append([cost.generated_tokens, flops, 1.0])
        times.append(m["seconds"])
        names.append(f"{marker.parent.parent.name}/{m['phase']}")
    a, t = np.array(rows), np.array(times)
    w = 1.0 / t
    coef, *_ = np.linalg.lstsq(a * w[:, None], t * w, rcond=None)
    inv_g, inv_f, c = coef
    if inv_g <= 0 or inv_f <= 0 or c < 0:
        sys.exit(f"the fit is not physical (1/g {inv_g:.3g}, 1/f {inv_f:.3g}, c {c:.3g})")
    fitted = a @ coef
    print(
        f"generation: {1 / inv_g:,.1f} tokens/s for this {params_b:g}B model, "
        f"{params_b / inv_g:,.2f} for a 1B one"
    )
    print(f"training: {1 / inv_f / 1e12:,.4f} TFLOP/s")
    print(f"fixed cost per phase: {c:.1f} s")
    print("\n| phase | measured | fitted |\n|---|---|---|")
    for name, measured, fit in zip(names, t, fitted, strict=True):
        print(f"| {name} | {measured:.0f} s | {fit:.0f} s |")
    print(f"| total | {t.sum():.0f} s | {fitted.sum():.0f} s |")


if __name__ == "__main__":
    main(sys.argv[1])
