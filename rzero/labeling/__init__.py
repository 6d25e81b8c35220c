"""Pseudo-labels from votes, and answers compared as mathematical objects; no engine.

answers.py             the question and the final answer out of model text, normalised
voting.py              majority vote over m answers: the label and its vote share p̂
filtering.py           the band: which labelled questions are informative enough
equivalence.py         are two answers the same object? math-verify, behind a guard
equivalence_worker.py  the math-verify worker process behind it, and its hard limit
computable.py          the exact answer of a question that is one arithmetic expression
"""
