"""One GRPO step under DeepSpeed ZeRO-2 and ZeRO-3 on CPU, through rzero.training.grpo.train_grpo,
directly and through `accelerate launch` with configs/accelerate/deepspeed_zero2.yaml.

Each run is a subprocess: DeepSpeed initialises torch.distributed (gloo on CPU, world size 1),
which must not leak into the test process. The child reports the ZeRO stage DeepSpeed was
initialised with and how many parameter tensors the step changed in a result file of its own
(rank_report), not on the stdout it shares with its launcher.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rank_report import STANDALONE_RENDEZVOUS, child_env, read_results

from rzero.config import load_config
from rzero.engine.launch import accelerate_command

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib, sys
import torch
import deepspeed
from rank_report import report
from transformers import AutoModelForCausalLM, AutoTokenizer
from rzero.config import GRPOSection, ModelConfig
from rzero.training.grpo import train_grpo

checkpoint, ds_config, out_dir, bf16 = sys.argv[1], sys.argv[2] or None, sys.argv[3], sys.argv[4] == "bf16"
# DeepSpeed JIT-compiles a C++ shared-memory all-reduce for CPU ranks on one host at its
# first init (about 2 minutes on 2 cores); with a single rank there is nothing to reduce.
# (`import deepspeed.comm.torch as m` would bind the torch package deepspeed.comm re-exports)
importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
stages = []
_initialize = deepspeed.initialize

def recording_initialize(*args, **kwargs):
    stages.append(kwargs["config_params"]["zero_optimization"]["stage"])
    return _initialize(*args, **kwargs)

deepspeed.initialize = recording_initialize  # accelerate looks it up at prepare() time

tokenizer = AutoTokenizer.from_pretrained(checkpoint)
model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
before = {n: p.detach().clone() for n, p in model.named_parameters()}

def parity(prompts, completions, completion_ids, **kwargs):
    # TRL lays a group's completions side by side, so each group of 4 is rewarded 0, 1, 0, 1:
    # the group-normalised advantages are never all zero, whatever the model samples
    return [float(i % 2) for i in range(len(completion_ids))]

role = GRPOSection(steps=1, group_size=4, prompts_per_step=2, learning_rate=1e-2, beta=0.0,
                   epsilon=0.2, epsilon_high=0.3, max_completion_length=8, temperature=1.0)
rows = [{"prompt": [{"role": "user", "content": "What is 2+3?"}]},
        {"prompt": [{"role": "user", "content": "Name a prime."}]}]
stats = train_grpo(model, tokenizer, rows, [parity], role, out_dir,
                   model_cfg=ModelConfig(dtype="bfloat16" if bf16 else "float32"),
                   deepspeed=ds_config)
params = dict(model.named_parameters())
with deepspeed.zero.GatheredParameters(list(params.values())):  # a no-op below ZeRO-3
    # compared in the dtype training left them in: bf16 casts alone are not a change
    changed = sum(not torch.equal(before[n].to(p.dtype), p.detach().cpu())
                  for n, p in params.items())
report({"stages": stages, "changed": changed, "tensors": len(before), "steps": stats.steps})
"""


def _result(proc: subprocess.CompletedProcess, results: Path) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result,) = read_results(results, world=1)
    return result


def _run_child(
    tmp_path: Path, checkpoint: Path, ds_config: str, *, cpu: bool, bf16: bool = False
) -> dict:
    """One process, rank 0 of a world of 1, started by torchrun."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    results = tmp_path / "results"
    # --standalone: torchrun's agent binds a free port itself and passes it to the child
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "1",
            str(child),
            str(checkpoint),
            str(ROOT / "configs" / "deepspeed" / ds_config),
            str(tmp_path / "out"),
            "bf16" if bf16 else "fp32",
        ],
        cwd=ROOT,
        env=child_env(results, **(_CPU_ENV if cpu else {})),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return _result(proc, results)


# CPU only, even on a GPU machine: DeepSpeed's CPU accelerator and a gloo process group
_CPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "DS_ACCELERATOR": "cpu"}


@pytest.mark.slow
@pytest.mark.parametrize(("ds_config", "stage"), [("zero2.json", 2), ("zero3.json", 3)])
def test_grpo_step_under_zero_changes_the_parameters(tiny_checkpoint, tmp_path, ds_config, stage):
    result = _run_child(tmp_path, tiny_checkpoint, ds_config, cpu=True)
    assert result["stages"] == [stage]  # one engine (beta = 0: no reference model)
    assert result["steps"] == 1
    # every tensor gets a gradient (the embedding is tied to the head) and the lr is large
    assert result["changed"] == result["tensors"]


@pytest.mark.slow
def test_accelerate_launch_with_the_zero2_config(tiny_checkpoint, tmp_path):
    """The command accelerate_command builds, run for real: accelerate reads
    configs/accelerate/deepspeed_zero2.yaml, which points the Trainer at zero2.json."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    # the command's --main_process_port (the default) goes unused: the rendezvous is
    # standalone, on a port torchrun's agent binds itself
    argv, env = accelerate_command(
        load_config(None, ["model.dtype=float32"]),
        num_processes=1,
        gpus=(),
        accelerate_config="configs/accelerate/deepspeed_zero2.yaml",
        entry=[str(child)],
        script_args=[str(tiny_checkpoint), "", str(tmp_path / "out"), "fp32"],
    )
    results = tmp_path / "results"
    proc = subprocess.run(
        argv,
        cwd=ROOT,
        env=child_env(results, **(_CPU_ENV | env | STANDALONE_RENDEZVOUS)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = _result(proc, results)
    assert result["stages"] == [2]
    assert result["changed"] == result["tensors"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_zero2_bf16_grpo_step_on_one_gpu(tiny_checkpoint, tmp_path):
    result = _run_child(tmp_path, tiny_checkpoint, "zero2.json", cpu=False, bf16=True)
    assert result["stages"] == [2]
    assert result["changed"] == result["tensors"]
