"""Ablations (SPEC §2) and the table that compares their runs.

`rzero ablate` runs variants of one recipe with the same base model, seed and sizes, each as
a normal resumable run in OUT/<variant> (rerunning the command resumes every one of them),
then compares them. `rzero compare RUN_DIR...` builds the comparison of any runs:

    | iter | solver step | R-Zero eval avg | R-Zero label acc | Single-R-Zero eval avg | ... |

the shape of the seed's R-Zero vs Single-R-Zero table (§4.3). The paper's "steps 15/30/45/60"
are solver GRPO steps at 15 per iteration, so a row is an iteration and its solver step is
iteration x solver.steps. Iteration 0 is the base model. Written as comparison.md,
comparison.html, comparison.json and comparison.png.

Variants (`VARIANTS`):
    separate               R-Zero: challenger and solver keep their own weights
    shared                 Single-R-Zero: one model, both phases update it
    base_challenger        the solver learns from questions of the untrained challenger
    no_repetition_penalty  challenger reward without the BLEU-cluster penalty (lambda = 0)
    no_band_filter         every labelled question trains the solver, whatever its p_hat

Where we depart from the paper, and why:
- Every variant but `shared` pins roles.shared=false, so each ablation is "R-Zero minus one
  thing" even when the recipe itself sets shared weights.
- Label accuracy is what an audit measured (`rzero audit RUN_DIR`, or audit.enabled=true):
  the judged sample of the solver's training set of that iteration (the kept questions,
  `labelled_kept` in audit/report.json), with its 95 % Wilson interval and n judged. The
  paper's judge is GPT-4o on 200 questions; a run that was not audited shows "–".
"""

from __future__ import annotations

import argparse
import gc
import html
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from rzero.config import ConfigError, RZeroConfig, config_from_dict, load_config
from rzero.io import write_bytes_atomic, write_json_atomic, write_text_atomic

VARIANTS: dict[str, list[str]] = {
    "separate": ["roles.shared=false"],
    "shared": ["roles.shared=true"],
    "base_challenger": ["roles.shared=false", "roles.train_challenger=false"],
    "no_repetition_penalty": ["roles.shared=false", "challenger.repetition_lambda=0"],
    "no_band_filter": ["roles.shared=false", "labeling.filter=false"],
}
DEFAULT_VARIANTS = ("separate", "shared")
DEFAULT_OUT = "runs/ablate"
# The audited set the table reports: the questions the solver trained on in that iteration.
LABEL_SET = "labelled_kept"
OTHER_LABEL_SETS = ("labelled_all", "challenger_steps")
DISPLAY = {"separate": "R-Zero (separate)", "shared": "Single-R-Zero (shared)"}
# The seed's table (§4.3), Qwen3-4B-Base: solver step -> (performance, label accuracy %).
PAPER = {"R-Zero": {15: (48.06, 71.0), 30: (48.44, 56.2), 45: (49.12, 48.8), 60: (46.52, 42.2)},
         "Single-R-Zero": {15: (47.31, 63.4), 30: (46.95, 46.6), 45: (45.57, 32.6),
                           60: (43.89, 33.8)}}


class CompareError(ValueError):
    """Input compare cannot use; the message says which and why."""


class NotARunDir(CompareError):
    """A path given to compare that is not a run directory."""


# ---------------------------------------------------------------- variants


def variant_config(cfg: RZeroConfig, variant: str) -> RZeroConfig:
    """`cfg` with the overrides of `variant` applied (validated like any config)."""
    if variant not in VARIANTS:
        raise ConfigError(f"variant {variant!r}: unknown; allowed variants are "
                          f"{', '.join(VARIANTS)}")
    raw = cfg.to_dict()
    for text in VARIANTS[variant]:
        key, _, value = text.partition("=")
        section, name = key.split(".")
        raw[section][name] = yaml.safe_load(value)
    return config_from_dict(raw)


def parse_variants(text: str) -> list[str]:
    """'separate, shared' -> ['separate', 'shared']; 'all' -> every variant; checked."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return list(VARIANTS)
    if not names:
        raise ConfigError(f"--variants {text!r}: name at least one of {', '.join(VARIANTS)}")
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise ConfigError(f"--variants: unknown variant(s) {', '.join(map(repr, unknown))}; "
                          f"allowed: {', '.join(VARIANTS)} (or 'all')")
    return list(dict.fromkeys(names))


def ablate(cfg: RZeroConfig, variants: list[str] | tuple[str, ...], out_dir: str | Path,
           fresh: bool = False) -> Path:
    """Run each variant in OUT/<variant> (resuming), then compare; returns comparison.md."""
    from rzero.loop import prepare_run_dir, run_iterations

    if not variants:
        raise ConfigError(f"ablate: no variants given; choose from {', '.join(VARIANTS)}")
    out_dir = Path(out_dir)
    configs: dict[str, RZeroConfig] = {}
    for variant in dict.fromkeys(variants):
        configs[variant] = variant_config(cfg, variant)
        configs[variant].run.output_dir = str(out_dir / variant)

    # -- before any work: every run dir must be new or resumable with its variant's config,
    #    so a conflict in the last variant does not surface after hours spent on the first
    if not fresh:
        for variant, vcfg in configs.items():
            prepare_run_dir(vcfg, out_dir / variant)
    by_fingerprint: dict[str, str] = {}
    for variant, vcfg in configs.items():
        twin = by_fingerprint.setdefault(vcfg.fingerprint(), variant)
        if twin != variant:
            print(f"ablate: warning: variants {twin} and {variant} have the same config "
                  f"(the recipe already sets what {variant} changes); their runs will match",
                  file=sys.stderr)

    # -- the runs, one after another (each is an ordinary resumable run)
    for i, (variant, vcfg) in enumerate(configs.items(), 1):
        run_dir = out_dir / variant
        print(f"ablate: variant {variant} ({i}/{len(configs)}): {' '.join(VARIANTS[variant])}"
              f" -> {run_dir}", flush=True)
        run_iterations(vcfg, run_dir, fresh=fresh)
        gc.collect()

    # -- one table over all of them
    paths = compare([out_dir / v for v in configs], out_dir)
    return paths["md"]


# ---------------------------------------------------------------- reading runs


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def _marker(run_dir: Path, k: int, phase: str) -> dict[str, Any] | None:
    # read here rather than through rzero.loop: compare needs no torch or trl
    return _read_json(run_dir / f"iter_{k:02d}" / "phases" / f"{phase}.json")


def _load_run(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise NotARunDir(f"{path} is not a directory")
    saved = path / "config.yaml"
    if not saved.is_file():
        raise NotARunDir(f"{path} is not a run directory (no config.yaml)")
    try:
        raw = yaml.safe_load(saved.read_text())
        cfg = config_from_dict(raw)
    except (yaml.YAMLError, ConfigError) as exc:
        raise NotARunDir(f"{saved}: not a readable run config ({exc})") from None
    return {"path": path, "raw": raw, "cfg": cfg,
            "audit": _read_json(path / "audit" / "report.json")}


def _names(paths: list[Path]) -> list[str]:
    """Variant names from the dir names; paths relative to their common parent on a clash."""
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    common = Path(os.path.commonpath([str(p) for p in paths]))
    return [str(p.relative_to(common)) if p != common else p.name for p in paths]


def _flatten(raw: dict[str, Any]) -> dict[str, Any]:
    return {f"{s}.{k}": v for s, sec in raw.items() if isinstance(sec, dict)
            for k, v in sec.items()}


def _label_summary(s: dict[str, Any] | None) -> dict[str, Any] | None:
    if not s or s.get("accuracy") is None:
        return None
    return {key: s.get(key) for key in ("accuracy", "ci_low", "ci_high", "n_judged",
                                        "n_unjudged", "n_ill_posed", "caveat")}


def _cell(run: dict[str, Any], k: int) -> dict[str, Any]:
    """One variant's numbers for iteration k."""
    path = run["path"]
    ev = _marker(path, k, "eval")
    out: dict[str, Any] = {"eval_average": ev["metrics"]["average"] if ev else None,
                           "eval": ev["metrics"] if ev else None}
    if k == 0:
        return out
    lab = _marker(path, k, "labelling")
    lm = lab["metrics"] if lab else {}
    solver = _marker(path, k, "solver")
    audit_row = next((r for r in (run["audit"] or {}).get("per_iteration", [])
                      if r.get("iteration") == k), {})
    out.update({
        "label_accuracy": _label_summary(audit_row.get(LABEL_SET)),
        **{f"label_accuracy_{name}": _label_summary(audit_row.get(name))
           for name in OTHER_LABEL_SETS},
        "kept_fraction": lm.get("kept_fraction"), "kept": lm.get("kept"),
        "questions": lm.get("questions"), "mean_p_hat": lm.get("mean_p_hat"),
        "solver_skipped": bool(solver and solver.get("skipped")),
        "warnings": [m["warning"] for p in ("challenger", "pool", "labelling", "solver")
                     if (m := _marker(path, k, p)) and m.get("warning")],
    })
    return out


def build_comparison(run_dirs: list[str | Path]) -> dict[str, Any]:
    """The comparison as one JSON-able dict (what comparison.json holds)."""
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise CompareError("compare: give at least one run directory")
    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) != len(resolved):
        raise CompareError("compare: the same run directory is given twice")
    runs = [_load_run(p) for p in paths]
    names = _names(resolved)

    flat = [_flatten(r["raw"]) for r in runs]
    keys = sorted(set().union(*flat) - {"run.output_dir"})
    differences = {key: {n: f.get(key) for n, f in zip(names, flat, strict=True)}
                   for key in keys if len({json.dumps(f.get(key)) for f in flat}) > 1}

    iterations = max(r["cfg"].run.iterations for r in runs)
    rows = []
    for k in range(iterations + 1):
        rows.append({"iteration": k,
                     "solver_step": {n: k * r["cfg"].solver.steps
                                     for n, r in zip(names, runs, strict=True)},
                     "variants": {n: _cell(r, k) for n, r in zip(names, runs, strict=True)}})
    first = runs[0]["cfg"]
    return {
        "runs": [{"name": n, "path": str(r["path"]), "shared": r["cfg"].roles.shared,
                  "iterations": r["cfg"].run.iterations, "solver_steps": r["cfg"].solver.steps,
                  "audit": ({"report": str(r["path"] / "audit" / "report.json"),
                             "judge": r["audit"].get("judge")} if r["audit"] else None)}
                 for n, r in zip(names, runs, strict=True)],
        "common": {key: value for key, value in (("model.name", first.model.name),
                                                 ("run.seed", first.run.seed))
                   if key not in differences},
        "config_differences": differences,
        "label_set": LABEL_SET,
        "rows": rows,
    }


# ---------------------------------------------------------------- rendering


def _pct(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _acc(s: dict[str, Any] | None, with_n: bool = True) -> str:
    if s is None:
        return "–"
    text = f"{100 * s['accuracy']:.1f}% [{100 * s['ci_low']:.1f}, {100 * s['ci_high']:.1f}]"
    if with_n:
        text += f" n={s['n_judged']}"
    return text + (" †" if s.get("caveat") else "")


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def _steps(row: dict[str, Any]) -> str:
    return " / ".join(str(s) for s in dict.fromkeys(row["solver_step"].values()))


def _display(name: str) -> str:
    return DISPLAY.get(name, name)


def _value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def _tables(comp: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of the tables, as plain text; md and html escape it their way."""
    names = [r["name"] for r in comp["runs"]]
    main_header = ["iter", "solver step"]
    ctx_header = ["iter"]
    for n in names:
        d = _display(n)
        main_header += [f"{d}: eval avg (%)", f"{d}: label acc [95 % CI]"]
        ctx_header += [f"{d}: kept / labelled", f"{d}: mean p̂",
                       f"{d}: label acc, all labelled"]
    main, ctx = [], []
    for row in comp["rows"]:
        k = row["iteration"]
        it = "0 (base)" if k == 0 else str(k)
        cells = [it, _steps(row)]
        ctx_cells = [it]
        for n in names:
            c = row["variants"][n]
            cells += [_pct(c["eval_average"]), _acc(c.get("label_accuracy"))]
            if k > 0:
                kept = ("–" if c["kept_fraction"] is None else
                        f"{c['kept']}/{c['questions']} ({c['kept_fraction']:.2f})")
                ctx_cells += [kept + (" (solver skipped)" if c["solver_skipped"] else ""),
                              _num(c["mean_p_hat"]), _acc(c.get("label_accuracy_labelled_all"))]
        main.append(cells)
        if k > 0:
            ctx.append(ctx_cells)
    tables = [("Performance and label accuracy per iteration", main_header, main),
              ("Context: the labelled pool", ctx_header, ctx)]
    if comp["config_differences"]:
        tables.append(("Config differences (run.output_dir ignored)", ["field", *names],
                       [[key, *(_value(vals[n]) for n in names)]
                        for key, vals in comp["config_differences"].items()]))
    return tables


def _header_lines(comp: dict[str, Any]) -> list[str]:
    names = [r["name"] for r in comp["runs"]]
    common = comp["common"]
    runs = ", ".join(f"{n} ({r['path']})" for n, r in zip(names, comp["runs"], strict=True))
    lines = [f"Runs: {runs}.",
             f"Base model {common.get('model.name', '(differs, see below)')}, seed "
             f"{common.get('run.seed', '(differs, see below)')}.",
             "Config differences: " + ("; ".join(
                 f"{key} = " + ", ".join(f"{_value(v)} ({n})" for n, v in vals.items())
                 for key, vals in comp["config_differences"].items())
                 or "none (apart from run.output_dir)") + "."]
    if any(r["solver_steps"] != comp["runs"][0]["solver_steps"] for r in comp["runs"]):
        lines.append("The runs differ in solver.steps, so one iteration is a different "
                     "number of solver steps in each (shown separated by /).")
    lines.append("Eval avg: the evaluation average (pass@1, %) of the solver after that "
                 "iteration; iteration 0 is the base model. Solver step = iteration x "
                 "solver.steps (the paper's steps 15/30/45/60 are iterations 1-4 at 15 "
                 "solver steps each).")
    audited = [r for r in comp["runs"] if r["audit"]]
    lines.append(
        "Label acc: audited accuracy of the pseudo-labels of the questions the solver trained "
        "on in that iteration (judged sample of the kept questions), with its 95 % Wilson "
        "interval and n judged; † marks a sample too small to say anything; – means not "
        "audited (`rzero audit RUN_DIR`)."
        + ("" if audited else " None of these runs has been audited yet."))
    for r in audited:
        judge = r["audit"]["judge"] or {}
        text = f"Judge of {r['name']}: {judge.get('model', '?')}."
        if judge.get("embedded"):
            text += (" This is the run's own base model judging itself: it shows that the "
                     "machinery works, not whether the labels are true.")
        lines.append(text)
    return lines


def _warnings(comp: dict[str, Any]) -> list[str]:
    return [f"{n}: {w}" for row in comp["rows"] for n, c in row["variants"].items()
            for w in c.get("warnings", [])]


def _paper_table() -> tuple[list[str], list[list[str]]]:
    header = ["solver step"] + [f"{v}: {col}" for v in PAPER
                                for col in ("performance", "label acc")]
    rows = [[str(step)] + [x for v in PAPER for x in (f"{PAPER[v][step][0]:.2f}",
                                                      f"{PAPER[v][step][1]:.1f}%")]
            for step in PAPER["R-Zero"]]
    return header, rows


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(map(_md_cell, header)) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in rows]
    return out


def render_markdown(comp: dict[str, Any]) -> str:
    out = ["# R-Zero ablation: comparison", ""]
    out += [f"- {_md_cell(line)}" for line in _header_lines(comp)] + [""]
    for title, header, rows in _tables(comp):
        out += [f"## {title}", ""] + _md_table(header, rows) + [""]
    if warnings := _warnings(comp):
        out += ["## Warnings", ""] + [f"- {_md_cell(w)}" for w in warnings] + [""]
    out += ["![eval average and label accuracy per iteration](comparison.png)", ""]
    header, rows = _paper_table()
    out += ["## For reference: the paper (Qwen3-4B-Base, seed §4.3)", ""]
    out += _md_table(header, rows) + [""]
    return "\n".join(out)


_CSS = """body{font-family:sans-serif;margin:2em;max-width:90em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;
text-align:left}"""


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(comp: dict[str, Any]) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<title>rzero ablation comparison</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>R-Zero ablation: comparison</h1>", "<ul>"]
    parts += [f"<li>{e(line)}</li>" for line in _header_lines(comp)] + ["</ul>"]
    for title, header, rows in _tables(comp):
        parts += [f"<h2>{e(title)}</h2>", _html_table(header, rows)]
    if warnings := _warnings(comp):
        parts += ["<h2>Warnings</h2>", "<ul>"] + [f"<li>{e(w)}</li>" for w in warnings]
        parts.append("</ul>")
    parts.append('<img src="comparison.png" alt="eval average and label accuracy per '
                 'iteration">')
    header, rows = _paper_table()
    parts += ["<h2>For reference: the paper (Qwen3-4B-Base, seed §4.3)</h2>",
              _html_table(header, rows), "</body></html>\n"]
    return "\n".join(parts)


def plot_comparison(comp: dict[str, Any]) -> bytes:
    """PNG: eval average (left) and label accuracy with Wilson bars (right) per iteration."""
    # Figure + its Agg canvas directly: no pyplot, so no global backend state and no display.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax_eval, ax_acc = fig.subplots(1, 2)
    names = [r["name"] for r in comp["runs"]]
    rows = comp["rows"]
    # small horizontal offsets and one marker each keep equal values of variants visible
    width = 0.08 * (len(names) - 1)
    for i, name in enumerate(names):
        dx = i * 0.08 - width / 2
        fmt = "osD^v<>p"[i % 8] + "-"
        pts = [(r["iteration"], r["variants"][name]["eval_average"]) for r in rows
               if r["variants"][name]["eval_average"] is not None]
        if pts:
            ax_eval.plot([k + dx for k, _ in pts], [100 * y for _, y in pts], fmt,
                         color=f"C{i}", label=_display(name))
        acc = [(r["iteration"], r["variants"][name].get("label_accuracy")) for r in rows]
        acc = [(k, s) for k, s in acc if s is not None]
        if acc:
            ys = [100 * s["accuracy"] for _, s in acc]
            err = [[y - 100 * s["ci_low"] for y, (_, s) in zip(ys, acc, strict=True)],
                   [100 * s["ci_high"] - y for y, (_, s) in zip(ys, acc, strict=True)]]
            ax_acc.errorbar([k + dx for k, _ in acc], ys, yerr=err, fmt=fmt, capsize=4,
                            color=f"C{i}", label=_display(name))
    if not ax_acc.get_legend_handles_labels()[0]:
        ax_acc.text(0.5, 0.5, "no audit yet\n(rzero audit RUN_DIR)", ha="center",
                    va="center", transform=ax_acc.transAxes)
    ticks = [r["iteration"] for r in rows]
    labels = [f"{r['iteration']}\n(step {_steps(r)})" for r in rows]
    for ax, title, ylabel in (
            (ax_eval, "Evaluation average", "pass@1 (%)"),
            (ax_acc, "Label accuracy of the solver's training set", "accuracy (%), 95 % Wilson")):
        ax.set_xticks(ticks, labels)
        ax.set_xlim(min(ticks) - 0.5, max(ticks) + 0.5)
        ax.set_xlabel("iteration (solver step)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="lower left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def compare(run_dirs: list[str | Path], out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write comparison.{md,html,json,png} (default: into the run dirs' common parent)."""
    comp = build_comparison(run_dirs)
    if out_dir is None:
        out_dir = os.path.commonpath([str(Path(p).resolve().parent) for p in run_dirs])
        if Path(out_dir) == Path(out_dir).parent:
            raise CompareError("compare: the run directories share no parent but the "
                               "filesystem root; say where to write with --out")
    out_dir = Path(out_dir)
    paths = {ext: out_dir / f"comparison.{ext}" for ext in ("md", "html", "json", "png")}
    write_bytes_atomic(paths["png"], plot_comparison(comp))
    write_json_atomic(paths["json"], comp)
    write_text_atomic(paths["html"], render_html(comp))
    write_text_atomic(paths["md"], render_markdown(comp))
    return paths


# ---------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `rzero ablate`."""
    parser.add_argument("--config", default=None,
                        help="YAML recipe every variant starts from (default: built-in defaults)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="override one field of the recipe, for every variant (repeatable)")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help=f"comma-separated, from {', '.join(VARIANTS)}, or 'all' "
                             f"(default {','.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"directory holding one run dir per variant and the comparison "
                             f"(default {DEFAULT_OUT})")
    parser.add_argument("--fresh", action="store_true",
                        help="delete each variant's run dir and start it over")


def run(args: argparse.Namespace) -> int:
    from rzero.loop import RunDirConflict

    try:
        variants = parse_variants(args.variants)
        cfg = load_config(args.config, args.overrides)
        md = ablate(cfg, variants, args.out, fresh=args.fresh)
    except (ConfigError, RunDirConflict, CompareError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"comparison: {md}\n            {md.with_suffix('.html')}")
    return 0


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `rzero compare`."""
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="run directories; each one's directory name is its variant name")
    parser.add_argument("--out", default=None,
                        help="where comparison.{md,html,json,png} go (default: the run "
                             "directories' common parent)")


def run_compare(args: argparse.Namespace) -> int:
    try:
        paths = compare(args.run_dirs, args.out)
    except CompareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"comparison: {paths['md']}\n            {paths['html']}")
    return 0
