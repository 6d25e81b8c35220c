"""The table that compares runs (SPEC §2): `rzero compare RUN_DIR...`, and the last step of
`rzero ablate` (rzero.ablation).

    | iter | solver step | R-Zero eval avg | R-Zero label acc | Single-R-Zero eval avg | ... |

the shape of the seed's R-Zero vs Single-R-Zero table (§4.3). The paper's "steps 15/30/45/60"
are solver GRPO steps at 15 per iteration, so a row is an iteration and its solver step is
iteration x solver.steps. Iteration 0 is the base model. Below it, every variant's paired
difference against the first run and against the base model, in words (rzero.reports.contrasts).
Written as comparison.json here, and as comparison.md, comparison.html (self-contained, the
figure embedded) and comparison.png by `rzero.reports.comparison_page`.

Where we depart from the paper, and why: label accuracy is what an audit measured
(`rzero audit RUN_DIR`, or audit.enabled=true): the judged sample of the solver's training set
of that iteration (the kept questions, `labelled_kept` in audit/report.json), with its 95 %
Wilson interval and n judged. The paper's judge is GPT-4o on 200 questions; a run that was not
audited shows "–".

Runs are read through RunDir (markers, config); nothing here needs torch or trl.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rzero.audit.hand import find as find_hand_audit
from rzero.config import ConfigError
from rzero.io import DamagedFileError, write_bytes_atomic, write_json_atomic, write_text_atomic
from rzero.reports.comparison_page import plot_comparison, render_html, render_markdown
from rzero.reports.contrasts import variant_contrasts, variant_lines
from rzero.rundir import RunDir
from rzero.rundir.record import read_record
from rzero.selfplay.collapse import HEADLINE_DIVERSITY

# The audited set the table reports: the questions the solver trained on in that iteration.
LABEL_SET = "labelled_kept"
OTHER_LABEL_SETS = ("labelled_all", "challenger_steps")


class CompareError(ValueError):
    """Input compare cannot use; the message says which and why."""


class NotARunDir(CompareError):
    """A path given to compare that is not a run directory."""


# ---------------------------------------------------------------- reading runs


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def _load_run(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise NotARunDir(f"{path} is not a directory")
    saved = path / "config.yaml"
    if not saved.is_file():
        raise NotARunDir(f"{path} is not a run directory (no config.yaml)")
    run = RunDir(path)
    try:
        cfg = run.config()
    except ConfigError as exc:  # names config.yaml and what is wrong with it
        raise NotARunDir(f"not a readable run config: {exc}") from None
    return {
        "path": path,
        "run": run,
        "raw": cfg.to_dict(),
        "cfg": cfg,
        "audit": _read_json(path / "audit" / "report.json"),
    }


def _machine(path: Path) -> str | None:
    """The CPU a record says its run ran on (None for a run folder, which does not keep it)."""
    try:
        record = read_record(path)
    except DamagedFileError as exc:
        raise CompareError(str(exc)) from None
    on = (record or {}).get("recorded_on")
    return on.get("cpu") if isinstance(on, dict) else None


def _names(paths: list[Path]) -> list[str]:
    """Variant names from the dir names; paths relative to their common parent on a clash."""
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    common = Path(os.path.commonpath([str(p) for p in paths]))
    return [str(p.relative_to(common)) if p != common else p.name for p in paths]


def _flatten(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        f"{s}.{k}": v for s, sec in raw.items() if isinstance(sec, dict) for k, v in sec.items()
    }


def _label_summary(s: dict[str, Any] | None) -> dict[str, Any] | None:
    if not s or s.get("accuracy") is None:
        return None
    return {
        key: s.get(key)
        for key in (
            "accuracy",
            "ci_low",
            "ci_high",
            "n_judged",
            "n_unjudged",
            "n_ill_posed",
            "caveat",
        )
    }


def _cell(run: dict[str, Any], k: int, hand: list[Path]) -> dict[str, Any]:
    """One variant's numbers for iteration k; its hand audit is looked for in the folders
    `hand`, under its run folder's name."""
    rd: RunDir = run["run"]
    ev = rd.marker(k, "eval")
    out: dict[str, Any] = {
        "eval_average": ev["metrics"]["average"] if ev else None,
        "eval": ev["metrics"] if ev else None,
    }
    if k == 0:
        return out
    lab = rd.marker(k, "labelling")
    lm = lab["metrics"] if lab else {}
    solver = rd.marker(k, "solver")
    audit_row = next(
        (r for r in (run["audit"] or {}).get("per_iteration", []) if r.get("iteration") == k), {}
    )
    out.update(
        {
            "label_accuracy": _label_summary(audit_row.get(LABEL_SET)),
            **{
                f"label_accuracy_{name}": _label_summary(audit_row.get(name))
                for name in OTHER_LABEL_SETS
            },
            "kept_fraction": lm.get("kept_fraction")
            if "kept_fraction" in lm or not lm.get("questions")
            else lm.get("kept", 0) / lm["questions"],  # the solver task's marker
            "kept": lm.get("kept"),
            "questions": lm.get("questions"),
            "mean_p_hat": lm.get("mean_p_hat"),
            # exact, where the kept questions' answers are known: the loop's computable
            # questions (rzero.labeling.computable), the solver task's benchmark draw
            **_known_labels(lm),
            "hand_audit": _hand_audit(hand, Path(run["path"]).name, k),
            "diversity": _diversity(rd, k, lm),
            "solver_skipped": bool(solver and solver.get("skipped")),
            "warnings": [
                m["warning"]
                for p in ("challenger", "pool", "labelling", "solver")
                if (m := rd.marker(k, p)) and m.get("warning")
            ],
        }
    )
    return out


def _hand_audit(folders: list[Path], name: str, k: int) -> dict[str, Any] | None:
    try:
        return find_hand_audit(folders, name, k)
    except ValueError as exc:  # a person's audit half filled in: say so, leave nothing out
        raise CompareError(f"compare: {exc}") from exc


def _diversity(rd: RunDir, k: int, lm: dict[str, Any]) -> dict[str, float] | None:
    """How varied the questions of iteration k are (`rzero.selfplay.collapse`): BLEU
    clusters and number-masked structures per question, distinct bigrams; the challenger's
    pool of a loop, the kept questions of the solver task."""
    keys = HEADLINE_DIVERSITY
    pool = rd.marker(k, "pool")
    pm = pool.get("metrics", {}) if pool else {}
    if all(key in pm for key in keys):
        return {key: pm[key] for key in keys}
    if all(f"kept_{key}" in lm for key in keys):
        return {key: lm[f"kept_{key}"] for key in keys}
    return None


def _known_labels(lm: dict[str, Any]) -> dict[str, Any]:
    """The kept labels' exact accuracy and how many it is over, from a labelling marker."""
    if "kept_computable" in lm:
        return {
            "known_label_accuracy": lm.get("kept_computable_label_accuracy"),
            "known_labels": lm["kept_computable"],
        }
    if lm.get("kept_label_accuracy") is not None:
        return {"known_label_accuracy": lm["kept_label_accuracy"], "known_labels": lm.get("kept")}
    return {"known_label_accuracy": None, "known_labels": None}


def build_comparison(
    run_dirs: list[str | Path], system: str, hand_audits: list[Path] | None = None
) -> dict[str, Any]:
    """The comparison as one JSON-able dict (what comparison.json holds) of runs of the
    system named `system` (its layout's name). A run's hand audits (`rzero.audit.hand`) are
    looked for in the folders `hand_audits`, by default the run folders' parents."""
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise CompareError("compare: give at least one run directory")
    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) != len(resolved):
        raise CompareError("compare: the same run directory is given twice")
    runs = [_load_run(p) for p in paths]
    names = _names(resolved)
    kinds = {r["cfg"].sections for r in runs}
    evaluations = {json.dumps([r["raw"].get("model"), r["raw"].get("eval")]) for r in runs}
    if len(kinds) > 1 and len(evaluations) > 1:
        # runs of different systems pair item by item only when one base model is evaluated
        # alike (the claims' grid: the loop beside its control on the solver task)
        raise CompareError(
            "compare: the runs are of different systems (their configs have different "
            f"sections: {' / '.join(', '.join(k) for k in kinds)}) and do not share their "
            "model and eval sections; compare runs of one system, or runs of one base model "
            "evaluated alike"
        )

    flat = [_flatten(r["raw"]) for r in runs]
    # the fields of sections every run has (runs of two systems differ by whole sections)
    keys = sorted(set.intersection(*(set(f) for f in flat)) - {"run.output_dir"})
    differences = {
        key: {n: f.get(key) for n, f in zip(names, flat, strict=True)}
        for key in keys
        if len({json.dumps(f.get(key)) for f in flat}) > 1
    }

    iterations = max(r["cfg"].run.iterations for r in runs)
    hand = hand_audits if hand_audits is not None else list(dict.fromkeys(p.parent for p in paths))
    rows = []
    for k in range(iterations + 1):
        rows.append(
            {
                "iteration": k,
                "solver_step": {
                    n: k * r["cfg"].solver.steps if r["cfg"].solver else k
                    for n, r in zip(names, runs, strict=True)
                },
                "variants": {n: _cell(r, k, hand) for n, r in zip(names, runs, strict=True)},
            }
        )
    first = runs[0]["cfg"]
    return {
        "system": system,
        "runs": [
            {
                "name": n,
                "path": str(r["path"]),
                "shared": r["cfg"].roles.shared if r["cfg"].roles else None,
                "iterations": r["cfg"].run.iterations,
                "solver_steps": r["cfg"].solver.steps if r["cfg"].solver else None,
                "machine": _machine(r["path"]),
                "audit": (
                    {
                        "report": str(r["path"] / "audit" / "report.json"),
                        "judge": r["audit"].get("judge"),
                    }
                    if r["audit"]
                    else None
                ),
            }
            for n, r in zip(names, runs, strict=True)
        ],
        "common": {
            key: value
            for key, value in (("model.name", first.model.name), ("run.seed", first.run.seed))
            if key not in differences
        },
        "config_differences": differences,
        "label_set": LABEL_SET,
        "rows": rows,
        "contrasts": variant_contrasts(
            [(n, r["run"]) for n, r in zip(names, runs, strict=True)],
            iterations,
            seed=first.run.seed,
            seeds=[r["cfg"].run.seed for r in runs],
        ),
    }


# ---------------------------------------------------------------- rendering


def compare(
    run_dirs: list[str | Path],
    system: str,
    out_dir: str | Path | None = None,
    hand_audits: list[Path] | None = None,
) -> dict[str, Path]:
    """Write comparison.{md,html,json,png} of runs of the system `system` (its layout's
    name; default: into the run dirs' common parent); `hand_audits`: build_comparison's."""
    comp = build_comparison(run_dirs, system, hand_audits)
    if out_dir is None:
        out_dir = os.path.commonpath([str(Path(p).resolve().parent) for p in run_dirs])
        if Path(out_dir) == Path(out_dir).parent:
            raise CompareError(
                "compare: the run directories share no parent but the "
                "filesystem root; say where to write with --out"
            )
    out_dir = Path(out_dir)
    paths = {ext: out_dir / f"comparison.{ext}" for ext in ("md", "html", "json", "png")}
    png = plot_comparison(comp)
    write_bytes_atomic(paths["png"], png)
    write_json_atomic(paths["json"], comp)
    write_text_atomic(paths["html"], render_html(comp, png))
    write_text_atomic(paths["md"], render_markdown(comp))
    return paths


def printed_summary(md: Path) -> str:
    """What `rzero ablate` and `rzero compare` print: the paired differences in words (from
    the comparison.json beside `md`), then one line per variant with its difference from the
    reference and its interval (`variant_lines`), then the absolute path of the page."""
    comp = json.loads(md.with_suffix(".json").read_text())
    lines = [f"comparison: {md}"]
    if len(comp["runs"]) > 1 and comp["contrasts"]["sentences"]:
        lines += [
            "",
            "Paired differences (pass@1, 95 % intervals):",
            *(f"- {s}" for s in comp["contrasts"]["sentences"]),
        ]
    lines += ["", *variant_lines(comp["contrasts"])]
    lines.append(f"comparison: {md.with_suffix('.html').resolve()}")
    return "\n".join(lines) + "\n"
