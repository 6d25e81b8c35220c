"""Paired differences between the variants of a comparison, said in words (SPEC §2).

The variants of `rzero ablate` start from one base model with one seed and evaluate on the
same items with the same decoding, so two variants' scores after iteration k pair item by
item, as one run's iterations do (`rzero.selfplay.increments`). For every iteration k >= 1
this gives

    each variant after the first against the first (the reference; `rzero ablate` puts
    `separate`, R-Zero, first):  Δ = pass@1(variant, k) − pass@1(reference, k); where the
    grid holds the reference's variant at several seeds (`anchors-0`, `anchors-1`, ...: the
    name's stem and `run.seed`), each variant is paired with the one at its own seed
    (`references`), so rfew-1 is read against anchors-1, not anchors-0
    each variant against its iteration 0 (the base model, or the start θ_0 each run trained
    for itself, as SPIN's SFT plateau; `start_of`):  Δ = pass@1(variant, k) −
    pass@1(variant, 0)

on the items both evaluations scored (matched by benchmark and id). Over several benchmarks
pass@1 is their unweighted mean, Δ its change, and the interval a paired bootstrap stratified
by benchmark (`rzero.stats.stratified_paired_difference`); with one benchmark of 0/1 scores,
`rzero.stats.paired_difference` adds the items gained (n01) and lost (n10) and the exact
McNemar p-value. Per-benchmark differences are kept in comparison.json.

Verdict: *outside the evaluation noise* when the whole 95 % bootstrap interval lies on one
side of 0 and, where McNemar applies, p < 0.05 too; *borderline* when only the bootstrap
says so (with few differing items its percentile interval is too narrow); *within the
evaluation noise* otherwise. The noise meant is that of the evaluation items: each variant
is one training run, so the interval holds the trained models fixed, and how much a variant
moves with its seed needs replicate runs (`run.seed`). Several differences at 95 % each are
several chances for one to fall outside by chance, so the sentences end with how many there
were. Iteration 0 is checked too: the variants' base evaluations should agree item for item;
where they do not (a change of `eval.*`, nondeterministic decoding, or another CPU's bf16
arithmetic), the sentences say so.

Where the paper differs: its ablation tables (seed §4.3) give point estimates only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rzero.rundir import RunDir
from rzero.rundir.folder import RUN_PREFIX
from rzero.selfplay.increments import align_eval_items, paired_scores
from rzero.stats import PairedDifference

ALPHA = 0.05


def _eval(run: RunDir, k: int) -> dict[str, Any] | None:
    """Iteration k's eval.json, when its eval phase is committed (the marker vouches)."""
    path = run.iter_dir(k) / "eval" / "eval.json"
    if run.marker(k, "eval") is None or not path.is_file():
        return None
    return json.loads(path.read_text())


def paired_eval(a: dict[str, Any], b: dict[str, Any], seed: int = 0) -> dict[str, Any] | None:
    """pass@1 of evaluation `b` minus that of `a` (two ``eval.json`` results) on the items
    both scored: ``{"average": ..., "benchmarks": {name: ...}}`` of
    `PairedDifference.to_dict()`, or None when they share no item."""
    aligned = align_eval_items([a, b])
    if not aligned:
        return None
    per = paired_scores({name: (rows[0], rows[1]) for name, rows in aligned.items()}, seed=seed)
    average = per.pop("average")
    return {
        "average": average.to_dict(),
        "benchmarks": {name: d.to_dict() for name, d in per.items()},
    }


def side(d: dict[str, Any]) -> str:
    """'above' / 'below' (the whole bootstrap interval on one side of 0 and, where there is
    one, McNemar p < 0.05), 'borderline' (the interval alone), 'none' (no item differs), or
    'within' (the interval includes 0)."""
    if d["ci_low"] == d["ci_high"] == 0 and d["delta"] == 0:
        return "none"
    if d["ci_low"] <= 0 <= d["ci_high"]:
        return "within"
    if d.get("mcnemar_p") is not None and d["mcnemar_p"] >= ALPHA:
        return "borderline"
    return "above" if d["ci_low"] > 0 else "below"


def _base_check(ref: dict[str, Any] | None, other: dict[str, Any] | None) -> dict[str, Any]:
    """How two variants' base evaluations differ: items scored differently, items only one
    of them has, or that one is missing."""
    if ref is None or other is None:
        return {"missing": True}
    keys = [{(r["benchmark"], r["id"]) for r in ev["items"]} for ev in (ref, other)]
    aligned = align_eval_items([ref, other])
    return {
        "missing": False,
        "unshared": len(keys[0] ^ keys[1]),
        "differing": sum(x != y for a, b in aligned.values() for x, y in zip(a, b, strict=True)),
    }


def start_of(runs: list[tuple[str, RunDir]]) -> str:
    """What iteration 0 evaluated, in words: the base model, or where every run evaluated a
    checkpoint it trained itself at one place in its folder (SPIN's SFT plateau), θ_0 there."""
    stored = {str((run.marker(0, "eval") or {}).get("checkpoint", "")) for _, run in runs}
    if len(stored) == 1 and (where := stored.pop()).startswith(RUN_PREFIX):
        return f"θ_0 ({where[len(RUN_PREFIX) :]} of each run)"
    return "the base model"


def _stem(name: str) -> str:
    """A variant's name without its seed: `anchors-1` -> `anchors`."""
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


def references(names: Sequence[str], seeds: Sequence[int] | None = None) -> dict[str, str]:
    """Each variant's reference: the first variant, or where other variants share its
    name's stem (its replicates at other seeds: `anchors-0`, `anchors-1`), the replicate
    whose `run.seed` is the variant's own. A replicate is its own reference."""
    first = names[0]
    if seeds is None:
        return dict.fromkeys(names, first)
    at_seed: dict[int, str] = {}
    for name, s in zip(names, seeds, strict=True):
        if _stem(name) == _stem(first):
            at_seed.setdefault(s, name)
    return {name: at_seed.get(s, first) for name, s in zip(names, seeds, strict=True)}


def variant_contrasts(
    runs: list[tuple[str, RunDir]],
    iterations: int,
    seed: int = 0,
    seeds: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The differences described above for `runs` [(name, run dir)], the first the
    reference (each run's own, at its seed `seeds`, per `references`): ``{"reference",
    "references": {name: its reference}, "base_check": {name: _base_check}, "rows":
    [{"iteration", "variant", "reference", "vs_reference", "vs_base"}], "sentences"}``; a
    difference whose evaluations are missing is None."""
    ref_name = runs[0][0]
    refs = references([name for name, _ in runs], seeds)
    bases = {name: _eval(run, 0) for name, run in runs}
    checks = {name: _base_check(bases[ref_name], bases[name]) for name, _ in runs[1:]}
    rows = []
    for k in range(1, iterations + 1):
        evals = {name: _eval(run, k) for name, run in runs}
        for name, _ in runs:
            ev, ref_k = evals[name], evals[refs[name]]
            vs_ref = paired_eval(ref_k, ev, seed) if refs[name] != name and ev and ref_k else None
            vs_base = paired_eval(bases[name], ev, seed) if ev and bases[name] else None
            rows.append(
                {
                    "iteration": k,
                    "variant": name,
                    "reference": refs[name],
                    "vs_reference": vs_ref,
                    "vs_base": vs_base,
                }
            )
    out = {
        "reference": ref_name,
        "references": refs,
        "start": start_of(runs),
        "base_check": checks,
        "rows": rows,
    }
    out["sentences"] = sentences(out)
    return out


def _row_reference(contrasts: dict[str, Any], row: dict[str, Any]) -> str:
    """The reference a row's variant was paired with (older comparison.json: the first)."""
    return row.get("reference", contrasts["reference"])


def _is_reference(contrasts: dict[str, Any], name: str) -> bool:
    return name in set(contrasts.get("references", {}).values()) | {contrasts["reference"]}


def difference_words(d: dict[str, Any]) -> str:
    """'−0.012 [−0.044, +0.019] over 320 items (12 gained, 16 lost; McNemar p = 0.57)'."""
    text = PairedDifference(**d).words()
    text += f" over {d['n']} items"
    if d.get("n01") is not None:
        text += f" ({d['n01']} gained, {d['n10']} lost; McNemar p = {d['mcnemar_p']:.2g})"
    return text


VERDICT = {
    "above": "outside the evaluation noise, above: the whole paired 95 % interval is above 0",
    "below": "outside the evaluation noise, below: the whole paired 95 % interval is below 0",
    "borderline": "borderline: the bootstrap interval excludes 0 but McNemar's exact "
    "test does not reject at 5 %, so too few items differ to tell",
    "within": "within the evaluation noise: the paired 95 % interval includes 0",
    "none": "no item's score differs",
}
RANK = {"above": 0, "below": 0, "borderline": 1, "within": 2, "none": 2}


def sentences(contrasts: dict[str, Any]) -> list[str]:
    """One sentence per difference, outside-the-noise ones first, then how many there were,
    what the intervals do not cover, and any disagreement of the base evaluations."""
    ref = contrasts["reference"]
    said: list[tuple[str, str]] = []
    for row in contrasts["rows"]:
        k, name = row["iteration"], row["variant"]
        for what, d in (
            (f"{name} minus {_row_reference(contrasts, row)}", row["vs_reference"]),
            (
                f"{name} minus iteration 0 ({contrasts.get('start', 'the base model')})",
                row["vs_base"],
            ),
        ):
            if d is not None:
                where = side(d["average"])
                said.append(
                    (
                        where,
                        f"iteration {k}, {what}: pass@1 "
                        f"{difference_words(d['average'])}: {VERDICT[where]}.",
                    )
                )
    out = [text for _, text in sorted(said, key=lambda t: RANK[t[0]])]
    tested = sum(1 for where, _ in said if where != "none")
    outside = sum(1 for where, _ in said if RANK[where] == 0)
    if tested:
        out.append(
            f"{tested} differences with items that changed, {outside} outside the "
            f"evaluation noise; with no real difference anywhere about "
            f"{tested * ALPHA:.1f} would fall outside by chance. Each variant is one "
            "training run: the intervals hold the trained models fixed and do not "
            "cover how much a variant moves with its seed (replicate runs, run.seed)."
        )
    for name, check in contrasts["base_check"].items():
        if check["missing"]:
            out.append(
                f"The base evaluation (iteration 0) of {ref} or {name} is missing, so "
                "whether they started from the same scores is not known."
            )
        elif check["differing"] or check["unshared"]:
            out.append(
                f"The base evaluations of {ref} and {name} differ: "
                f"{check['differing']} items scored differently and "
                f"{check['unshared']} items scored by only one of them (different "
                "eval settings, nondeterministic decoding, or another CPU's arithmetic)."
            )
    return out


SHORT = {
    "above": "outside the evaluation noise, above",
    "below": "outside the evaluation noise, below",
    "borderline": "borderline (McNemar p >= 0.05)",
    "within": "within the evaluation noise",
    "none": "no item differs",
}


def points(d: dict[str, Any]) -> str:
    """A paired difference of pass@1 in points: `-4.4 points [-11.3, +2.5], McNemar p 0.23`
    (the p where there is one)."""
    p = f", McNemar p {d['mcnemar_p']:.2g}" if d.get("mcnemar_p") is not None else ""
    return (
        f"{100 * d['delta']:+.1f} points [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]{p}"
    )


def variant_lines(contrasts: dict[str, Any]) -> list[str]:
    """One line per variant at the last iteration any variant was evaluated at: each
    variant's pass@1 minus the reference's with its paired interval and where it lies, the
    reference's own against iteration 0; what `rzero ablate` and `rzero compare` end with."""
    rows = contrasts["rows"]
    done = [r["iteration"] for r in rows if r["vs_base"] or r["vs_reference"]]
    if not done:
        return ["no variant has an evaluated trained iteration yet"]
    k = max(done)
    start = contrasts.get("start", "the base model")
    width = max(len(r["variant"]) for r in rows)
    out = []
    for r in (r for r in rows if r["iteration"] == k):
        name = r["variant"].ljust(width)
        ref = _row_reference(contrasts, r)
        if _is_reference(contrasts, r["variant"]):
            d = r["vs_base"]
            what = (
                f"the reference; {points(d['average'])} against iteration 0 ({start}): "
                f"{SHORT[side(d['average'])]}"
                if d
                else "the reference; not evaluated at this iteration"
            )
        else:
            d = r["vs_reference"]
            what = (
                f"{points(d['average'])} against {ref}: {SHORT[side(d['average'])]}"
                if d
                else f"not evaluated at this iteration (or {ref} is not)"
            )
        out.append(f"  {name}  {what}")
    return [f"iteration {k}, pass@1 (paired 95 % intervals):", *out]


CONTRAST_HEADER = [
    "iter",
    "variant",
    "vs reference: Δ pass@1 [paired 95 %]",
    "McNemar p",
    "vs iteration 0 (base model): Δ pass@1 [paired 95 %]",
    "McNemar p",
]


def contrast_table(contrasts: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the average's differences; "–" where one is missing."""

    def cells(d: dict[str, Any] | None) -> list[str]:
        if d is None:
            return ["–", "–"]
        avg = d["average"]
        p = avg.get("mcnemar_p")
        return [PairedDifference(**avg).words(), "–" if p is None else f"{p:.2g}"]

    header = list(CONTRAST_HEADER)
    several = len(set(contrasts.get("references", {}).values())) > 1
    header[2] = (
        f"vs {_stem(contrasts['reference'])} at its seed: Δ pass@1 [paired 95 %]"
        if several
        else f"vs {contrasts['reference']}: Δ pass@1 [paired 95 %]"
    )
    header[4] = f"vs iteration 0 ({contrasts.get('start', 'base model')}): Δ pass@1 [paired 95 %]"
    rows = [
        [
            str(r["iteration"]),
            r["variant"],
            *(
                cells(r["vs_reference"])
                if not _is_reference(contrasts, r["variant"])
                else ["(the reference)", ""]
            ),
            *cells(r["vs_base"]),
        ]
        for r in contrasts["rows"]
    ]
    return header, rows
