"""GPU smoke test: a random ~100M-parameter Llama through rzero's sampling and GRPO paths.

Run by scripts/gpu_smoke.sh (which installs the missing packages offline first); runs alone
where rzero and its imports are installed. Downloads nothing: the tokenizer is a byte-level
BPE trained here on synthetic math text, with a ChatML chat template.

Measures, on one device:
- the `hf` backend: tokens/s sampling a batch of 40 prompts x 128 new tokens;
- one GRPO step of the challenger: rollouts, the reward with m votes per question from a
  frozen-solver HFGenerator (a second copy of the model), repetition penalty, update;
- one GRPO step of the solver: rollouts, the accuracy reward against pseudo-labels, update;
with seconds per step and peak GPU memory (torch.cuda.max_memory_allocated) for each.

Random weights never write `<question>…</question>` or `\\boxed{}`, so every challenger
completion would be gated before the solver is asked anything; for a meaningful timing the
reward here replaces each malformed completion with a well-formed templated question before
scoring it (the update itself is unchanged). That substitution is the smoke test's only
departure from the real challenger phase.

Environment: SMOKE_DEVICE=cuda|cpu (default cuda), SMOKE_TINY=1 (a tiny model and short
sequences: proves the code path on CPU in about a minute), SMOKE_OUT=path.json (results).
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Size:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    batch: int  # hf backend batch (generation.batch_size)
    new_tokens: int  # tokens per sequence in the throughput run and GRPO completions
    prompts_per_step: int
    votes: int  # m
    corpus_lines: int


FULL = Size(
    hidden=768,
    layers=15,
    heads=12,
    kv_heads=4,
    intermediate=2048,
    vocab=8192,
    batch=40,
    new_tokens=128,
    prompts_per_step=8,
    votes=10,
    corpus_lines=40_000,
)
TINY = Size(
    hidden=64,
    layers=2,
    heads=4,
    kv_heads=2,
    intermediate=128,
    vocab=400,
    batch=8,
    new_tokens=16,
    prompts_per_step=2,
    votes=2,
    corpus_lines=2_000,
)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def synthetic_corpus(lines: int, seed: int = 0) -> list[str]:
    """Math-flavoured text plus rzero's own prompts, so common words become single tokens."""
    from rzero.prompts.challenger import challenger_chat
    from rzero.prompts.solver import solver_chat

    rng = random.Random(seed)
    words = (
        "what is the sum product of and a number if then find how many integers "
        "solve for x y n let be such that compute value answer prime divisible by "
        "remainder when divided square root equation triangle area circle radius "
        "probability"
    ).split()
    ops = ["+", "-", "*", "/", "=", "^"]
    out = [m["content"] for m in challenger_chat()]
    out += [m["content"] for m in solver_chat("What is 2 + 3?")]
    for _ in range(lines):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        out.append(
            f"<question>{sentence.capitalize()} {a} {rng.choice(ops)} {b}?</question> "
            f"So the answer is \\boxed{{{a + b}}}. $x^2 + {a}x = {b}$"
        )
    return out


def build_tokenizer(size: Size, path: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=size.vocab,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(synthetic_corpus(size.corpus_lines), trainer=trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token="<|endoftext|>",
    )
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(path)
    return hf


def build_checkpoint(size: Size, tokenizer, path: Path, dtype: torch.dtype) -> int:
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config).to(dtype)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


class FormattedChallengerReward:
    """The real ChallengerReward, fed well-formed questions where the random model wrote none."""

    __name__ = "challenger"

    def __init__(self, reward):
        self.reward = reward
        self.substituted = 0

    def __call__(self, prompts, completions, **kwargs):
        from rzero.labeling.answers import extract_boxed, extract_question
        from rzero.prompts.chat import completion_text

        fixed = []
        for c in completions:
            text = completion_text(c)
            if extract_question(text) is None or extract_boxed(text) is None:
                rng = random.Random(text)
                a, b = rng.randint(1, 99), rng.randint(1, 99)
                text = f"<question>What is {a} + {b}?</question> The answer is \\boxed{{{a + b}}}."
                self.substituted += 1
            fixed.append(text)
        return self.reward(prompts, fixed, **kwargs)


def peak_memory(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None


def reset_peak(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def main() -> int:
    t_start = time.perf_counter()
    device = os.environ.get("SMOKE_DEVICE", "cuda")
    size = TINY if os.environ.get("SMOKE_TINY") == "1" else FULL
    if device == "cuda" and not torch.cuda.is_available():
        print(
            "error: SMOKE_DEVICE=cuda but torch sees no GPU (set SMOKE_DEVICE=cpu to try "
            "the code path on CPU)",
            file=sys.stderr,
        )
        return 2
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    dtype_name = "bfloat16" if dtype == torch.bfloat16 else "float32"

    import transformers
    import trl

    from rzero.challenger.rewards import ChallengerReward
    from rzero.config import GRPOSection, load_config
    from rzero.engine.models import load_model, load_tokenizer
    from rzero.generation.backends import HFGenerator
    from rzero.generation.interface import SamplingParams
    from rzero.labeling.voting import FrozenSolver
    from rzero.prompts.challenger import challenger_chat
    from rzero.prompts.solver import solver_chat
    from rzero.solver.rewards import SolverReward
    from rzero.training.grpo import train_grpo

    work = Path(tempfile.mkdtemp(prefix="rzero-smoke-"))
    ckpt = work / "model"
    name = torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({os.cpu_count()} cores)"
    print(
        f"rzero GPU smoke on {name}: torch {torch.__version__}, transformers "
        f"{transformers.__version__}, trl {trl.__version__}",
        flush=True,
    )

    # -- tokenizer and model, built here
    t0 = time.perf_counter()
    tokenizer = build_tokenizer(size, ckpt)
    n_params = build_checkpoint(size, tokenizer, ckpt, dtype)
    print(
        f"built: Llama {n_params / 1e6:.1f}M params ({dtype_name}), BPE vocab "
        f"{len(tokenizer)}, in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    rows_out: list[dict] = []

    # -- hf backend throughput
    model = load_model(str(ckpt), dtype=dtype_name, device=device)
    tokenizer = load_tokenizer(str(ckpt))
    gen = HFGenerator(model, tokenizer, batch_size=size.batch)
    pairs = [(a, a * 7 % 13) for a in range(size.batch)]
    questions = [f"What is {a} + {b}?" for a, b in pairs]
    prompts = [solver_chat(q) for q in questions]
    params = SamplingParams(temperature=1.0, max_new_tokens=size.new_tokens, seed=0)
    gen.generate(prompts[:2], 1, SamplingParams(max_new_tokens=4))  # warm-up: kernels, caches
    gen.stats.seconds = gen.stats.new_tokens = 0
    reset_peak(device)
    gen.generate(prompts, 1, params)
    tok_s = gen.stats.new_tokens / gen.stats.seconds
    rows_out.append(
        {
            "what": f"hf generate {size.batch} x {size.new_tokens} tokens",
            "result": f"{gen.stats.new_tokens} tokens in {gen.stats.seconds:.2f} s = "
            f"{tok_s:,.0f} tokens/s",
            "tokens_per_s": tok_s,
            "peak_gib": peak_memory(device),
        }
    )
    print(f"hf backend: {tok_s:,.0f} tokens/s", flush=True)
    del gen, model

    # -- GRPO, one step per role, with the run's config machinery
    G_CHALLENGER, G_SOLVER = 4, 5
    cfg = load_config(
        None,
        [
            f"model.dtype={dtype_name}",
            f"labeling.num_votes={size.votes}",
            f"labeling.max_new_tokens={size.new_tokens}",
            f"generation.batch_size={size.batch}",
        ],
    )

    def settings(group_size: int) -> GRPOSection:
        return GRPOSection(
            steps=1,
            group_size=group_size,
            prompts_per_step=size.prompts_per_step,
            learning_rate=1e-6,
            beta=0.01,
            epsilon=0.2,
            epsilon_high=0.3,
            max_completion_length=size.new_tokens,
            temperature=1.0,
        )

    # challenger: rewarded by a frozen copy of the model answering m times per question
    solver = HFGenerator(
        load_model(str(ckpt), dtype=dtype_name, device=device),
        load_tokenizer(str(ckpt)),
        batch_size=size.batch,
    )
    frozen = FrozenSolver(solver, solver_chat, cfg.labeling)
    reward = FormattedChallengerReward(
        ChallengerReward(frozen, cfg.challenger, work / "steps.jsonl", 1, seed=0)
    )
    model = load_model(str(ckpt), dtype=dtype_name, device=device)
    reset_peak(device)
    stats = train_grpo(
        model,
        tokenizer,
        [{"prompt": challenger_chat()}],
        [reward],
        settings(G_CHALLENGER),
        work / "trainer_challenger",
        seed=1,
        model_cfg=cfg.model,
        desc="challenger",
    )
    n = size.prompts_per_step * G_CHALLENGER
    rows_out.append(
        {
            "what": f"GRPO challenger step ({size.prompts_per_step} x G={G_CHALLENGER}, "
            f"m={size.votes} votes)",
            "result": f"{stats.seconds_total:.1f} s/step, of which reward "
            f"{reward.reward.seconds:.1f} s ({reward.substituted}/{n} "
            f"questions substituted)",
            "seconds": stats.seconds_total,
            "peak_gib": peak_memory(device),
        }
    )
    print(f"challenger step: {stats.seconds_total:.1f} s", flush=True)
    del model, solver, reward

    # solver: questions with pseudo-labels, rewarded by answer equivalence
    model = load_model(str(ckpt), dtype=dtype_name, device=device)
    rows = [
        {"prompt": solver_chat(q), "label": str(a + b)}
        for q, (a, b) in zip(questions, pairs, strict=True)
    ][: size.prompts_per_step]
    reset_peak(device)
    stats = train_grpo(
        model,
        tokenizer,
        rows,
        [SolverReward("accuracy")],
        settings(G_SOLVER),
        work / "trainer_solver",
        seed=2,
        model_cfg=cfg.model,
        desc="solver",
    )
    rows_out.append(
        {
            "what": f"GRPO solver step ({size.prompts_per_step} x G={G_SOLVER})",
            "result": f"{stats.seconds_total:.1f} s/step",
            "seconds": stats.seconds_total,
            "peak_gib": peak_memory(device),
        }
    )
    print(f"solver step: {stats.seconds_total:.1f} s", flush=True)

    # -- the table
    width = max(len(r["what"]) for r in rows_out)
    print(f"\n{'what':<{width}} | {'peak GPU mem':>12} | result")
    print(f"{'-' * width}-|-{'-' * 12}-|-{'-' * 40}")
    for r in rows_out:
        mem = f"{r['peak_gib']:.2f} GiB" if r["peak_gib"] is not None else "n/a (cpu)"
        print(f"{r['what']:<{width}} | {mem:>12} | {r['result']}")
    total = time.perf_counter() - t_start
    print(
        f"\nmodel: Llama {n_params / 1e6:.1f}M params, {dtype_name}, on {name}; total {total:.0f} s"
    )
    out = os.environ.get("SMOKE_OUT")
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "device": name,
                    "params": n_params,
                    "dtype": dtype_name,
                    "rows": rows_out,
                    "total_s": total,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
