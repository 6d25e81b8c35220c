"""rzero.engine.serving against a real `transformers serve` process with a tiny checkpoint, and
against fake server commands for the failure paths."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import fake_model_server

from rzero.engine import serving
from rzero.engine.serving import ServerError, free_port, serve_checkpoint


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # raises if the port were taken


@pytest.mark.slow
def test_transformers_serve_answers_chat_and_stops(tiny_checkpoint, tmp_path):
    from openai import OpenAI

    log = tmp_path / "server.log"
    with serve_checkpoint(tiny_checkpoint, log_path=log) as served:
        # a pinned `transformers serve` expects the checkpoint path, as given, as model name
        assert served.model == str(tiny_checkpoint)
        assert served.base_url == f"http://127.0.0.1:{served.port}/v1"
        client = OpenAI(base_url=served.base_url, api_key="EMPTY", max_retries=0)
        resp = client.chat.completions.create(
            model=served.model,
            messages=[{"role": "user", "content": "What is 2+3?"}],
            temperature=0,
            max_tokens=8,
        )
        assert isinstance(resp.choices[0].message.content, str)
        assert resp.usage.completion_tokens >= 1
        # any other model name is refused by the pinned server
        req = urllib.request.Request(
            served.base_url + "/chat/completions",
            method="POST",
            headers={"Content-Type": "application/json"},
            data=json.dumps(
                {"model": "other", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
            ).encode(),
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 400
        port = served.port
    assert not _port_open(port)
    assert "Uvicorn running" in log.read_text()


def test_gguf_file_is_refused_before_starting(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ServerError, match="not a checkpoint directory"):
        with serve_checkpoint(gguf):
            pass


def test_server_that_dies_reports_its_log_tail(tmp_path):
    def crashing(path, host, port):
        return [sys.executable, "-c", "print('loading failed: no weights'); raise SystemExit(3)"]

    with pytest.raises(ServerError) as err:
        with serve_checkpoint(tmp_path, log_path=tmp_path / "s.log", command=crashing):
            pass
    assert "exited with code 3" in str(err.value)
    assert "loading failed: no weights" in str(err.value)


@pytest.mark.slow
def test_server_that_never_gets_healthy_times_out_and_is_killed(tmp_path):
    marker = tmp_path / "pid"

    # a shell, not Python: it must have written the marker and its line well within the
    # 2 s startup timeout, and an interpreter starting on a loaded machine can use much of it
    def hanging(path, host, port):
        return [
            "sh",
            "-c",
            f"echo $$ > {shlex.quote(str(marker))}; echo still loading; exec sleep 120",
        ]

    with pytest.raises(ServerError, match="not healthy .* after 2 s") as err:
        with serve_checkpoint(
            tmp_path, log_path=tmp_path / "s.log", command=hanging, startup_timeout=2
        ):
            pass
    assert "still loading" in str(err.value)
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):  # stopped, and reaped by serve()
        os.kill(pid, 0)


def test_command_is_a_parameter_and_model_name_is_checked(tmp_path):
    # stands in for `vllm serve PATH --served-model-name NAME`
    def fake(path, host, port):
        return fake_model_server(port, "served-name")

    with serve_checkpoint(tmp_path, command=fake, model_name="served-name") as served:
        assert served.model == "served-name"
        assert _port_open(served.port)
    with pytest.raises(ServerError, match="does not list the model 'wrong'"):
        with serve_checkpoint(tmp_path, command=fake, model_name="wrong"):
            pass


def test_a_picked_port_taken_before_the_server_binds_it_is_replaced(tmp_path, monkeypatch):
    # the race forced: the first port picked is bound by another socket when the server starts
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        lost = taken.getsockname()[1]
        picks = iter([lost])
        real = serving.free_port
        monkeypatch.setattr(
            serving, "free_port", lambda host="127.0.0.1": next(picks, None) or real(host)
        )
        log = tmp_path / "s.log"
        with serve_checkpoint(
            tmp_path,
            log_path=log,
            model_name="m",
            command=lambda path, host, port: fake_model_server(port, "m"),
        ) as served:
            assert served.port != lost and _port_open(served.port)
        assert "address already in use" in log.read_text().lower()
    # a port that was asked for is not replaced: its server's failure is the error
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(ServerError, match="exited with code 1"):
            with serve_checkpoint(
                tmp_path,
                port,
                log_path=log,
                model_name="m",
                command=lambda path, host, port: fake_model_server(port, "m"),
            ):
                pass


def test_a_server_dies_with_the_process_that_started_it(tmp_path):
    # the parent starts a long-lived child as a model server is started, then dies by
    # SIGKILL (no cleanup code runs); the kernel must take the child with it
    parent = textwrap.dedent("""
        import os, signal, subprocess, sys
        from rzero.engine.serving import die_with_parent
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 start_new_session=True, preexec_fn=die_with_parent)
        print(child.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", parent], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -9
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return  # gone
        # a zombie (dead, not yet reaped by init) counts as gone
        stat = Path(f"/proc/{child}/stat")
        if stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"):
            return
        time.sleep(0.1)
    os.kill(child, 9)
    raise AssertionError(f"child {child} outlived its parent")


class _Death:
    """A check that finds the server dead from `after` seconds on."""

    def __init__(self, after: float):
        self.at = time.monotonic() + after
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if time.monotonic() >= self.at:
            raise ServerError("solver server at http://127.0.0.1:1/v1 exited with code -9")


@pytest.mark.parametrize("busy", ["sleeping", "computing"])
def test_a_server_found_dead_is_raised_in_the_main_thread_wherever_it_is(busy):
    import signal

    before = signal.getsignal(signal.SIGUSR1)
    start = time.monotonic()
    with pytest.raises(ServerError, match="exited with code -9"):
        with serving.raised_when_dead(_Death(after=0.5), interval=0.1):
            if busy == "sleeping":
                time.sleep(60)  # a blocking call, as a wait on a socket
            else:
                while time.monotonic() - start < 60:  # a rollout or an update
                    sum(range(1000))
    assert time.monotonic() - start < 5
    assert signal.getsignal(signal.SIGUSR1) == before


def test_nothing_is_raised_while_the_server_lives_or_after_the_block():
    import signal

    before = signal.getsignal(signal.SIGUSR1)
    check = _Death(after=0.6)
    with serving.raised_when_dead(check, interval=0.1):
        time.sleep(0.4)
    assert check.calls >= 2
    time.sleep(0.5)  # the check would now fail: the watch has ended with the block
    assert signal.getsignal(signal.SIGUSR1) == before
