"""`run.push_to_hub`: an `after_commit` hook that pushes each trained phase's checkpoint to
`run.hub_model_id` as its own branch (`rzero.engine.hub`), with a model card written from the
run folder: the recipe, the base model, one row per pushed revision with its phase's
numbers, and the report's science card.

Pushes are recorded in RUN_DIR/hub.json. A push that fails (no network, no token) costs
one warning line, never the run: the next commit, or the same command again, pushes every
committed checkpoint that is not on the hub yet.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml

from rzero.config import RZeroConfig
from rzero.engine.hub import push_checkpoint, revision_name
from rzero.io import write_json_atomic
from rzero.rundir.folder import RunDir

log = logging.getLogger(__name__)

# the phases whose checkpoint is a trained model (the rest evaluate or collect)
CARD_METRICS = 6  # numbers of a phase's marker shown in the card's table


def pushed(run: RunDir) -> list[dict[str, Any]]:
    """The revisions pushed so far (RUN_DIR/hub.json), in push order."""
    path = run.path / "hub.json"
    return json.loads(path.read_text()) if path.is_file() else []


def _science_card(run: RunDir) -> str:
    report = run.path / "report.md"
    if not report.is_file():
        return ""
    text = report.read_text()
    start = text.find("## Science card")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)].strip()


def model_card(cfg: RZeroConfig, run: RunDir, revisions: list[dict[str, Any]]) -> str:
    """The README.md of the run's hub repository."""
    base = cfg.model.name
    front = {"library_name": "transformers", "tags": ["rzero", "self-play", run.layout.name]}
    if not base.startswith("embedded:") and "/" in base and not base.startswith("/"):
        front["base_model"] = base  # a hub id
    rows = []
    for r in revisions:
        marker = run.marker(r["iteration"], r["phase"]) or {}
        numbers = [
            (key, value)
            for key, value in marker.get("metrics", {}).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
        shown = ", ".join(f"{key} {value:.4g}" for key, value in numbers[:CARD_METRICS])
        evaluation = run.marker(r["iteration"], "eval")
        average = (
            f"{evaluation['metrics']['average']:.3f}"
            if evaluation and "average" in evaluation.get("metrics", {})
            else "–"
        )
        rows.append(
            f"| `{r['revision']}` | {r['iteration']} | {r['phase']} | {average} | {shown or '–'} |"
        )
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# {cfg.run.hub_model_id}",
        "",
        f"Self-play run `{run.path.name}` of rzero (system `{run.layout.name}`, "
        f"{cfg.run.iterations} iterations) from the base model `{base}`. Every trained "
        "phase's checkpoint is a branch of this repository:",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM",
        f'AutoModelForCausalLM.from_pretrained("{cfg.run.hub_model_id}", '
        f'revision="{revisions[-1]["revision"] if revisions else "iter-01-solver"}")',
        "```",
        "",
        "| revision | iteration | phase | evaluation average after the iteration | "
        "the phase's numbers |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    if card := _science_card(run):
        lines += [card, ""]
    lines += [
        "## Recipe",
        "",
        "```yaml",
        (run.path / "config.yaml").read_text().strip()
        if (run.path / "config.yaml").is_file()
        else "",
        "```",
        "",
    ]
    return "\n".join(lines)


class HubPush:
    """The `after_commit` hook: push every committed, not yet pushed checkpoint of a
    trained phase, in run order."""

    def __init__(self, cfg: RZeroConfig, run: RunDir):
        self.cfg = cfg
        self.run = run

    def due(self) -> list[tuple[int, str, str]]:
        """(iteration, phase, checkpoint dir) committed but not on the hub yet."""
        done = {r["revision"] for r in pushed(self.run)}
        out = []
        for k in self.run.iterations():
            for phase in self.run.layout.phases:
                marker = self.run.marker(k, phase)
                if (
                    phase in self.run.layout.pushed
                    and marker
                    and marker.get("checkpoint")
                    and revision_name(k, phase) not in done
                ):
                    out.append((k, phase, self.run.resolve(marker["checkpoint"])))
        return out

    def __call__(self, k: int, phase: str, marker: dict[str, Any]) -> None:
        revisions = pushed(self.run)
        for k_due, phase_due, checkpoint in self.due():
            revision = revision_name(k_due, phase_due)
            entry = {"revision": revision, "iteration": k_due, "phase": phase_due}
            card = model_card(self.cfg, self.run, [*revisions, entry])
            try:
                commit = push_checkpoint(
                    self.cfg.run.hub_model_id,
                    Path(checkpoint),
                    revision,
                    card,
                    private=self.cfg.run.hub_private,
                )
            except Exception as exc:  # the network, a token, the hub: retried next commit
                log.warning(
                    "run.push_to_hub: %s of %s not pushed (%s: %s); the next commit "
                    "or a rerun retries",
                    revision,
                    self.cfg.run.hub_model_id,
                    type(exc).__name__,
                    str(exc).splitlines()[0] if str(exc) else "",
                )
                return
            revisions.append({**entry, "commit": commit})
            write_json_atomic(self.run.path / "hub.json", revisions)
            log.info("pushed %s to %s (%s)", revision, self.cfg.run.hub_model_id, commit[:12])
