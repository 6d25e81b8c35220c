"""The libraries' own switches that keep a run's terminal to the run (`rzero.engine.logs`):
set only where the user has not set them, undone for a server's own log file, and left alone
with --verbose."""

from __future__ import annotations

import warnings

import pytest

from rzero.engine.logs import MARK, launch_env, quiet_libraries, server_env, unfilter_warnings


def test_quiet_sets_what_is_unset_and_a_server_log_gets_vllm_info_back():
    env = {"TORCH_CPP_LOG_LEVEL": "INFO"}  # the user's own choice stays
    quiet_libraries(env)
    assert env["VLLM_LOGGING_LEVEL"] == "ERROR" and env["TORCH_CPP_LOG_LEVEL"] == "INFO"
    assert env[MARK] == "VLLM_LOGGING_LEVEL"
    server = server_env(dict(env))
    assert server["VLLM_LOGGING_LEVEL"] == "INFO" and server["TORCH_CPP_LOG_LEVEL"] == "INFO"
    user = {"VLLM_LOGGING_LEVEL": "DEBUG"}
    quiet_libraries(user)
    server = server_env(dict(user))
    assert server["VLLM_LOGGING_LEVEL"] == "DEBUG" and "TORCH_CPP_LOG_LEVEL" not in server


def test_the_launch_sets_torchruns_own_thread_default_unless_verbose():
    assert launch_env({}, verbose=False) == {"OMP_NUM_THREADS": "1"}
    assert launch_env({"OMP_NUM_THREADS": "2"}, verbose=False) == {"OMP_NUM_THREADS": "2"}
    assert launch_env({}, verbose=True) == {}


def test_verbose_drops_rzeros_warning_filter():
    import rzero  # noqa: F401  (installs the filter)

    saved = warnings.filters[:]
    try:
        with pytest.warns(FutureWarning):
            unfilter_warnings()
            warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning, stacklevel=1)
    finally:
        warnings.filters[:] = saved


def test_iterate_forwards_verbose_to_its_ranks(monkeypatch, tmp_path):
    from rzero.cli import commands, main

    seen = {}

    def fake_launch(argv, env, log_path=None):
        seen["argv"], seen["env"] = argv, env
        return 0

    monkeypatch.setattr(commands, "launch_and_wait", fake_launch)
    monkeypatch.setattr("rzero.preflight.check_launch", lambda *a, **k: None)
    monkeypatch.setattr("rzero.preflight.check", lambda *a, **k: None)
    monkeypatch.setattr("rzero.preflight.check_coerror", lambda *a, **k: None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    args = ["iterate", "--set", "run.cpu_processes=2", "--run-dir", str(tmp_path / "r")]
    assert main([*args, "--verbose"]) == 0
    assert "--verbose" in seen["argv"] and "OMP_NUM_THREADS" not in seen["env"]
    assert main(args) == 0
    assert "--verbose" not in seen["argv"] and seen["env"]["OMP_NUM_THREADS"] == "1"
