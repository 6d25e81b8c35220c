"""The machinery that runs models, knowing no algorithm (no role, loop or run folder).

generation.py   the backends behind the Generator seam (`rzero.prompts.generator`):
                in-process transformers, OpenAI-compatible servers, vLLM
decoding.py     rzero's own batched decoder (pre-allocated KV cache); sampling.py: the
                token sampler it uses
grpo.py         the only module that imports TRL: GRPOConfig from a role's section,
                the options a recipe may not set, train_grpo
models.py       loading, the embedded GGUF model, dtypes per CPU
serving.py      model servers (start, health, stop); replicas.py: the frozen solver's
                replicas; watchdog.py: engine processes die with their owner
launch.py       the relaunch under `accelerate launch`; distributed.py: ranks, on_main
trackers.py     run.report_to: TensorBoard, wandb, trackio
"""
