"""The Generator seam: what every backend (`rzero.generation.backends`) implements and every
caller (labelling, evaluation, the roles) uses: `generate(prompts, n, params)` returns n
completions per prompt, in prompt order. It lives below the engine so that labelling and
evaluation can take a generator without importing one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rzero.prompts.boxed import first_box_end
from rzero.prompts.chat import Prompt


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 disables top-k
    max_new_tokens: int = 256
    seed: int | None = 0
    min_new_tokens: int = 0  # suppress end-of-sequence before this many tokens (benchmarks)
    stop: tuple[str, ...] = ()  # end a completion after any of these strings (kept in the text)
    stop_after_boxed: bool = False  # end a completion once its first \\boxed{...} is closed


@dataclass
class GenerationStats:
    """Wall time spent inside the model and tokens produced, for overhead accounting."""

    seconds: float = 0.0
    new_tokens: int = 0
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, seconds: float, new_tokens: int) -> None:
        with self.lock:
            self.seconds += seconds
            self.new_tokens += new_tokens
            self.calls += 1


def cut_at_stop(text: str, stops: Sequence[str] = (), boxed: bool = False) -> str:
    """`text` up to and including the first stop string or closed first box, whichever
    comes first (the stop is kept, as transformers' `stop_strings` keeps it)."""
    ends = [i + len(s) for s in stops if (i := text.find(s)) >= 0]
    if boxed and (end := first_box_end(text)) is not None:
        ends.append(end)
    return text[: min(ends)] if ends else text


class GenerationError(RuntimeError):
    """A backend failed; the message names the backend and, for servers, the URL."""


class Generator(Protocol):
    stats: GenerationStats
    engine: str  # what samples: "hf", "vllm", "openai", or the servers behind the URLs

    def generate(
        self, prompts: Sequence[Prompt], n: int, params: SamplingParams
    ) -> list[list[str]]: ...

    def close(self) -> None:
        """Release what the backend holds outside this process (an engine's processes)."""
