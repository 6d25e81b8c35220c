"""The machinery under sampling and training, knowing no algorithm (no role, loop or run
folder): models, processes, servers, trackers.

    models.py       loading, the embedded GGUF model, dtypes per CPU
    lora.py         LoRA adapters: peft configs, the merged weights rollouts sample with
    serving.py      model servers (start, health, stop)
    watchdog.py     engine processes die with their owner
    launch.py       the relaunch under `accelerate launch`, placement of processes on GPUs
    distributed.py  ranks, on_main, the process group
    hub.py          pushing a checkpoint to the Hugging Face hub
    trackers.py     run.report_to: TensorBoard, wandb, MLflow, trackio
    hardware.py     throughputs of GPUs and of the calibrated CPU, with their sources
    logs.py         the libraries' warnings off at their source, unless --verbose
"""
