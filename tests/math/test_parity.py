"""docs/parity.md stays true: every row's recipe cells start with the value computed here
from the loaded recipe (its config, its plan and the GRPOConfig it builds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rzero.config import ChallengerConfig, LabelingConfig, RZeroConfig, load_config
from rzero.math.plan import plan_rows, plan_value
from rzero.training.grpo import grpo_config

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "parity.md"
RECIPES = ("r-zero-qwen3-4b.yaml", "r-zero-reference.yaml")


def _g(x: float) -> str:
    return f"{x:g}"


def recipe_values(cfg: RZeroConfig, tmp_path: Path) -> dict[str, str]:
    """The value of every parity row for one recipe, as its table cell starts (in backticks)."""
    from rzero.labeling.voting import majority_vote

    c, s, lab = cfg.challenger, cfg.solver, cfg.labeling
    args = {
        r.section: grpo_config(
            r, tmp_path, seed=0, model_cfg=cfg.model, generation_cfg=cfg.generation
        )
        for r in (c, s)
    }
    rows = plan_rows(cfg)
    # an unparsed answer (None) counts in m: two of three agree -> p_hat = 2/3
    unparsed = majority_vote(["7", "7", None]).p_hat
    low, high = (
        (lab.band_low, lab.band_high)
        if lab.band_low is not None
        else (0.5 - lab.delta, 0.5 + lab.delta)
    )
    band = f"{_g(low)}..{_g(high)} of {lab.num_votes}"

    def both(key: str) -> str:
        a, b = getattr(args["challenger"], key), getattr(args["solver"], key)
        return str(a) if a == b else f"challenger {a}, solver {b}"

    return {
        "prompt": f"{c.prompt_file}, {s.prompt_file}",
        "format gate": f"{c.format_gate}, invalid {_g(c.invalid_reward)}",
        "reward form and clip": f"{c.reward_form}, clip {str(c.clip_reward).lower()}",
        "p̂ with unparsed answers": "in m" if unparsed == pytest.approx(2 / 3) else "not in m",
        "votes": f"m = {lab.num_votes}",
        "sampling": f"T {_g(lab.temperature)}, top_p {_g(lab.top_p)}, top_k {lab.top_k}",
        "grader": f"{lab.equivalence}",
        "BLEU tokenisation": c.bleu_variant,
        "clustering": f"average, tau {_g(c.tau)}",
        "B": f"{plan_value(rows, 'challenger', 'B'):,}",
        "band": band,
        "solver reward": s.reward,
        "G": f"{c.group_size}, {s.group_size}",
        "lr": f"{_g(c.learning_rate)}, {_g(s.learning_rate)}",
        "KL": f"k3, {_g(c.beta)}, {_g(s.beta)}",
        "PPO clip": f"{_g(c.epsilon)}/{_g(c.epsilon_high)}, {_g(s.epsilon)}/{_g(s.epsilon_high)}",
        "loss aggregation": both("loss_type"),
        "importance-sampling correction": str(
            args["challenger"].vllm_importance_sampling_correction
            or args["solver"].vllm_importance_sampling_correction
        ).lower(),
        "updates per phase": f"{plan_value(rows, 'challenger', 'updates')}, "
        f"{plan_value(rows, 'solver', 'updates')}",
        "weight decay": both("weight_decay"),
        "top_p": both("top_p"),
        "iterations": str(cfg.run.iterations),
        "evaluation": ", ".join(cfg.eval.benchmarks),
    }


def parity_table() -> dict[str, list[str]]:
    """Element -> its cells (paper, official code, recipe..., as written), from the R-Zero
    table (the document's first; SPIN's follows under its own heading)."""
    text = DOC.read_text().split("\n## SPIN")[0]
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[3:] == [f"`{r}`" for r in RECIPES], header
    table = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == len(header), line
        table[cells[0]] = cells[1:]
    return table


def test_the_table_has_one_row_per_element(tmp_path):
    expected = recipe_values(load_config(ROOT / "configs" / RECIPES[0]), tmp_path)
    assert list(parity_table()) == list(expected)


@pytest.mark.parametrize("column, recipe", list(enumerate(RECIPES, start=2)))
def test_recipe_column_matches_the_recipe(column, recipe, tmp_path):
    values = recipe_values(load_config(ROOT / "configs" / recipe), tmp_path)
    wrong = {}
    for element, cells in parity_table().items():
        written = re.match(r"`([^`]*)`", cells[column])
        if written is None or written.group(1) != values[element]:
            wrong[element] = (cells[column], values[element])
    assert wrong == {}


class _FakeSolver:
    """Votes 7 of 10 for every question (p_hat = 0.7), without a model."""

    labeling = LabelingConfig(num_votes=10)

    def vote(self, questions, seed):
        from rzero.labeling.voting import majority_vote

        answers = [["5"] * 7 + ["6"] * 3 for _ in questions]
        return answers, [majority_vote(a) for a in answers]


@pytest.mark.parametrize(
    "gate, expected",
    [
        # paper form: 1 - 2|0.7 - 1/2| = 0.6; two different questions are two clusters of one in
        # B = 2, so r_rep = 1/2 each -> max(0, 0.6 - 0.5) = 0.1
        ("tags", [pytest.approx(0.1), pytest.approx(0.1)]),
        # the default gate also needs the challenger's own boxed answer: the second has none
        ("tags_and_answer", [pytest.approx(0.1), 0.0]),
    ],
)
def test_format_gate(gate, expected, tmp_path):
    from rzero.challenger.rewards import ChallengerReward

    cfg = ChallengerConfig(format_gate=gate)
    reward = ChallengerReward(_FakeSolver(), cfg, tmp_path / "steps.jsonl", 1, seed=0)
    texts = [
        "<question>How many primes are below 10?</question> \\boxed{4}",
        "<question>Find the number of sides of a hexagon minus one.</question>",
    ]
    assert reward(prompts=[None, None], completions=texts) == expected
