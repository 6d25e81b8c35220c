"""The frozen solver served two ways on one machine, the same requests through both:

  manager   `--replicas` vLLM servers, one port and one process group each, rzero's client
            spreading requests round-robin over them (what earlier rzero versions could
            start, and what a user scripting N `vllm serve` would run);
  dp        rzero's solver server (`SolverServer`): one `vllm serve --data-parallel-size N`,
            N engine cores behind one endpoint, vLLM balancing them (what
            `generation.solver_replicas` starts).

Both serve the embedded SmolLM2-135M-Instruct with the rehearsal's engine settings
(`configs/rehearsal.yaml`: dtype, run seed, KV cache per engine, eager mode, longest
sequence) and answer the challenger reward's request shape: `--prompts` arithmetic questions
x `--votes` samples at temperature 1, top_k 40, `--max-new-tokens` tokens, through rzero's
`OpenAIGenerator` (no per-request seed on CPU, as the run sends). Start-up (process start
to every endpoint healthy), the requests' wall time and tokens, the resident memory of the
whole process tree while serving, and the stop time are printed per way, then the ratios.
One way after the other, once each: on a shared machine compare load averages.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import ExitStack
from pathlib import Path

from engines import vote_questions  # bench/ is on sys.path when run as a script

from rzero.config import load_config
from rzero.engine.models import DEFAULT_MODEL, resolve_model
from rzero.engine.serving import serve_checkpoint, vllm_serve_command
from rzero.engine.watchdog import descendants
from rzero.generation.backends import OpenAIGenerator
from rzero.generation.interface import SamplingParams
from rzero.generation.solver_server import SolverServer, vllm_server_args
from rzero.prompts.solver import solver_chat


def tree_rss_gib(pids: set[int]) -> float:
    """Resident memory of `pids` and all their descendants, GiB (shared pages counted in
    each process, so an upper bound)."""
    total = 0
    for pid in descendants(pids) | pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 2**20


def serve_requests(urls: list[str], model: str, prompts, args) -> dict:
    client = OpenAIGenerator(
        urls, model, concurrency=args.concurrency, timeout=600, retries=0, per_request_seed=False
    )
    params = SamplingParams(temperature=1.0, top_k=40, max_new_tokens=args.max_new_tokens, seed=0)
    t0 = time.perf_counter()
    out = client.generate(prompts, args.votes, params)
    seconds = time.perf_counter() - t0
    chars = sum(len(t) for row in out for t in row)
    return {
        "seconds": seconds,
        "completions": sum(len(r) for r in out),
        "chars": chars,
        "tokens": client.stats.new_tokens,
        "requests_per_url": client.requests_per_url,
    }


def run_manager(checkpoint: str, extra: list[str], prompts, args) -> dict:
    def command(path: str, host: str, port: int) -> list[str]:
        return vllm_serve_command(path, host, port, extra_args=extra)

    logs = Path(args.logs) / "manager"
    logs.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with ExitStack() as stack:
        served = [
            stack.enter_context(
                serve_checkpoint(
                    checkpoint,
                    log_path=logs / f"server{i}.log",
                    command=command,
                    startup_timeout=900,
                )
            )
            for i in range(args.replicas)
        ]
        startup = time.perf_counter() - t0
        result = serve_requests([s.base_url for s in served], served[0].model, prompts, args)
        result["rss_gib"] = tree_rss_gib({s.pid for s in served})
        t1 = time.perf_counter()
    return {"startup_s": startup, "stop_s": time.perf_counter() - t1, **result}


def run_dp(checkpoint: str, extra: list[str], prompts, args) -> dict:
    t0 = time.perf_counter()
    with SolverServer(
        checkpoint,
        engines=args.replicas,
        engine="vllm",
        extra_args=extra,
        log_dir=Path(args.logs) / "dp",
    ) as server:
        startup = time.perf_counter() - t0
        result = serve_requests([server.url], server.model, prompts, args)
        result["rss_gib"] = tree_rss_gib({server.process.pid})
        t1 = time.perf_counter()
    return {"startup_s": startup, "stop_s": time.perf_counter() - t1, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=2, help="engines of each way")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--votes", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--ways", default="manager,dp", help="comma list of manager,dp")
    parser.add_argument("--logs", default="/tmp/rzero-bench-replicas")
    parser.add_argument("--out", help="JSON file for the numbers")
    args = parser.parse_args()

    cfg = load_config("configs/rehearsal.yaml")
    extra = vllm_server_args(cfg, on_gpu=False)
    checkpoint = str(resolve_model(DEFAULT_MODEL))
    prompts = [solver_chat(q) for q in vote_questions(args.prompts)]
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{args.replicas} engines per way; requests: {args.prompts} prompts x {args.votes}, "
        f"temperature 1, top_k 40, max {args.max_new_tokens} new tokens; server args: "
        f"{' '.join(extra)}"
    )
    results: dict[str, dict] = {}
    for way in args.ways.split(","):
        run = {"manager": run_manager, "dp": run_dp}[way]
        try:
            results[way] = run(checkpoint, extra, prompts, args)
        except Exception as exc:  # a way that does not start is a result too
            results[way] = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
            print(f"[{way}] failed: {results[way]['error']}")
            continue
        r = results[way]
        print(
            f"[{way}] start-up {r['startup_s']:.1f} s; {r['tokens']} tokens in "
            f"{r['seconds']:.1f} s = {r['tokens'] / r['seconds']:.1f} tok/s; requests per "
            f"endpoint {r['requests_per_url']}; tree RSS {r['rss_gib']:.2f} GiB; stop "
            f"{r['stop_s']:.1f} s; load average {os.getloadavg()[0]:.2f}"
        )
    ok = {w: r for w, r in results.items() if "error" not in r}
    if {"manager", "dp"} <= set(ok):
        m, d = ok["manager"], ok["dp"]
        print(
            f"dp / manager: throughput {(d['tokens'] / d['seconds']) / (m['tokens'] / m['seconds']):.2f}x, "
            f"start-up {m['startup_s'] / d['startup_s']:.2f}x (above 1: dp faster), "
            f"memory {d['rss_gib'] / m['rss_gib']:.2f}x"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
