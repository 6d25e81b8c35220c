"""The question pool: malformed and duplicate questions dropped, evaluation items kept out."""

from __future__ import annotations

from conftest import ScriptedGenerator

from rzero.challenger.train import sample_pool
from rzero.config import load_config


def test_pool_drops_malformed_duplicate_and_held_out_questions():
    texts = [
        "<question>What is 36 + 19?</question> \\boxed{55}",  # an evaluation item
        "<question>What is 12 + 7?</question> \\boxed{19}",
        "<question>What is 12 +  7?</question> \\boxed{19}",  # duplicate, whitespace aside
        "<question>No answer given</question>",  # malformed: no box
        "<question>Sam has 4 boxes with 3 pens each. How many pens?</question> \\boxed{12}",
    ]
    cfg = load_config(None, [f"challenger.pool_size={len(texts)}"])
    pool, counts = sample_pool(
        ScriptedGenerator(lambda text, n, params: texts), cfg, seed=0, held_out=["What is 36 + 19?"]
    )
    assert [r["question"] for r in pool] == [
        "What is 12 + 7?",
        "Sam has 4 boxes with 3 pens each. How many pens?",
    ]
    # 5 sampled - 1 malformed - 1 duplicate - 1 evaluation item = 2 kept
    assert counts == {"sampled": 5, "malformed": 1, "duplicates": 1, "eval_overlap": 1, "kept": 2}
