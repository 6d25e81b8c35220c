"""Scale-out (SPEC §6): the frozen solver as server replicas, training under accelerate.

The reference hardware is one 8-GPU node split in two: GPUs 0-3 train the challenger with
TRL + accelerate + DeepSpeed ZeRO while GPUs 4-7 serve the frozen solver, one `vllm serve`
replica per GPU. The challenger reward reaches the solver through the OpenAI-compatible
protocol: `rzero serve-solver` (or `SolverReplicas` inside a program) writes the replicas'
URLs, one a line, to the file that `generation.solver_urls_file` names, and
`OpenAIGenerator` spreads the reward's requests round-robin over them. Beyond one node the
same two pieces scale independently: more replicas (on any machine that can be reached) in
the URLs file, and more training processes with `accelerate launch --num_machines N`.

Everything that decides *what* runs is a pure function, so the exact commands are tested
and can be printed: `placement` (which GPU does what), `replica_plan` (per replica: GPUs,
port, URL, argv) and `accelerate_command` (the training launch). `SolverReplicas` then
only starts, watches and stops processes.

Each replica runs in its own process group with its own log; stopping one (SIGTERM, then
SIGKILL) also ends the engine workers vLLM spawns. A replica that exits is reported with
its URL and log path (`check_alive`), never retried silently: a solver that cannot answer
would quietly turn every challenger reward into "no signal".
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rzero.config import RZeroConfig, load_config
from rzero.io import write_text_atomic
from rzero.serving import (
    ServerError,
    _get_json,
    _server_error,
    _stop,
    die_with_parent,
    free_port,
    transformers_serve_command,
    vllm_serve_command,
)

ENGINES = ("vllm", "transformers")
DEFAULT_ACCELERATE_CONFIG = "configs/accelerate/deepspeed_zero2.yaml"
MIXED_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "no"}


# ---------------------------------------------------------------- GPU placement


def parse_gpus(text: str | Sequence[int] | None) -> tuple[int, ...]:
    """'4,5,6,7' or '4-7' (or a list of ints) -> (4, 5, 6, 7); '' or None -> () (CPU)."""
    if text is None:
        return ()
    if not isinstance(text, str):
        return tuple(int(g) for g in text)
    gpus: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            gpus += list(range(int(lo), int(hi) + 1)) if sep else [int(part)]
        except ValueError:
            raise ValueError(f"--gpus {text!r}: expected GPU indices like '4,5,6,7' or "
                             f"'4-7'") from None
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus {text!r}: a GPU is listed twice")
    return tuple(gpus)


def cuda_visible_devices(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in gpus)


@dataclass(frozen=True)
class Placement:
    """Which GPUs of one node train and which serve the frozen solver."""
    train: tuple[int, ...]
    solver: tuple[int, ...]


def placement(total_gpus: int, train_gpus: int, solver_gpus: int) -> Placement:
    """Training takes the first `train_gpus` GPUs, the solver replicas the next `solver_gpus`
    (the reference: 8 = 4 train (0-3) + 4 serve (4-7)). GPUs left over stay idle."""
    if train_gpus < 1:
        raise ValueError(f"train_gpus={train_gpus}: training needs at least one GPU")
    if solver_gpus < 0:
        raise ValueError(f"solver_gpus={solver_gpus}: must be >= 0")
    if train_gpus + solver_gpus > total_gpus:
        raise ValueError(f"train_gpus={train_gpus} + solver_gpus={solver_gpus} = "
                         f"{train_gpus + solver_gpus}: more than the node's {total_gpus} GPUs")
    return Placement(train=tuple(range(train_gpus)),
                     solver=tuple(range(train_gpus, train_gpus + solver_gpus)))


# ---------------------------------------------------------------- the frozen solver's replicas


@dataclass(frozen=True)
class ReplicaSpec:
    """One server replica: where it runs, where it listens, how it is started."""
    index: int
    gpus: tuple[int, ...]  # physical GPU indices; () runs on CPU
    cuda_visible_devices: str  # the replica's CUDA_VISIBLE_DEVICES ('' hides every GPU)
    port: int
    url: str  # http://HOST:PORT/v1, the line written to the URLs file
    command: tuple[str, ...]


def replica_plan(replicas: int, gpus: Sequence[int], tensor_parallel_size: int = 1,
                 port_base: int = 8100, host: str = "127.0.0.1", *, checkpoint: str,
                 engine: str = "vllm", url_host: str | None = None,
                 model_name: str | None = None, gpu_memory_utilization: float | None = None,
                 extra_args: Sequence[str] = ()) -> list[ReplicaSpec]:
    """Replica i serves `checkpoint` on GPUs gpus[i*tp:(i+1)*tp] and port port_base + i.

    `host` is the address the servers bind; `url_host` the one written into the URLs (default
    `host`; set it to this machine's name when binding 0.0.0.0 for other nodes). With no GPUs
    (`gpus=()`, the `transformers` engine only) every replica runs on CPU.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: allowed values are {', '.join(ENGINES)}")
    if replicas < 1:
        raise ValueError(f"replicas={replicas}: need at least one replica")
    if tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size={tensor_parallel_size}: must be >= 1")
    gpus = tuple(gpus)
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"gpus={list(gpus)}: a GPU is listed twice")
    if engine == "vllm" and not gpus:
        raise ValueError("engine='vllm' needs GPUs (--gpus); use engine='transformers' on CPU")
    if engine == "transformers" and tensor_parallel_size != 1:
        raise ValueError(f"tensor_parallel_size={tensor_parallel_size}: the transformers "
                         "engine serves one model copy per process (use 1)")
    need = replicas * tensor_parallel_size
    if gpus and len(gpus) != need:
        raise ValueError(f"gpus={list(gpus)} lists {len(gpus)} GPUs; {replicas} replicas x "
                         f"tensor_parallel_size {tensor_parallel_size} need exactly {need}")
    if not 0 < port_base <= 65535 - replicas + 1:
        raise ValueError(f"port_base={port_base}: ports {port_base}..{port_base + replicas - 1} "
                         "must lie in 1..65535")
    url_host = url_host or host
    specs = []
    for i in range(replicas):
        own = gpus[i * tensor_parallel_size:(i + 1) * tensor_parallel_size]
        port = port_base + i
        if engine == "vllm":
            args = ["--tensor-parallel-size", str(tensor_parallel_size)]
            if gpu_memory_utilization is not None:
                args += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
            if model_name is not None:
                args += ["--served-model-name", model_name]
            command = vllm_serve_command(checkpoint, host, port, extra_args=[*args, *extra_args])
        else:
            if model_name is not None:
                raise ValueError("model_name: `transformers serve` answers only to the "
                                 "checkpoint path it was started with; leave it unset")
            command = [*transformers_serve_command(checkpoint, host, port), *extra_args]
        specs.append(ReplicaSpec(index=i, gpus=own, cuda_visible_devices=cuda_visible_devices(own),
                                 port=port, url=f"http://{url_host}:{port}/v1",
                                 command=tuple(command)))
    return specs


def free_port_base(count: int, host: str = "127.0.0.1") -> int:
    """A port p such that p .. p+count-1 are all free right now (a race is possible)."""
    for _ in range(50):
        base = free_port(host)
        if base + count - 1 > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise ServerError(f"no run of {count} free consecutive ports found on {host}")


def _probe_host(host: str) -> str:
    # a server bound to every interface is reached for health checks over loopback
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


class SolverReplicas:
    """Start R server replicas of one checkpoint, write their URLs file, stop them at exit.

        with SolverReplicas(ckpt, replicas=4, gpus=(4, 5, 6, 7), urls_file=f) as solver:
            ...   # the challenger phase, with generation.solver_urls_file = f
            solver.check_alive()

    All replicas start at once and are waited for together (a vLLM start takes minutes);
    the URLs file is written only when every replica is healthy and lists the model, and
    removed at exit so that no later phase reads the URLs of stopped servers. Requests must
    name the model `self.model`: the checkpoint as given (both servers' default), so pass
    the checkpoint exactly as the run names it.
    """

    def __init__(self, checkpoint: str | Path, *, replicas: int = 1,
                 gpus: Sequence[int] = (), tensor_parallel_size: int = 1,
                 port_base: int | None = None, host: str = "127.0.0.1",
                 url_host: str | None = None, engine: str = "vllm",
                 urls_file: str | Path | None = None, log_dir: str | Path | None = None,
                 model_name: str | None = None, gpu_memory_utilization: float | None = None,
                 extra_args: Sequence[str] = (), startup_timeout: float = 900.0,
                 stop_grace: float = 15.0):
        self.checkpoint = str(checkpoint)
        if engine == "transformers" and not Path(self.checkpoint).is_dir():
            raise ServerError(f"SolverReplicas: {self.checkpoint!r} is not a checkpoint "
                              "directory (`transformers serve` needs one; convert a GGUF "
                              "first: rzero.models.resolve_model)")
        if port_base is None:
            port_base = free_port_base(replicas, _probe_host(host))
        self.specs = replica_plan(replicas, gpus, tensor_parallel_size, port_base, host,
                                  checkpoint=self.checkpoint, engine=engine, url_host=url_host,
                                  model_name=model_name,
                                  gpu_memory_utilization=gpu_memory_utilization,
                                  extra_args=extra_args)
        self.model = model_name or self.checkpoint
        self.host = host
        self.urls_file = Path(urls_file) if urls_file is not None else None
        self.log_dir = Path(log_dir) if log_dir is not None else Path(
            tempfile.gettempdir()) / f"rzero-solver-{port_base}"
        self.log_paths = [self.log_dir / f"replica{s.index}-port{s.port}.log"
                          for s in self.specs]
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.processes: list[subprocess.Popen] = []

    @classmethod
    def from_config(cls, cfg: RZeroConfig, checkpoint: str | Path, *, replicas: int,
                    gpus: Sequence[int], urls_file: str | Path, **kwargs) -> SolverReplicas:
        """Replicas as the run's config asks for them: vLLM on GPU, tensor parallelism from
        generation.tensor_parallel_size; `transformers serve` on a CPU-only config."""
        engine = "vllm" if cfg.generation.backend == "vllm" or gpus else "transformers"
        tp = cfg.generation.tensor_parallel_size if engine == "vllm" else 1
        return cls(checkpoint, replicas=replicas, gpus=gpus, tensor_parallel_size=tp,
                   engine=engine, urls_file=urls_file, **kwargs)

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.specs]

    # ------------------------------------------------------------ start / watch / stop

    def start(self) -> SolverReplicas:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for spec, log_path in zip(self.specs, self.log_paths, strict=True):
                # unbuffered: the logs show each request as it arrives, not at exit
                env = {**os.environ, "CUDA_VISIBLE_DEVICES": spec.cuda_visible_devices,
                       "PYTHONUNBUFFERED": "1"}
                with open(log_path, "ab") as log:
                    self.processes.append(subprocess.Popen(
                        list(spec.command), stdout=log, stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                        preexec_fn=die_with_parent))
            self._wait_healthy()
            if self.urls_file is not None:
                write_text_atomic(self.urls_file, "".join(u + "\n" for u in self.urls))
        except BaseException:
            self.stop()
            raise
        return self

    def _root(self, spec: ReplicaSpec) -> str:
        return f"http://{_probe_host(self.host)}:{spec.port}"

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        pending = set(range(len(self.specs)))
        while pending:
            for i in sorted(pending):
                code = self.processes[i].poll()
                if code is not None:
                    raise self._died(i, code, "before it was healthy")
                try:
                    status, _ = _get_json(self._root(self.specs[i]) + "/health", timeout=2.0)
                except (OSError, urllib.error.URLError):
                    continue  # not listening yet
                if status == 200:
                    pending.discard(i)
            if pending and time.monotonic() > deadline:
                i = min(pending)
                raise _server_error(f"solver replica {i} at {self.specs[i].url} not healthy "
                                    f"after {self.startup_timeout:.0f} s",
                                    self.specs[i].command, self.log_paths[i])
            if pending:
                time.sleep(0.25)
        for i, spec in enumerate(self.specs):
            # a wrong model name makes every request a 400: say so once, here
            _, listing = _get_json(self._root(spec) + "/v1/models", timeout=10.0)
            names = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict)] \
                if isinstance(listing, dict) else []
            if self.model not in names:
                raise _server_error(f"solver replica {i} at {spec.url} does not list the "
                                    f"model {self.model!r} (it lists {names})",
                                    spec.command, self.log_paths[i])

    def _died(self, i: int, code: int, when: str = "") -> ServerError:
        spec = self.specs[i]
        what = f"solver replica {i} at {spec.url} exited with code {code}"
        return _server_error(f"{what} {when}".rstrip(), spec.command, self.log_paths[i])

    def check_alive(self) -> None:
        """Raise ServerError naming the URL and log path of the first replica that exited."""
        for i, proc in enumerate(self.processes):
            code = proc.poll()
            if code is not None:
                raise self._died(i, code)

    def monitor(self, interval: float = 2.0, stop: threading.Event | None = None) -> None:
        """Block until `stop` is set (or forever), raising as soon as a replica exits."""
        stop = stop or threading.Event()
        while not stop.wait(interval):
            self.check_alive()

    def stop(self) -> None:
        if self.urls_file is not None:
            self.urls_file.unlink(missing_ok=True)
        # signal every replica first, so their shutdowns overlap
        for proc in self.processes:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.processes:
            _stop(proc, self.stop_grace)

    def __enter__(self) -> SolverReplicas:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------- training launch


def accelerate_command(cfg: str | Path | RZeroConfig, *, num_processes: int,
                       gpus: Sequence[int], num_machines: int = 1, machine_rank: int = 0,
                       main_process_ip: str | None = None, main_process_port: int = 29500,
                       accelerate_config: str | Path = DEFAULT_ACCELERATE_CONFIG,
                       script_args: Sequence[str] | None = None,
                       entry: Sequence[str] = ("-m", "rzero"),
                       launcher: str = "accelerate") -> tuple[list[str], dict[str, str]]:
    """The `accelerate launch` argv and the environment additions for one training launch.

    `num_processes` is accelerate's: the total over all machines, one per training GPU, so
    it must equal len(gpus) x num_machines (`gpus` are this node's training GPUs, given to
    the processes through CUDA_VISIBLE_DEVICES; () trains on CPU). Mixed precision follows
    model.dtype, the same switch that sets GRPOConfig.bf16, so accelerate, the Trainer and
    DeepSpeed's "auto" agree. With a config path and no `script_args` the launched program
    is `rzero iterate --config PATH`.
    """
    if isinstance(cfg, RZeroConfig):
        if script_args is None:
            raise ValueError("accelerate_command: pass script_args when cfg is a config "
                             "object (there is no path to give `rzero iterate --config`)")
        config = cfg
    else:
        config = load_config(cfg)
        if script_args is None:
            script_args = ("iterate", "--config", str(cfg))
    gpus = tuple(gpus)
    if num_machines < 1:
        raise ValueError(f"num_machines={num_machines}: must be >= 1")
    if not 0 <= machine_rank < num_machines:
        raise ValueError(f"machine_rank={machine_rank}: must be in 0..{num_machines - 1}")
    if num_machines > 1 and not main_process_ip:
        raise ValueError("main_process_ip: needed with num_machines > 1 (the address of the "
                         "machine with machine_rank 0)")
    if num_processes < 1:
        raise ValueError(f"num_processes={num_processes}: must be >= 1")
    if gpus and num_processes != len(gpus) * num_machines:
        raise ValueError(f"num_processes={num_processes}: accelerate counts processes over "
                         f"all machines; {len(gpus)} GPUs x {num_machines} machines = "
                         f"{len(gpus) * num_machines}")
    argv = [launcher, "launch", "--config_file", str(accelerate_config),
            "--num_processes", str(num_processes), "--num_machines", str(num_machines),
            "--machine_rank", str(machine_rank)]
    if main_process_ip:
        argv += ["--main_process_ip", main_process_ip]
    argv += ["--main_process_port", str(main_process_port),
             "--mixed_precision", MIXED_PRECISION[config.model.dtype],
             *entry, *script_args]
    return argv, {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(gpus)}


def needs_launcher(cfg: RZeroConfig) -> bool:
    """Whether the config's training placement needs several processes (and we are not
    already one of them)."""
    launched = "WORLD_SIZE" in os.environ or "LOCAL_RANK" in os.environ
    return not launched and (len(cfg.run.train_gpus) > 1 or cfg.run.num_machines > 1)


def iterate_launch(cfg: RZeroConfig, iterate_args: Sequence[str],
                   env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """`accelerate launch ... -m rzero iterate ARGS` from run.train_gpus / run.num_machines;
    on a multi-node run this machine's rank and node 0's address come from RZERO_MACHINE_RANK
    and RZERO_MAIN_PROCESS_IP."""
    env = dict(os.environ if env is None else env)
    r = cfg.run
    gpus = tuple(r.train_gpus) or (0,)
    rank = int(env.get("RZERO_MACHINE_RANK", "0"))
    return accelerate_command(
        cfg, num_processes=len(gpus) * r.num_machines, gpus=gpus, num_machines=r.num_machines,
        machine_rank=rank, main_process_ip=env.get("RZERO_MAIN_PROCESS_IP"),
        main_process_port=r.main_process_port, accelerate_config=r.accelerate_config,
        script_args=("iterate", *iterate_args), launcher=env.get("RZERO_LAUNCHER",
                                                                  "accelerate"))


def format_command(argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """A shell line for a README or a log: `VAR=value prog args…`, quoted where needed."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join([*prefix, *(shlex.quote(a) for a in argv)])


# ---------------------------------------------------------------- `rzero serve-solver`


def add_serve_solver_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="model spec to serve: a checkpoint directory (as the run "
                                      "names it), the embedded model, or a hub id (vllm)")
    p.add_argument("--replicas", type=int, default=1, help="server replicas (default 1)")
    p.add_argument("--gpus", default="", help="GPUs for the replicas, e.g. 4,5,6,7 or 4-7; "
                                              "replicas x tensor-parallel-size of them")
    p.add_argument("--urls-file", default="solver_urls.txt",
                   help="file the replicas' URLs are written to, one a line; point "
                        "generation.solver_urls_file at it (default solver_urls.txt)")
    p.add_argument("--port-base", type=int, default=8100,
                   help="replica i listens on port-base + i (default 8100)")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per replica")
    p.add_argument("--engine", choices=ENGINES, default="vllm",
                   help="vllm (GPU) or transformers (`transformers serve`, CPU testing)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address the servers bind (0.0.0.0 to serve other nodes)")
    p.add_argument("--url-host", default=None,
                   help="host written into the URLs (default: --host, or this machine's "
                        "name when --host is 0.0.0.0)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help="vllm: share of each GPU for the engine (vLLM's default: 0.9)")
    p.add_argument("--log-dir", default=None,
                   help="replica logs (default: solver_logs/ beside the URLs file)")
    p.add_argument("--startup-timeout", type=float, default=900.0, help="seconds (default 900)")


def cmd_serve_solver(args) -> int:
    from rzero.models import resolve_model

    checkpoint = args.checkpoint
    if args.engine == "transformers" or checkpoint.startswith("embedded:"):
        checkpoint = resolve_model(checkpoint)  # a directory `transformers serve` can load
    url_host = args.url_host or (socket.gethostname() if args.host == "0.0.0.0" else None)
    urls_file = Path(args.urls_file)
    log_dir = Path(args.log_dir) if args.log_dir else urls_file.parent / "solver_logs"
    try:
        gpus = parse_gpus(args.gpus)
        replicas = SolverReplicas(
            checkpoint, replicas=args.replicas, gpus=gpus,
            tensor_parallel_size=args.tensor_parallel_size, port_base=args.port_base,
            host=args.host, url_host=url_host, engine=args.engine, urls_file=urls_file,
            log_dir=log_dir, gpu_memory_utilization=args.gpu_memory_utilization,
            startup_timeout=args.startup_timeout)
    except (ValueError, ServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for spec, log in zip(replicas.specs, replicas.log_paths, strict=True):
        where = f"GPU {spec.cuda_visible_devices}" if spec.gpus else "CPU"
        print(f"replica {spec.index} ({where}): {spec.url}  log {log}", flush=True)

    # `rzero` turns SIGTERM into KeyboardInterrupt (cli.main), so it stops the replicas the
    # same way Ctrl-C does
    try:
        with replicas:
            print(f"{len(replicas.specs)} replicas healthy, serving model {replicas.model!r}; "
                  f"URLs in {urls_file}\nuse: --set generation.solver_urls_file={urls_file}\n"
                  "Ctrl-C stops them", flush=True)
            replicas.monitor()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped the solver replicas", file=sys.stderr)
        return 0
    return 0
