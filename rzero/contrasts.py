"""Paired differences between the variants of a comparison, said in words (SPEC §2).

The variants of `rzero ablate` start from one base model with one seed and evaluate on the
same items with the same decoding, so two variants' scores after iteration k pair item by
item, as one run's iterations do (`rzero.selfplay.increments`). For every iteration k >= 1
this gives

    each variant after the first against the first (the reference; `rzero ablate` puts
    `separate`, R-Zero, first):  Δ = pass@1(variant, k) − pass@1(reference, k)
    each variant against the base:  Δ = pass@1(variant, k) − pass@1(variant, 0)

on the items both evaluations scored (matched by benchmark and id), with the paired bootstrap
95 % interval of `rzero.stats.paired_difference` (stratified by benchmark for the average)
and, where there is one benchmark of 0/1 scores, the items gained and lost and the exact
McNemar p-value. A difference is *outside the noise* when its whole interval lies on one
side of 0, and *within the noise* when the interval includes 0.

Several comparisons at 95 % each are several chances for one to fall outside by chance, so
the sentences end with how many there were. Iteration 0 is also checked: the variants' base
evaluations should agree item for item; where they do not (a change of `eval.*`, or
nondeterministic decoding), the sentences say on how many items.

Where the paper differs: its ablation tables (seed §4.3) give point estimates only.
"""

from __future__ import annotations

import json
from typing import Any

from rzero.rundir import RunDir
from rzero.selfplay.increments import align_eval_items
from rzero.stats import PairedDifference, paired_difference, stratified_paired_difference


def _eval(run: RunDir, k: int) -> dict[str, Any] | None:
    path = run.iter_dir(k) / "eval" / "eval.json"
    return json.loads(path.read_text()) if path.is_file() else None


def paired_eval(a: dict[str, Any], b: dict[str, Any], seed: int = 0) -> dict[str, Any] | None:
    """pass@1 of evaluation `b` minus that of `a` (two ``eval.json`` results) on the items
    both scored: ``{"average": ..., "benchmarks": {name: ...}}`` of
    `PairedDifference.to_dict()`, or None when they share no item."""
    aligned = align_eval_items([a, b])
    if not aligned:
        return None
    per = {name: paired_difference(rows[0], rows[1], seed=seed)
           for name, rows in aligned.items()}
    average = (next(iter(per.values())) if len(per) == 1 else
               stratified_paired_difference([(r[0], r[1]) for r in aligned.values()],
                                            seed=seed))
    return {"average": average.to_dict(),
            "benchmarks": {name: d.to_dict() for name, d in per.items()}}


def side(d: dict[str, Any]) -> str:
    """'above' / 'below' (the whole interval on one side of 0), 'none' (no item differs),
    or 'within' (the interval includes 0)."""
    if d["ci_low"] == d["ci_high"] == 0 and d["delta"] == 0:
        return "none"
    if d["ci_low"] > 0:
        return "above"
    if d["ci_high"] < 0:
        return "below"
    return "within"


def variant_contrasts(runs: list[tuple[str, RunDir]], iterations: int,
                      seed: int = 0) -> dict[str, Any]:
    """The differences described above for `runs` [(name, run dir)], the first the
    reference: ``{"reference", "base_mismatch": {name: items differing at k = 0},
    "rows": [{"iteration", "variant", "vs_reference", "vs_base"}], "sentences"}``; a
    difference whose evaluations are missing is None."""
    ref_name, ref = runs[0]
    bases = {name: _eval(run, 0) for name, run in runs}
    mismatch = {}
    for name, _ in runs[1:]:
        if bases[ref_name] is not None and bases[name] is not None:
            aligned = align_eval_items([bases[ref_name], bases[name]])
            mismatch[name] = sum(x != y for a, b in aligned.values()
                                 for x, y in zip(a, b, strict=True))
    rows = []
    for k in range(1, iterations + 1):
        ref_k = _eval(ref, k)
        for name, run in runs:
            ev = _eval(run, k)
            vs_ref = (paired_eval(ref_k, ev, seed) if name != ref_name and ev and ref_k
                      else None)
            vs_base = paired_eval(bases[name], ev, seed) if ev and bases[name] else None
            rows.append({"iteration": k, "variant": name, "vs_reference": vs_ref,
                         "vs_base": vs_base})
    out = {"reference": ref_name, "base_mismatch": mismatch, "rows": rows}
    out["sentences"] = sentences(out)
    return out


def difference_words(d: dict[str, Any]) -> str:
    """'−0.012 [−0.044, +0.019] over 320 items (12 gained, 16 lost; McNemar p = 0.57)'."""
    text = PairedDifference(**d).words()
    text += f" over {d['n']} items"
    if d.get("n01") is not None:
        text += f" ({d['n01']} gained, {d['n10']} lost; McNemar p = {d['mcnemar_p']:.2g})"
    return text


VERDICT = {"above": "outside the noise, above: the whole paired 95 % interval is above 0",
           "below": "outside the noise, below: the whole paired 95 % interval is below 0",
           "within": "within the noise: the paired 95 % interval includes 0",
           "none": "no item's score differs"}


def sentences(contrasts: dict[str, Any]) -> list[str]:
    """One sentence per difference, outside-the-noise ones first, then how many there were."""
    ref = contrasts["reference"]
    said: list[tuple[int, str]] = []
    for row in contrasts["rows"]:
        k, name = row["iteration"], row["variant"]
        for what, d in ((f"{name} minus {ref}", row["vs_reference"]),
                        (f"{name} minus the base model", row["vs_base"])):
            if d is None:
                continue
            avg = d["average"]
            where = side(avg)
            said.append((0 if where in ("above", "below") else 1,
                         f"iteration {k}, {what}: pass@1 {difference_words(avg)}: "
                         f"{VERDICT[where]}."))
    out = [text for _, text in sorted(said, key=lambda t: t[0])]
    outside = sum(1 for rank, _ in said if rank == 0)
    if said:
        out.append(f"{len(said)} differences at 95 % each, {outside} outside the noise; with "
                   f"no real difference anywhere about {len(said) / 20:.1f} would fall outside "
                   "by chance.")
    for name, n in contrasts["base_mismatch"].items():
        if n:
            out.append(f"The base evaluations of {ref} and {name} differ on {n} items, so "
                       "their runs did not start from the same scores (different eval "
                       "settings, or nondeterministic decoding).")
    return out


CONTRAST_HEADER = ["iter", "variant", "vs reference: Δ pass@1 [paired 95 %]",
                   "McNemar p", "vs the base model: Δ pass@1 [paired 95 %]", "McNemar p"]


def contrast_table(contrasts: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the average's differences; "–" where one is missing."""
    def cells(d: dict[str, Any] | None) -> list[str]:
        if d is None:
            return ["–", "–"]
        avg = d["average"]
        p = avg.get("mcnemar_p")
        return [PairedDifference(**avg).words(), "–" if p is None else f"{p:.2g}"]

    header = list(CONTRAST_HEADER)
    header[2] = f"vs {contrasts['reference']}: Δ pass@1 [paired 95 %]"
    rows = [[str(r["iteration"]), r["variant"],
             *(cells(r["vs_reference"]) if r["variant"] != contrasts["reference"]
               else ["(the reference)", ""]),
             *cells(r["vs_base"])] for r in contrasts["rows"]]
    return header, rows
