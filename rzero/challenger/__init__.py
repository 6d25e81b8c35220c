"""R-Zero's challenger (seed 000 §4.1): the role that writes questions.

rewards.py     its reward: the frozen solver's uncertainty, minus the repetition
               penalty, gated by the format
repetition.py  the repetition penalty: BLEU distances between a batch's questions,
               then clustering
train.py       its GRPO phase against the frozen solver, and writing the question pool
"""
