"""R-Zero's solver (seed 000 §4.2): the role that answers, trained on its own vote's labels.

dataset.py  the pool labelled by the frozen solver's majority vote, the band filter
rewards.py  its GRPO reward: agreement of its boxed answer with the pseudo-label
train.py    its GRPO phase on the kept questions
"""
