"""How long a recipe of the math loop takes on given hardware (`rzero plan --hardware H`): per
phase, the tokens it generates (and on which devices) and trains, and the wall time these
take at the throughputs of `rzero.engine.hardware`, each printed with its source.

Tokens are counted at `length_fraction` of each maximum length (1.0: every completion runs
to its limit, an upper bound). Prompts are counted at 4 characters per token, a question
inside the solver's prompt at min(challenger.max_completion_length, 128) tokens. The
evaluation is counted for the benchmarks whose items are on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rzero.config import GRPOSection, RZeroConfig
from rzero.config.schedule import role_schedule
from rzero.engine.hardware import HF_SLOWDOWN_SOURCE, Hardware, params_billions
from rzero.prompts.challenger import challenger_chat
from rzero.prompts.solver import solver_chat

CHARS_PER_TOKEN = 4
QUESTION_TOKENS = 128


@dataclass
class PhaseCost:
    """One phase: what it generates (tokens, on how many devices, through HF generate or
    not) and trains (tokens, FLOPs per token in units of N, devices)."""

    phase: str
    generated: list[tuple[str, float, int, bool]] = field(default_factory=list)
    trained: float = 0.0
    flops_per_token_n: float = 0.0  # 6 (forward and backward), +2 per extra forward
    train_devices: int = 1

    def seconds(self, hw: Hardware, params_b: float) -> float:
        gen = sum(
            tokens / (hw.gen_tokens_per_s(params_b, hf) * devices)
            for _, tokens, devices, hf in self.generated
        )
        train = (
            self.trained
            * self.flops_per_token_n
            * params_b
            * 1e9
            / (hw.device.train_flops * self.train_devices)
        )
        return gen + train + hw.device.phase_seconds

    @property
    def generated_tokens(self) -> float:
        return sum(tokens for _, tokens, _, _ in self.generated)


def _prompt_tokens(chat) -> float:
    return sum(len(m["content"]) for m in chat) / CHARS_PER_TOKEN


def _eval_tokens(cfg: RZeroConfig) -> tuple[float, list[str]]:
    """Generated tokens of one evaluation, and the benchmarks left out (not on this machine)."""
    from rzero.evaluation.loaders import load_benchmark, split_samples

    tokens, missing = 0.0, []
    for spec in cfg.eval.benchmarks:
        try:
            _, items = load_benchmark(spec)
        except Exception:  # a hub benchmark with no network: left out, and said so
            missing.append(spec)
            continue
        k = split_samples(spec)[1] or cfg.eval.num_samples
        n = len(items) if cfg.eval.limit is None else min(len(items), cfg.eval.limit)
        tokens += n * k * cfg.eval.max_new_tokens
    return tokens, missing


def phase_costs(cfg: RZeroConfig, hw: Hardware, fraction: float = 1.0) -> list[PhaseCost]:
    """The phases of one iteration, then the evaluation (which also runs once before the
    first iteration)."""
    g, r = cfg.generation, cfg.run
    on_gpu = not hw.device.hf_engine
    train_devices = max(1, len(r.train_gpus)) * r.num_machines if on_gpu else 1
    main_devices = g.tensor_parallel_size if on_gpu else 1
    main_hf = g.backend != "vllm"
    rollout_hf = not g.trl_use_vllm
    solver_devices = max(1, len(g.solver_gpus)) if on_gpu else 1
    m = cfg.labeling.num_votes
    votes_len = cfg.labeling.max_new_tokens * fraction
    question = min(cfg.challenger.max_completion_length, QUESTION_TOKENS)

    def grpo(name: str, role: GRPOSection, prompt: float) -> PhaseCost:
        sch = role_schedule(role, r.training_processes)
        length = role.max_completion_length * fraction
        extra = (2 if sch.updates_per_step > 1 else 0) + (2 if role.beta > 0 else 0)
        cost = PhaseCost(name, train_devices=train_devices, flops_per_token_n=6 + extra)
        cost.generated.append(("rollouts", sch.completions * length, train_devices, rollout_hf))
        cost.trained = sch.completions * (prompt + length)
        return cost

    phases = []
    if cfg.roles.train_challenger:
        c = grpo(
            "challenger",
            cfg.challenger,
            _prompt_tokens(challenger_chat(cfg.challenger.prompt_file)),
        )
        completions = role_schedule(cfg.challenger, r.training_processes).completions
        c.generated.append(
            ("frozen solver's votes", completions * m * votes_len, solver_devices, main_hf)
        )
        phases.append(c)
    n = cfg.challenger.pool_size
    pool_len = cfg.challenger.max_completion_length * fraction
    phases.append(PhaseCost("pool", [("questions", n * pool_len, main_devices, main_hf)]))
    phases.append(PhaseCost("labelling", [("votes", n * m * votes_len, main_devices, main_hf)]))
    solver_prompt = _prompt_tokens(solver_chat("", cfg.solver.prompt_file)) + question
    phases.append(grpo("solver", cfg.solver, solver_prompt))
    tokens, _ = _eval_tokens(cfg) if cfg.eval.enabled else (0.0, [])
    if tokens:
        phases.append(
            PhaseCost("eval", [("greedy answers", tokens * fraction, main_devices, main_hf)])
        )
    return phases


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _tokens(x: float) -> str:
    return f"{x / 1e6:.1f} M" if x >= 1e6 else f"{x / 1e3:.1f} k"


def estimate_markdown(
    cfg: RZeroConfig, hw: Hardware, fraction: float = 1.0, params_b: float | None = None
) -> str:
    """The estimate `rzero plan --hardware H` prints after the plan."""
    params_b = params_b or params_billions(cfg.model.name)
    if params_b is None:
        raise ValueError(
            f"--hardware: model.name {cfg.model.name!r} states no parameter count; "
            "give it with --params (billions)"
        )
    need = len(set(cfg.run.train_gpus) | set(cfg.generation.solver_gpus))
    if not hw.device.hf_engine and need > hw.count:
        raise ValueError(
            f"--hardware {hw.name}: the recipe places work on {need} GPUs "
            "(run.train_gpus and generation.solver_gpus)"
        )
    phases = phase_costs(cfg, hw, fraction)
    evals = [p for p in phases if p.phase == "eval"]
    iteration = sum(p.seconds(hw, params_b) for p in phases)
    total = cfg.run.iterations * iteration + sum(p.seconds(hw, params_b) for p in evals)
    d = hw.device
    lines = [
        f"Estimate on {hw.name} for a {params_b:g}B model, tokens at "
        f"{fraction:.0%} of each maximum length"
        + (
            " (the unit its throughputs were fitted in)"
            if d.hf_engine
            else " (an upper bound)"
            if fraction >= 1
            else ""
        )
        + ":",
        "",
        "| phase | generated | trained | wall time |",
        "|---|---|---|---|",
    ]
    for p in phases:
        gen = ", ".join(
            f"{_tokens(t)} ({what}{', HF' if hf and not d.hf_engine else ''}, {n} device(s))"
            for what, t, n, hf in p.generated
        )
        trained = (
            f"{_tokens(p.trained)} ({p.flops_per_token_n:g}N FLOPs each)" if p.trained else "–"
        )
        lines.append(f"| {p.phase} | {gen} | {trained} | {_hours(p.seconds(hw, params_b))} |")
    lines += [
        "",
        f"One iteration: {_hours(iteration)}; the run ({cfg.run.iterations} iterations and the "
        f"evaluation before the first): **{_hours(total)}**.",
        "",
        "Sources:",
        f"- generation: {d.gen_tokens_per_s_1b:,.0f} tokens/s per device for a 1B model, "
        f"{d.gen_tokens_per_s_1b / params_b:,.0f} for this one: {d.gen_source}",
        f"- training: {d.train_flops / 1e12:,.1f} TFLOP/s per device: {d.train_source}",
        f"- each phase's fixed cost: {d.phase_seconds:.0f} s: {d.phase_source}",
    ]
    if not d.hf_engine:
        lines.append(f"- HF generate (TRL rollouts without vLLM): {HF_SLOWDOWN_SOURCE}")
    if cfg.eval.enabled:
        _, missing = _eval_tokens(cfg)
        if missing:
            lines.append(
                f"- not counted: the evaluation on {', '.join(missing)} (not on this "
                "machine, so its size is unknown here)"
            )
    return "\n".join(lines) + "\n"
