"""Training: the trainers every system's updates go through (TRL's split: this, and
`rzero.generation` apart). The modules that import TRL.

    grpo.py        GRPOConfig from a role's section, the options a recipe may not set,
                   train_grpo
    trainer.py     the GRPOTrainer it runs: TRL's, with the rollout buffer in its step
                   checkpoints, CPU log-probs and sorted micro-batches
    steps.py       step checkpoints inside a phase, SIGTERM that saves one (`Preempted`),
                   the state of rewards and callbacks across them
    logprobs.py    the completion log-probs on CPU: the prompts' shared prefix once, one
                   float32 log-softmax over the completion positions
    preference.py  DPO (TRL's DPOTrainer) and SFT (TRL's SFTTrainer) updates, the pairs'
                   log-probs, the update count
    offline.py     SPAG's offline self-play update (a Trainer with its own loss)
"""
