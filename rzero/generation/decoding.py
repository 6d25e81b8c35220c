"""A compact decode loop for in-process generation on CPU, and its seam into TRL's rollouts.

`decode` runs the model's own forward (`model(ids, cache=..., position_ids=..., mask)`) and
differs from `model.generate` where the profile of a CPU step said time went:

- the KV cache is allocated once per batch (`PreallocatedCache`): each step writes its key and
  value in place instead of `torch.cat`-ing the whole cache (a copy that grows every step);
- the next token comes from `rzero.generation.sampling.next_tokens`, which draws from the kept tokens
  only instead of one random number per vocabulary entry;
- a row stops at EOS, at a stop string or after its boxed answer; finished rows leave the
  batch once a quarter of it is done, and waiting prompts take their places (continuous
  batching), so no step is spent on a finished sequence for long and the batch stays full;
- the samples of one prompt share its prefill, and `length_order` keeps left padding small.

`rollouts_through_decode` puts the loop behind `model.generate` for TRL's GRPOTrainer (which
calls `unwrapped_model.generate(input_ids=, attention_mask=, generation_config=)`), the way
transformers itself installs a `custom_generate`; a configuration the loop does not cover
falls through to transformers' `generate`.
"""

from __future__ import annotations

import copy
import functools
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers.cache_utils import Cache, CacheLayerMixin, DynamicCache

from rzero.engine.lora import merged_parameters
from rzero.generation.interface import cut_at_stop
from rzero.generation.sampling import next_tokens
from rzero.prompts.boxed import first_box_end

# compact the batch when this share of its rows has finished, and let waiting prompts join
# when this share of the batch is free (a compaction copies the cache once, about one step's
# worth of time, and a join is one prefill; a finished row costs 1/batch of every step)
COMPACT_SHARE = 0.25


def supports_decode(model) -> bool:
    """A model on CPU (the only place the loop is measured; GPUs sample with vLLM) of a
    decoder-only architecture whose layers all attend over the full cache (no sliding
    window), so the 4-D mask built here is the whole story."""
    config = model.config
    if model.device.type != "cpu":
        return False
    if config.model_type == "llama":
        return True
    return config.model_type in ("qwen2", "qwen3") and set(config.layer_types) == {"full_attention"}


# ---------------------------------------------------------------- the cache


class PreallocatedLayer(CacheLayerMixin):
    """One layer's keys and values in [rows, kv_heads, capacity, head_dim] buffers, zeroed
    once. A decode step writes column `length` of the first `rows` rows in place; the loop
    compacts rows, drops leading columns and inserts prefilled prompts."""

    is_sliding = False

    def __init__(self, rows: int, capacity: int):
        super().__init__()
        self.max_rows, self.capacity = rows, capacity
        self.rows = 0  # rows in use: the first `rows` of the buffers
        self.length = 0  # columns in use: the next step writes column `length`

    def lazy_initialization(self, key_states, value_states) -> None:
        _, heads, _, dim = key_states.shape
        # zeros, not empty: masked columns are still multiplied by 0, and 0 * NaN is NaN
        self.k_buf = key_states.new_zeros(self.max_rows, heads, self.capacity, dim)
        self.v_buf = value_states.new_zeros(self.max_rows, heads, self.capacity, dim)
        self.device = key_states.device
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        start, end = self.length, self.length + key_states.shape[-2]
        self.k_buf[: self.rows, :, start:end] = key_states
        self.v_buf[: self.rows, :, start:end] = value_states
        self.length = end
        self.keys = self.k_buf[: self.rows, :, :end]
        self.values = self.v_buf[: self.rows, :, :end]
        return self.keys, self.values

    def insert(self, keys, values, end: int) -> None:
        """Append rows whose keys and values [new, kv_heads, width, head_dim] end at column
        `end`, which becomes the length of every row."""
        if not self.is_initialized:
            self.lazy_initialization(keys, values)
        rows = slice(self.rows, self.rows + keys.shape[0])
        self.k_buf[rows, :, end - keys.shape[2] : end] = keys
        self.v_buf[rows, :, end - keys.shape[2] : end] = values
        self.rows, self.length = rows.stop, end

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only `rows` (ascending), moved to the front."""
        end = self.length
        self.k_buf[: len(rows), :, :end] = self.k_buf[rows, :, :end]
        self.v_buf[: len(rows), :, :end] = self.v_buf[rows, :, :end]
        self.rows = len(rows)

    def drop_columns(self, count: int) -> None:
        """Forget the first `count` columns (no row in use reaches back that far)."""
        end, rows = self.length, slice(0, self.rows)
        self.k_buf[rows, :, : end - count] = self.k_buf[rows, :, count:end].clone()
        self.v_buf[rows, :, : end - count] = self.v_buf[rows, :, count:end].clone()
        self.length = end - count

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.capacity


class PreallocatedCache(Cache):
    def __init__(self, num_layers: int, rows: int, capacity: int):
        super().__init__(layers=[PreallocatedLayer(rows, capacity) for _ in range(num_layers)])

    def insert(self, prefilled: Cache, source: torch.Tensor, end: int) -> None:
        """Append row source[i] of `prefilled` (a prompt-only cache) for each i."""
        for layer, filled in zip(self.layers, prefilled.layers, strict=True):
            layer.insert(filled.keys[source], filled.values[source], end)

    def select_rows(self, rows: torch.Tensor) -> None:
        for layer in self.layers:
            layer.select_rows(rows)

    def drop_columns(self, count: int) -> None:
        for layer in self.layers:
            layer.drop_columns(count)


# ---------------------------------------------------------------- stopping


class StopCheck:
    """Where a completion ends besides EOS: after any of `stops`, or (`boxed`) once its first
    `\\boxed{…}` is closed. Only a token whose text holds a stop's last character can complete
    one, so the text is decoded for those rows only."""

    def __init__(self, tokenizer, stops: Sequence[str] = (), boxed: bool = False):
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.boxed = boxed
        self.window = max((len(s) for s in self.stops), default=0) + 8  # tokens >= 1 char
        last = {s[-1] for s in self.stops} | ({"}"} if boxed else set())
        texts = token_texts(tokenizer)
        # "\ufffd": a token holding part of a multi-byte character may complete it
        self.triggers = frozenset(
            i for i, t in enumerate(texts) if "\ufffd" in t or any(c in t for c in last)
        )

    def ends(self, ids: list[int]) -> bool:
        if ids[-1] not in self.triggers:
            return False
        if self.stops:
            tail = self.tokenizer.decode(ids[-self.window :])
            if any(s in tail for s in self.stops):
                return True
        return self.boxed and first_box_end(self.tokenizer.decode(ids)) is not None

    def cut(self, text: str) -> str:
        return cut_at_stop(text, self.stops, self.boxed)


@functools.lru_cache(maxsize=4)
def token_texts(tokenizer) -> list[str]:
    return tokenizer.batch_decode([[i] for i in range(len(tokenizer))])


# ---------------------------------------------------------------- the loop


def decode(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    min_new_tokens: int = 0,
    eos_ids: Sequence[int] = (),
    stop: StopCheck | None = None,
    batch_size: int = 0,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """New token ids for each prompt (token ids), in prompt order; a row that ended at EOS
    ends with its EOS token.

    At most `batch_size` rows (0: all) decode at once. Finished rows leave the batch once a
    quarter of it is done, and the next prompts, in the order given, take their places (give
    them sorted by length, `length_order`, so that little padding is needed).
    """
    new: list[list[int]] = [[] for _ in prompts]
    if not prompts or max_new_tokens < 1:
        return new
    queue = deque(range(len(prompts)))
    size = batch_size or len(prompts)
    eos = sorted(set(eos_ids))
    with torch.inference_mode():
        batch = _Batch(model, size, max(map(len, prompts)), max_new_tokens)
        first = [queue.popleft() for _ in range(min(size, len(queue)))]
        logits = batch.join([prompts[i] for i in first], first)
        done = [False] * len(first)
        while True:
            logits = logits.float()  # [B, V]
            young = [r for r, i in enumerate(batch.live) if len(new[i]) < min_new_tokens]
            if young and eos:  # EOS is not allowed before min_new_tokens
                logits[torch.tensor(young)[:, None], torch.tensor(eos)] = float("-inf")
            tokens = next_tokens(logits, temperature, top_k, top_p, generator)  # [B]
            for r, (i, t) in enumerate(zip(batch.live, tokens.tolist(), strict=True)):
                if not done[r]:
                    new[i].append(t)
                    done[r] = (
                        len(new[i]) == max_new_tokens
                        or t in eos
                        or (stop is not None and stop.ends(new[i]))
                    )
            finished = sum(done)
            if finished == len(done) and not queue:
                return new
            # ---- finished rows leave (before the buffers fill up, at the latest)
            if finished >= COMPACT_SHARE * len(done) or (finished and batch.full()):
                keep = [r for r, d in enumerate(done) if not d]
                batch.leave(keep)
                tokens, done = tokens[keep], [False] * len(keep)
            # ---- one step for the rows in the batch
            logits = batch.step(tokens) if batch.live else None
            # ---- waiting prompts join, a group at a time
            free = size - len(batch.live)
            if queue and (free >= COMPACT_SHARE * size or not batch.live):
                joining = [queue.popleft() for _ in range(min(free, len(queue)))]
                joined = batch.join([prompts[i] for i in joining], joining)
                logits = joined if logits is None else torch.cat([logits, joined])
                done += [False] * len(joining)


def length_order(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Indices of `prompts` by length, so that rows decoded together pad little, and
    identical prompts next to each other, so that they share a prefill."""
    return sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), prompts[i]))


class _Batch:
    """The rows decoding together: their KV cache and, per row, which columns are its own
    (`valid`), the position of its next token, its first column and its prompt index.

    Rows share one column counter `length`, never below the longest prompt: a joining prompt
    is written so that it ends at `length`. When the oldest row's first column is a quarter of
    `length` in, or the buffers are full, the leading columns are dropped.
    """

    def __init__(self, model, rows: int, longest_prompt: int, max_new_tokens: int):
        self.model = model
        self.device = model.device
        room = longest_prompt + max_new_tokens  # the most columns one row spans
        self.capacity = room + room // 2  # the rest is slack between drops
        self.floor = longest_prompt
        self.cache = PreallocatedCache(
            model.config.get_text_config().num_hidden_layers, rows, self.capacity
        )
        self.valid = torch.zeros(0, self.capacity, dtype=torch.bool, device=self.device)
        self.position = torch.zeros(0, dtype=torch.long, device=self.device)  # [B]
        self.start = torch.zeros(0, dtype=torch.long, device=self.device)  # [B]
        self.live: list[int] = []
        self.length = longest_prompt

    def join(self, prompts: list[Sequence[int]], ids: list[int]) -> torch.Tensor:
        """Prefill `prompts` (each distinct one once) and append them as rows; returns their
        next-token logits [new, V]."""
        distinct: dict[tuple[int, ...], int] = {}
        source = torch.tensor(
            [distinct.setdefault(tuple(p), len(distinct)) for p in prompts], device=self.device
        )  # [new]: row -> distinct prompt
        width = max(len(p) for p in distinct)
        input_ids = torch.zeros(len(distinct), width, dtype=torch.long)  # [U, P]
        own = torch.zeros(len(distinct), width, dtype=torch.bool)  # [U, P]: not padding
        for r, p in enumerate(distinct):
            input_ids[r, width - len(p) :] = torch.tensor(p)
            own[r, width - len(p) :] = True
        input_ids, own = input_ids.to(self.device), own.to(self.device)
        positions = (own.cumsum(-1) - 1).clamp(min=0)  # [U, P]
        # causal over real tokens; a pad query attends to itself only (no fully-masked row)
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
        eye = torch.eye(width, dtype=torch.bool, device=self.device)
        mask = (causal & own[:, None, None, :]) | eye  # [U, 1, P, P]
        prefilled = DynamicCache(config=self.model.config)
        logits = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            cache=prefilled,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        end = self.length  # >= floor >= width
        self.cache.insert(prefilled, source, end)
        valid = torch.zeros(len(prompts), self.capacity, dtype=torch.bool, device=self.device)
        valid[:, end - width : end] = own[source]
        lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        self.valid = torch.cat([self.valid, valid])
        self.position = torch.cat([self.position, lengths])
        self.start = torch.cat([self.start, end - lengths])
        self.live += ids
        return logits[source]

    def leave(self, keep: list[int]) -> None:
        rows = torch.tensor(keep, dtype=torch.long, device=self.device)
        self.cache.select_rows(rows)
        self.valid, self.position, self.start = (
            self.valid[rows],
            self.position[rows],
            self.start[rows],
        )
        self.live = [self.live[r] for r in keep]
        if not self.live or int(self.start.min()) >= self.length // 4:
            self.drop_columns()

    def full(self) -> bool:
        return self.length + 1 >= self.capacity

    def drop_columns(self) -> None:
        """Forget the columns before the oldest row's first, keeping `length` >= floor."""
        first = min(int(self.start.min()) if self.live else self.length, self.length - self.floor)
        if first <= 0:
            return
        self.cache.drop_columns(first)
        kept = self.valid[:, first : self.length].clone()
        self.valid[:, :] = False
        self.valid[:, : self.length - first] = kept
        self.start -= first
        self.length -= first

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed each row its new token [B]; returns the next logits [B, V]."""
        if self.length == self.capacity:
            self.drop_columns()
        self.valid[:, self.length] = True
        logits = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.valid[:, None, None, : self.length + 1],
            position_ids=self.position[:, None],
            cache=self.cache,
            use_cache=True,
        ).logits[:, -1]
        self.position += 1
        self.length += 1
        return logits


# ---------------------------------------------------------------- TRL's rollouts


def _sampling_args(config) -> dict | None:
    """`decode` arguments for a transformers GenerationConfig, or None when it asks for
    something the loop does not do (beams, penalties, min-p, several returns...)."""
    unsupported = (
        (config.num_beams or 1) > 1
        or (config.num_return_sequences or 1) > 1
        or config.repetition_penalty not in (None, 1.0)
        or config.min_p is not None
        or config.no_repeat_ngram_size
        or config.bad_words_ids
        or config.suppress_tokens
        or config.stop_strings
        or config.max_new_tokens is None
    )
    if unsupported:
        return None
    eos = config.eos_token_id
    return {
        "max_new_tokens": config.max_new_tokens,
        "temperature": (config.temperature or 1.0) if config.do_sample else 0.0,
        "top_k": config.top_k or 0,
        "top_p": config.top_p or 1.0,
        "min_new_tokens": config.min_new_tokens or 0,
        "eos_ids": [] if eos is None else [eos] if isinstance(eos, int) else list(eos),
    }


def generate_like_hf(
    model, sampler, input_ids=None, attention_mask=None, generation_config=None, **kwargs
):
    """`model.generate(input_ids=, attention_mask=, generation_config=)` through `decode` on
    `sampler` (the model itself, or its copy in the generation dtype): the prompt (with its
    left padding) followed by the new tokens, right-padded with the pad token."""
    args = _sampling_args(generation_config) if generation_config is not None else None
    if args is None or kwargs or input_ids is None:
        return type(model).generate(
            model,
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=generation_config,
            **kwargs,
        )
    if sampler is not model:
        sync_weights(model, sampler)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    prompts = [ids[m.bool()].tolist() for ids, m in zip(input_ids, attention_mask, strict=True)]
    new = decode(sampler, prompts, **args)
    pad = generation_config.pad_token_id
    width = max(len(ids) for ids in new)
    out = torch.full((len(new), width), pad, dtype=input_ids.dtype)  # [B, T]
    for r, ids in enumerate(new):
        out[r, : len(ids)] = torch.tensor(ids, dtype=input_ids.dtype)
    return torch.cat([input_ids, out.to(input_ids.device)], dim=1)  # [B, P + T]


def sync_weights(source, target) -> None:
    """Copy `source`'s parameters into `target` (same architecture, any dtype); a `source`
    that trains LoRA adapters gives its merged weights (`lora.merged_parameters`)."""
    params = dict(target.named_parameters())
    with torch.no_grad():
        for name, p in merged_parameters(source):
            params[name].copy_(p)


def generation_copy(model, dtype: torch.dtype, *, copy_always: bool = False):
    """The model itself when it is already in `dtype` (and `copy_always` is off), else a
    frozen copy in `dtype`. A model that will train LoRA adapters needs the copy: `decode`
    reads each layer's ``weight``, which under peft is the base weight without the
    adapter."""
    if model.dtype == dtype and not copy_always:
        return model
    sampler = copy.deepcopy(model).to(dtype).eval()
    sampler.requires_grad_(False)
    return sampler


@contextmanager
def rollouts_through_decode(model, dtype: torch.dtype, *, lora: bool = False) -> Iterator[None]:
    """While open, `model.generate` samples with `decode` on a `dtype` copy of the weights,
    refreshed from `model` at every call; `model`'s own weights (fp32 masters) are untouched.
    `lora`: the trainer will wrap `model` in LoRA adapters, so the copy is always made and
    refreshed with the merged weights."""
    if not supports_decode(model):
        yield
        return
    sampler = generation_copy(model, dtype, copy_always=lora)
    model.generate = functools.partial(generate_like_hf, model, sampler)
    try:
        yield
    finally:
        del model.generate
