"""LoRA for a role's training phase (a role's `lora:` mapping), through TRL's `peft_config`.

A role with `lora:` set trains low-rank adapters on frozen base weights: TRL wraps the
model in a `peft.PeftModel` and, for the KL reference, disables the adapter instead of
keeping a second model. What leaves the phase is a full checkpoint all the same:
`save_lora` writes the merged weights (W + (alpha/r)·B·A in every adapted layer) where the
phase's checkpoint goes, so `from_pretrained`, the frozen solver's votes and `vllm serve`
read it like any other, and the adapter itself beside them in ``ADAPTER_DIR``.

On CPU the rollouts sample with `rzero.generation.decoding` on a copy of the weights; with an
adapter that copy is refreshed from `merged_parameters`, the adapted layers' effective
weights, so the samples come from the model being trained (TRL's own vLLM sync merges the
adapter the same way).

peft is an extra (`make setup EXTRAS=peft`), imported only here, lazily.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

ADAPTER_DIR = "adapter"  # inside a LoRA phase's checkpoint: the adapter alone (peft format)


def lora_config(spec: Mapping[str, Any]):
    """peft's `LoraConfig` of a role's `lora:` mapping (checked by the config: r, alpha,
    dropout, target_modules, use_rslora), for a causal LM. alpha defaults to 2r and
    target_modules to every linear layer but the output head (peft's ``all-linear``)."""
    from peft import LoraConfig

    r = int(spec["r"])
    return LoraConfig(
        r=r,
        lora_alpha=spec.get("alpha", 2 * r),
        lora_dropout=spec.get("dropout", 0.0),
        target_modules=spec.get("target_modules", "all-linear"),
        use_rslora=spec.get("use_rslora", False),
        bias="none",
        task_type="CAUSAL_LM",
    )


def _tuner_layers(model) -> list[tuple[str, Any]]:
    """(module path, layer) of every peft adapter layer inside `model`; none without peft."""
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError:
        return []
    return [(name, m) for name, m in model.named_modules() if isinstance(m, BaseTunerLayer)]


def has_adapter(model) -> bool:
    return bool(_tuner_layers(model))


def merged_parameters(model) -> Iterator[tuple[str, torch.Tensor]]:
    """`model`'s parameters under the base architecture's names, adapters merged: an
    adapted layer's ``weight`` is its base weight plus the active adapters' deltas
    (``get_delta_weight``), its ``lora_*`` tensors are left out, and the ``base_layer.``
    level peft inserts is dropped. Without adapters: `named_parameters` as they are. The
    model's own weights are not changed."""
    layers = dict(_tuner_layers(model))
    if not layers:
        yield from model.named_parameters()
        return
    with torch.no_grad():
        for path, layer in layers.items():
            base = layer.get_base_layer()
            weight = base.weight
            if not layer.merged and not layer.disable_adapters:
                for adapter in layer.active_adapters:
                    if adapter in layer.lora_A:
                        weight = weight + layer.get_delta_weight(adapter).to(weight.dtype)
            yield f"{path}.weight", weight
            if getattr(base, "bias", None) is not None:
                yield f"{path}.bias", base.bias
        for name, p in model.named_parameters():
            owner = next((path for path in layers if name.startswith(path + ".")), None)
            if owner is None:
                yield name, p


def save_lora(trainer, tokenizer, tmp: Path) -> None:
    """Into the (temporary) checkpoint dir `tmp`, on the main process: the adapter in
    `ADAPTER_DIR` (peft's adapter_config.json + adapter_model.safetensors), then the merged
    model and the tokenizer at the top, as a full-weight phase saves them."""
    from rzero.engine.models import quiet_save

    model = trainer.accelerator.unwrap_model(trainer.model)
    with quiet_save():
        model.save_pretrained(str(tmp / ADAPTER_DIR))
        merged = model.merge_and_unload()  # in place: the phase ends with this save
        merged.save_pretrained(str(tmp))
    tokenizer.save_pretrained(tmp)
