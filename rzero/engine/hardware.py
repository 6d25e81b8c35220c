"""What a machine computes per second, for `rzero plan --hardware H`: each figure with the
source it comes from, printed beside the estimate.

A run's time is estimated from two throughputs per device:
- generation, in tokens per second of a vLLM-class engine at full batch for a model of one
  billion parameters, scaled by 1/N for N billion (large-batch decoding does about 2N FLOPs
  per token, so at a fixed utilisation it slows in proportion to N); HF `generate` (TRL's
  rollouts without vLLM) is taken as `HF_SLOWDOWN` times slower;
- training, in FLOP/s: the GPU's dense bf16 peak times an assumed model-FLOPs utilisation;
  a token trained costs 6N FLOPs (forward and backward), a forward alone (the old policy's
  or the KL reference's log-probabilities) 2N.
Every phase also pays a fixed cost (loading the model, starting an engine).

`cpu-2` is this project's CPU machine (2 cores), whose three figures are fitted to measured
phase times of `configs/tiny.yaml`, in tokens counted at their maximum length (so the fit
absorbs how often a completion stops early at that scale).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# vLLM's launch post (June 2023): "up to 24x higher throughput than HF Transformers"; taken
# as 10x, since TRL batches its rollouts
HF_SLOWDOWN = 10.0
HF_SLOWDOWN_SOURCE = "vLLM's launch post: up to 24x HF Transformers' throughput; 10x assumed"


@dataclass(frozen=True)
class Device:
    """One accelerator (or the whole CPU machine) and its stated throughputs."""

    name: str
    gen_tokens_per_s_1b: float  # generated tokens/s for a 1B-parameter model, full batch
    gen_source: str
    train_flops: float  # effective training FLOP/s (peak x utilisation)
    train_source: str
    phase_seconds: float  # the fixed cost of a phase
    phase_source: str
    hf_engine: bool = False  # every generation runs through HF generate (CPU)


# DeepSeek-R1-Distill-Qwen-7B, vLLM default config, one A100 80GB: 3,363 output tokens/s
# (morphllm.com "vLLM Benchmarks", 2026); Llama 3.1 8B bf16 on one H100 80GB: ~12,500 tok/s
_A100_GEN = 3363 * 7.6  # tokens/s x billions of parameters
_H100_GEN = 12500 * 8.0
_MFU = 0.30
_MFU_SOURCE = "assumed model-FLOPs utilisation 0.30 (HF Trainer, ZeRO-2, gradient checkpointing)"
_GPU_PHASE = 120.0
_GPU_PHASE_SOURCE = "assumed: loading a checkpoint and starting vLLM, 2 min per phase"

DEVICES: dict[str, Device] = {
    "A100-40G": Device(
        "A100-40G",
        _A100_GEN * 0.8,
        "3,363 tok/s for a 7.6B model on an A100-80G (morphllm.com vLLM benchmarks), "
        "x0.8 for the 40 GB card's smaller KV cache (assumed)",
        312e12 * _MFU,
        f"312 TFLOP/s dense bf16 (NVIDIA A100 datasheet); {_MFU_SOURCE}",
        _GPU_PHASE,
        _GPU_PHASE_SOURCE,
    ),
    "A100-80G": Device(
        "A100-80G",
        _A100_GEN,
        "3,363 tok/s for a 7.6B model (DeepSeek-R1-Distill-Qwen-7B, morphllm.com vLLM benchmarks)",
        312e12 * _MFU,
        f"312 TFLOP/s dense bf16 (NVIDIA A100 datasheet); {_MFU_SOURCE}",
        _GPU_PHASE,
        _GPU_PHASE_SOURCE,
    ),
    "H100-80G": Device(
        "H100-80G",
        _H100_GEN,
        "~12,500 tok/s for Llama 3.1 8B bf16 (morphllm.com vLLM benchmarks)",
        989e12 * _MFU,
        f"989 TFLOP/s dense bf16 (NVIDIA H100 SXM datasheet); {_MFU_SOURCE}",
        _GPU_PHASE,
        _GPU_PHASE_SOURCE,
    ),
    "H200": Device(
        "H200",
        _H100_GEN * 1.4,
        "the H100's ~12,500 tok/s for an 8B model x1.4 for 4.8 TB/s of memory against "
        "3.35 TB/s (NVIDIA datasheets; decoding is bandwidth-bound)",
        989e12 * _MFU,
        f"989 TFLOP/s dense bf16 (NVIDIA H200 datasheet); {_MFU_SOURCE}",
        _GPU_PHASE,
        _GPU_PHASE_SOURCE,
    ),
}

# fitted by scripts/calibrate_plan.py to the 11 phase times of `make iterate`
# (configs/tiny.yaml, SmolLM2-135M, bf16 compute) on an Intel Xeon with AMX, 2 cores, nothing
# else running, on 2026-12-05: every phase within 20 % of its measured time, the run 808 s
# fitted against 822 s measured. Another CPU (no AMX: float32 compute) is slower.
_CPU_SOURCE = "fitted to make iterate (configs/tiny.yaml) on an Intel Xeon with AMX, 2 cores"
CPU_2 = Device(
    "cpu-2",
    gen_tokens_per_s_1b=666.3 * 0.135,  # 666 tokens/s for the 135M model, HF generate
    gen_source=_CPU_SOURCE,
    train_flops=0.3909e12,
    train_source=_CPU_SOURCE,
    phase_seconds=6.5,
    phase_source=_CPU_SOURCE,
    hf_engine=True,
)


@dataclass(frozen=True)
class Hardware:
    """`count` devices of one kind on one machine."""

    device: Device
    count: int

    @property
    def name(self) -> str:
        return self.device.name if self.device.hf_engine else f"{self.count}x{self.device.name}"

    def gen_tokens_per_s(self, params_b: float, hf: bool = False) -> float:
        """One device's generation throughput for a model of `params_b` billion parameters
        (`hf`: through HF generate)."""
        rate = self.device.gen_tokens_per_s_1b / params_b
        return rate / HF_SLOWDOWN if hf and not self.device.hf_engine else rate


def parse_hardware(text: str) -> Hardware:
    """'8xA100-40G', '4xH100-80G', 'cpu-2' -> Hardware; ValueError naming the choices."""
    if text.strip().lower() == "cpu-2":
        return Hardware(CPU_2, 1)
    m = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\S+)\s*", text)
    kinds = {k.lower(): d for k, d in DEVICES.items()}
    if m and m.group(2).lower() in kinds and int(m.group(1)) >= 1:
        return Hardware(kinds[m.group(2).lower()], int(m.group(1)))
    raise ValueError(
        f"--hardware {text!r}: expected cpu-2 or COUNTxGPU with GPU one of "
        f"{', '.join(DEVICES)} (e.g. 8xA100-40G)"
    )


def params_billions(model_name: str) -> float | None:
    """The parameter count a model's name states ('Qwen/Qwen3-4B-Base' -> 4.0,
    'embedded:smollm2-135m-instruct' -> 0.135); None when it states none."""
    found = re.findall(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])", model_name)
    if not found:
        return None
    value, unit = found[-1]
    return float(value) * (1.0 if unit.lower() == "b" else 1e-3)
