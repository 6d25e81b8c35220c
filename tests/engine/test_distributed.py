"""The loop under several training processes: the challenger reward is computed once over
the global batch, the main process's failures reach the others, and a real 2-process
`accelerate launch` on CPU runs one iteration with every phase committed once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import ScriptedGenerator, tiny_overrides
from rank_report import STANDALONE_RENDEZVOUS, child_env, read_results
from safetensors.torch import load_file

from rzero.challenger.rewards import ChallengerReward
from rzero.config import load_config
from rzero.engine import distributed
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.chat import completion_text
from rzero.rundir import RunDir


def read_marker(run_dir, k, phase):
    return RunDir(run_dir).marker(k, phase)


def completion(question: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"<question>{question}</question> \\boxed{{1}}"}]


QUESTIONS = [
    "What is the sum of the first ten positive odd integers?",
    "A train travels 120 kilometres in 90 minutes; find its average speed in km per hour.",
    "Solve for x in the linear equation 7x - 5 = 30.",
    "How many distinct ways can the letters of the word LEVEL be arranged?",
    "Compute the area of a circle with radius 3, in terms of pi.",
    "If 15 percent of a number equals 45, what is the number?",
    "Find the greatest common divisor of 84 and 126.",
]


def test_rank_1_of_2_gets_its_slice_of_the_global_batch_reward(tmp_path, monkeypatch):
    # the step's batch B = 8 is split 4 + 4 over two processes; the first question appears
    # once in each half. Computed over the global batch (the paper's B):
    #   p_hat = 3/4 -> r_unc = 1 - 2|3/4 - 1/2| = 0.5 for every question
    #   the duplicated question: cluster of 2 -> r_rep = 2/8 = 0.25 -> reward 0.25
    #   each other question: cluster of 1 -> r_rep = 1/8 = 0.125 -> reward 0.375
    # Per process (B = 4) the duplicate would be invisible: 0.5 - 1/4 = 0.25 for all.
    rank0 = [completion(q) for q in QUESTIONS[:4]]
    rank1 = [completion(q) for q in [QUESTIONS[0], *QUESTIONS[4:7]]]
    monkeypatch.setattr(
        distributed, "gather", lambda local: [[completion_text(c) for c in rank0], local]
    )
    monkeypatch.setattr(distributed, "rank", lambda: 1)
    cfg = load_config(None, ["labeling.num_votes=4"])
    # a frozen solver whose m = 4 votes are always 1, 1, 1, 2: p_hat = 3/4
    solver = ScriptedGenerator(lambda text, n, params: ["\\boxed{1}"] * 3 + ["\\boxed{2}"])
    frozen = FrozenSolver(solver, lambda q: [{"role": "user", "content": q}], cfg.labeling)
    reward = ChallengerReward(
        frozen, cfg.challenger, tmp_path / "steps.jsonl", iteration=1, seed=cfg.run.seed
    )
    got = reward(prompts=[None] * 4, completions=rank1)
    assert got == pytest.approx([0.25, 0.375, 0.375, 0.375])
    # the frozen solver saw all 8 questions in one call; the log holds the global batch once
    assert [len(prompts) for prompts, _, _ in solver.calls] == [8]
    rows = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    assert [r["r_rep"] for r in rows] == pytest.approx([0.25] + [0.125] * 3 + [0.25] + [0.125] * 3)


def test_one_process_needs_no_process_group():
    assert distributed.world_size() == 1 and distributed.is_main()
    assert distributed.on_main(lambda x: x + 1, 1) == 2
    assert distributed.gather([1, 2]) == [[1, 2]]


TWO_PROCESS_SCRIPT = textwrap.dedent("""
    from rank_report import report
    from rzero.engine import distributed

    distributed.init()
    out = {"rank": distributed.rank(), "world": distributed.world_size()}
    out["shared"] = distributed.on_main(lambda: {"from": distributed.rank()})
    out["private"] = distributed.on_main(lambda: "secret", share=False)
    out["gathered"] = distributed.gather([distributed.rank()] * (distributed.rank() + 1))
    try:
        distributed.on_main(lambda: 1 / 0)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    report(out)
""")


def _env(results: Path) -> dict[str, str]:
    return child_env(results, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")


@pytest.mark.slow
def test_on_main_under_two_real_processes(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(TWO_PROCESS_SCRIPT)
    # --standalone: torchrun's agent binds a free port itself and passes it to the workers
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(script),
        ],
        env=_env(tmp_path / "results"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = read_results(tmp_path / "results", world=2)
    assert [(r["rank"], r["world"]) for r in results] == [(0, 2), (1, 2)]
    assert all(r["shared"] == {"from": 0} for r in results)  # computed once, by rank 0
    assert [r["private"] for r in results] == ["secret", None]
    assert all(r["gathered"] == [[0], [1, 1]] for r in results)
    assert results[0]["error"] == "ZeroDivisionError: division by zero"
    assert results[1]["error"] == (
        "MainProcessFailed: the main process failed: ZeroDivisionError: division by zero"
    )


PEER_ENDS_SCRIPT = textwrap.dedent("""
    import os, time
    from pathlib import Path
    import torch
    from rank_report import report
    from rzero.engine import distributed

    distributed.init()
    # rank 1 ends only once rank 0 is past joining the group: gloo's handshake can return on
    # one rank before the other's has finished, and a peer gone then fails the join instead
    ready = Path(__file__).with_name("rank-0-joined")
    if distributed.rank() == 1:
        while not ready.exists():
            time.sleep(0.05)
        os._exit(0)  # ends without a word, as a process the kernel killed
    ready.touch()
    try:
        torch.distributed.all_reduce(torch.ones(1))
    except Exception as exc:
        report({"rank": 0, "line": distributed.collective_failure(exc),
                "other": distributed.collective_failure(ValueError("not a collective"))})
""")


@pytest.mark.slow
def test_a_collective_that_fails_because_another_process_ended_is_one_line(tmp_path):
    script = tmp_path / "peer.py"
    script.write_text(PEER_ENDS_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        + [str(script)],
        env=_env(tmp_path / "results"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = read_results(tmp_path / "results", world=1)
    assert result["line"] and "by peer" in result["line"], result  # reset or closed
    assert "\n" not in result["line"] and "pair.cc" not in result["line"]
    assert result["other"] is None


# only rank 0 writes the run's outputs, so this entry to `rzero iterate` first records each
# process's rank and world size: the test can tell that two processes ran
RANK_RECORDING_ENTRY = textwrap.dedent("""
    import os, runpy
    from rank_report import report

    report({"rank": int(os.environ.get("RANK", "0")),
            "world": int(os.environ.get("WORLD_SIZE", "1"))})
    runpy.run_module("rzero", run_name="__main__")
""")


@pytest.mark.slow
def test_accelerate_launch_two_cpu_processes_runs_one_iteration(format_checkpoint, tmp_path):
    run_dir = tmp_path / "run"
    entry = tmp_path / "entry.py"
    entry.write_text(RANK_RECORDING_ENTRY)
    # `--cpu` makes accelerate start a single process (several CPU processes need mpirun);
    # `--multi_gpu` starts two through torchrun, and with no visible GPU they train on CPU
    args = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(entry),
        "iterate",
        "--run-dir",
        str(run_dir),
    ]
    for override in tiny_overrides(format_checkpoint, **{"eval.enabled": False}):
        args += ["--set", override]
    env = _env(tmp_path / "results") | STANDALONE_RENDEZVOUS | {"CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert [(r["rank"], r["world"]) for r in read_results(tmp_path / "results", world=2)] == [
        (0, 2),
        (1, 2),
    ]
    it = run_dir / "iter_01"
    # the step's 8 completions (2 prompts x G 4, 4 per process) scored and logged once
    rows = (it / "challenger_steps.jsonl").read_text().splitlines()
    assert len(rows) == 8
    challenger = read_marker(run_dir, 1, "challenger")
    assert [s["completions"] for s in challenger["steps"]] == [8]
    for phase in ("pool", "labelling", "solver"):
        assert read_marker(run_dir, 1, phase) is not None
    # one row per phase plus the challenger step, and one per optimiser update of each GRPO
    # phase (TRL's log): nothing repeated by the second process
    metric_rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len([r for r in metric_rows if not r["phase"].endswith("_update")]) == 5
    for role in ("challenger", "solver"):
        updates = read_marker(run_dir, 1, role)["updates"]
        assert [r["update"] for r in metric_rows if r["phase"] == f"{role}_update"] == [
            u["update"] for u in updates
        ] and updates
    pool = (it / "pool.jsonl").read_text().splitlines()
    assert len((it / "labelled.jsonl").read_text().splitlines()) == len(pool)
    # both roles trained (gradients all-reduced over the two processes) and saved once; a
    # GRPO step whose 0/1 rewards were all equal has zero advantages and rightly changes
    # nothing (on an AMD EPYC the solver's 8 completions all missed their labels)
    base = load_file(str(Path(format_checkpoint) / "model.safetensors"))

    def changed(role: str) -> bool:
        trained = load_file(str(it / role / "model.safetensors"))
        return any(not torch.equal(base[k], trained[k]) for k in base)

    assert changed("challenger")
    rewards = [r["reward"] for r in read_marker(run_dir, 1, "solver")["updates"]]
    if all(r in (0.0, 1.0) for r in rewards):  # every completion scored alike: no update
        assert not changed("solver"), rewards
    assert not list(it.glob(".*.tmp")) and not (it / ".trainer_challenger").exists()
