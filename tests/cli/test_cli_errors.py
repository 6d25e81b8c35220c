"""User errors and exits of the command line: `rzero audit` fails when nothing could be judged,
an unreachable judge is one line, Ctrl-C or SIGTERM leave at once with the verdicts so far in
a readable cache; `rzero eval` refuses an unknown dtype or device in one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ScriptedGenerator
from fake_runs import step_row, write_run
from fault_server import FaultServer

from rzero.cli import main
from rzero.io import read_jsonl

QUESTIONS = {"What is 2+3?": "5", "What is 3+4?": "7", "What is 5+5?": "10"}


def judge_args(base_url: str, **kw) -> list[str]:
    sets = {
        "audit.base_url": base_url,
        "audit.model": "fault-judge",
        "audit.retries": "0",
        "audit.timeout": "5",
        **kw,
    }
    return [arg for k, v in sets.items() for arg in ("--set", f"{k}={v}")]


def test_every_judge_call_failing_exits_1_with_one_line(tmp_path, capsys):
    write_run(tmp_path, {0: [step_row(q, a) for q, a in QUESTIONS.items()]}, [])
    faults = {q: ["500"] * 3 for q in QUESTIONS}
    with FaultServer({q: "\\boxed{1}" for q in QUESTIONS}, faults) as server:
        code = main(["audit", str(tmp_path), *judge_args(server.base_url)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    # the audit's progress lines (time-stamped) come first; the error is one line, the last
    assert [line for line in err if "error" in line] == [
        "error: nothing could be judged (3 items: HTTP 500 after 1 attempts: 3); "
        "the report counts none of them"
    ]
    assert err[-1].startswith("error: nothing could be judged")
    assert (tmp_path / "audit" / "report.md").is_file()  # the report says so too


def test_some_verdicts_exit_0(tmp_path, capsys):
    write_run(tmp_path, {0: [step_row(q, a) for q, a in QUESTIONS.items()]}, [])
    faults = {"What is 2+3?": ["500"]}
    with FaultServer({q: f"\\boxed{{{a}}}" for q, a in QUESTIONS.items()}, faults) as server:
        assert main(["audit", str(tmp_path), *judge_args(server.base_url)]) == 0


def test_unreachable_judge_without_a_model_name_is_one_line(tmp_path, capsys):
    write_run(tmp_path, {0: [step_row("What is 2+3?", "5")]}, [])
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    code = main(
        [
            "audit",
            str(tmp_path),
            "--set",
            "audit.base_url=http://127.0.0.1:9/v1",
            "--set",
            "audit.model=null",
            "--set",
            "audit.retries=0",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith(
        "error: audit.model is unset and the models of 127.0.0.1 could not be listed"
    )


def _foreground_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(tmp_path: Path, sig: int) -> None:
    write_run(tmp_path, {0: [step_row(q, a) for q, a in QUESTIONS.items()]}, [])
    # one reply at once, two that would take 60 s
    replies = {q: f"\\boxed{{{a}}}" for q, a in QUESTIONS.items()}
    faults = {"What is 3+4?": ["slow:60"], "What is 5+5?": ["slow:60"]}
    with FaultServer(replies, faults) as server:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rzero.cli",
                "audit",
                str(tmp_path),
                *judge_args(server.base_url, **{"audit.timeout": "120", "audit.concurrency": "3"}),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # as in a terminal: a job a non-interactive shell starts with `&` (nohup, CI
            # runners) inherits SIGINT ignored, and Python keeps it ignored
            preexec_fn=_foreground_signals,
        )
        try:
            assert server.count_at_least(3, wait=60) == 3  # all three requests in flight
            time.sleep(1.0)  # the fast reply is judged and in memory
            sent = time.monotonic()
            proc.send_signal(sig)
            code = proc.wait(timeout=30)
            elapsed = time.monotonic() - sent
        finally:
            proc.kill()
            proc.wait()
    assert code == 130, proc.stderr.read()
    # not the 60 s of the requests in flight: the interpreter's exit (under 1 s on an idle
    # machine, about 2 s on a 2-core AVX2 machine running two other jobs) and nothing more
    assert elapsed < 5.0, elapsed
    cache = read_jsonl(tmp_path / "audit" / "cache.jsonl")  # strict: every line parses
    assert [row["question"] for row in cache] == ["What is 2+3?"]


@pytest.mark.slow
def test_ctrl_c_leaves_at_once_with_a_consistent_cache(tmp_path):
    _interrupt(tmp_path, signal.SIGINT)


@pytest.mark.slow
def test_sigterm_leaves_at_once_with_a_consistent_cache(tmp_path):
    _interrupt(tmp_path, signal.SIGTERM)


def test_eval_refuses_an_unknown_dtype_or_device_in_one_line(capsys):
    for flag, value, allowed in (
        ("--dtype", "int8", "float32, bfloat16, float16"),
        ("--device", "tpu", "auto, cpu, cuda"),
    ):
        code = main(["eval", "--output", "unused", "--benchmarks", "easy", flag, value])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert err == [f"rzero eval: {flag}={value}: expected one of {allowed}"]


def recording(spec) -> ScriptedGenerator:
    """A generator standing in for the engine the config names; it records what it served."""
    gen = ScriptedGenerator(
        lambda text, n, params: ["The answer is \\boxed{2}."], cycle=True, engine="vllm"
    )
    gen.spec = spec
    return gen


def test_eval_and_generate_use_the_configs_engine(tmp_path, capsys, monkeypatch):
    # with generation.backend vllm both commands build the engine the run would use (here a
    # recording stand-in for vLLM), and close it when they are done
    import rzero.generation.backends

    made: list = []

    def make(cfg, spec, **kwargs):
        assert cfg.generation.backend == "vllm"
        made.append(recording(spec))
        return made[-1]

    monkeypatch.setattr(rzero.generation.backends, "make_generator", make)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())  # "vllm installed"
    args = ["--config", "configs/rehearsal.yaml", "--model", "some/ckpt"]
    assert main(["eval", *args, "--output", str(tmp_path / "out"), "--limit", "2"]) == 0
    assert main(["generate", *args, "--prompt", "What is 1+1?", "-n", "2"]) == 0
    assert [(g.spec, g.closed) for g in made] == [("some/ckpt", True), ("some/ckpt", True)]
    assert capsys.readouterr().out.count("The answer is \\boxed{2}.") == 2
    # without vLLM installed the same commands stop in one line, before any model loads
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert main(["generate", *args, "--prompt", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vLLM is not installed" in err[0]


def test_every_command_logs_through_tqdm_and_leaves_logging_as_it_found_it(
    tmp_path, capsys, monkeypatch
):
    """The run-level line of each phase reaches stderr through the one logging setup, and
    lands beside a progress bar, never on its line: tqdm writes it above the bar."""
    import logging

    from tqdm.auto import tqdm

    from rzero.cli import commands
    from rzero.config import load_config
    from rzero.math.layout import LAYOUT
    from rzero.rundir import PhaseRunner, RunDir

    def fake_config(args):
        cfg = load_config(None, ["run.iterations=2", "run.report_to=none"])
        run = RunDir(tmp_path / "run", LAYOUT)
        run.prepare(cfg)
        bar = tqdm(total=2, desc="phase")
        PhaseRunner(cfg, run).run(1, "pool", lambda k: {"metrics": {}})
        bar.update(2)
        bar.close()
        return 0

    monkeypatch.setattr(commands, "cmd_config", fake_config)
    import rzero.cli.parser as parser

    monkeypatch.setattr(parser, "cmd_config", fake_config)
    assert main(["config"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if "·" in line]
    assert lines[0].endswith("iteration 1/2 · pool")
    assert re.search(r"iteration 1/2 · pool: done in \d+ s$", lines[1])
    assert not any("phase:" in line for line in lines)  # no log line glued to the bar
    logger = logging.getLogger("rzero")
    assert logger.handlers == [] and logger.propagate and logger.level == logging.NOTSET


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_dead_server_is_one_line_even_when_a_library_wrapped_its_error(
    wrapped, capsys, monkeypatch
):
    """A server's death is raised wherever the phase is (`raised_when_dead`): inside a lazy
    import, TRL re-raises it as "RuntimeError: Failed to import ..." from it."""
    import rzero.cli.parser as parser
    from rzero.engine.serving import ServerError

    def dies(args):
        died = ServerError("long message\nwith its log tail", line="solver server died; log L")
        if not wrapped:
            raise died
        try:
            raise died
        except ServerError as exc:
            raise RuntimeError("Failed to import trl.trainer.grpo_trainer") from exc

    monkeypatch.setattr(parser, "cmd_config", dies)
    assert main(["config"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == ["error: solver server died; log L"]


def test_other_errors_are_not_taken_for_a_dead_server(monkeypatch):
    import rzero.cli.parser as parser

    def fails(args):
        raise RuntimeError("something else")

    monkeypatch.setattr(parser, "cmd_config", fails)
    with pytest.raises(RuntimeError, match="something else"):
        main(["config"])


def test_a_failed_launch_is_one_line_naming_the_process_that_died_first(tmp_path):
    from rzero.cli.launching import launch_failure

    log = tmp_path / "logs" / "launch.log"
    report = """
Failures:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 25630)  (SIGTERM)
  traceback : Signal 15 (SIGTERM) received by PID 25630
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_00:10:00
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 25631)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 25631
"""
    assert launch_failure(report, 1, log) == (
        f"training process rank 1 (pid 25631) died: Signal 9 (SIGKILL); the launch's log: {log}"
    )
    python_error = report.replace(
        "Signal 9 (SIGKILL) received by PID 25631",
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    ).replace("-9 (pid: 25631)  (SIGKILL)", "1 (pid: 25631)")
    assert "(pid 25631) died: exit code 1;" in launch_failure(python_error, 1, log)
    assert launch_failure("no report", 7, log) == (
        f"the training launch exited with code 7; its log: {log}"
    )
    # a rank that saw what died said it in rzero's own line: that line, not the rank the
    # launcher saw fail first (the other rank, told only that the main process failed)
    server = "solver server at http://127.0.0.1:5/v1 exited with code 0: one of its vLLM engine cores died"
    said = (
        "iter 1 challenger:   0%|   | 0/2 [00:00<?, ?step/s]error (process 1): the main "
        f"process failed: GenerationError: ...\n          error: {server}; its log: S.log\n"
    )
    assert launch_failure(said + python_error, 1, log) == (
        f"{server}; its log: S.log; the launch's log: {log}"
    )


@pytest.mark.slow
def test_a_run_on_cpu_prints_no_deepspeed_accelerator_warning_or_shard_bars(
    format_checkpoint, tmp_path
):
    # DeepSpeed is told its accelerator is the CPU (DS_ACCELERATOR) and transformers' shard
    # bar is off for checkpoint saves: neither line reaches a CPU run's log
    from conftest import tiny_overrides

    sets = tiny_overrides(format_checkpoint, **{"eval.enabled": False})
    cmd = [sys.executable, "-m", "rzero", "iterate", "--run-dir", str(tmp_path / "run")]
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run(
        cmd + [a for s in sets for a in ("--set", s)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert "Setting accelerator to CPU" not in log
    assert "Writing model shards" not in log
