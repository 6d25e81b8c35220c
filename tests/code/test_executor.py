"""The sandbox: hostile programs come back not ok, in time, leaving nothing behind.

Order of trust: the probe tests check the operating-system walls with a trusted program
(uid, rlimits, network namespace, read-only empty root) before any hostile program runs;
the tests that switch the filter off (`filter_code=False`, to show the walls hold alone)
skip with a reason unless the probe shows the uid drop and RLIMIT_NPROC are in force.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from rzero.executor.sandbox import (
    DEFAULT_LIMITS,
    Limits,
    check_deterministic,
    confined_as_root,
    run_many,
    run_program,
    sandbox_probe,
)

T = 0.5  # timeout for hostile programs: short, so the file stays fast
GRACE = Limits(startup_grace_s=1.0)
SLACK = 2.0  # start-up and a loaded 2-core machine
# the sandbox uids of this process's pid bucket (another process's sandboxes on the same
# machine use other buckets, so a parallel run is not mistaken for a leftover of ours)
UID_LO = DEFAULT_LIMITS.uid_base + (os.getpid() % 4096) * 256
UID_HI = UID_LO + 256


def _procs() -> list[tuple[int, int, int]]:
    """(pid, ppid, uid) of every live process."""
    rows = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith("Z"):
            continue
        rows.append((int(entry), int(fields["PPid"]), int(fields["Uid"].split()[0])))
    return rows


def _leftovers() -> set[tuple[int, int, int]]:
    """Children of this process and processes with one of this process's sandbox uids."""
    me = os.getpid()
    return {p for p in _procs() if p[1] == me or UID_LO <= p[2] < UID_HI}


def _sandbox_dirs() -> set[str]:
    return {d for d in os.listdir(tempfile.gettempdir()) if d.startswith("rzero-sandbox-")}


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path, monkeypatch):
    """Every test: no child process, no sandbox-uid process, no sandbox directory remains."""
    # the sandbox's working directories go to this test's own temporary folder, so another
    # test process's sandbox (pytest-xdist) is not counted as this test's leftover
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # what an earlier test file left running on purpose (the equivalence worker is a
    # long-lived child of this process) is not this test's leftover
    before, dirs = _leftovers(), _sandbox_dirs()
    yield
    assert _leftovers() - before == set()
    assert _sandbox_dirs() <= dirs


@pytest.fixture(scope="module")
def probe() -> dict:
    return sandbox_probe()


@pytest.fixture(scope="module")
def walls(probe):
    """Skip unless the unprivileged uid and RLIMIT_NPROC = 0 are verified in the child."""
    if not confined_as_root():
        pytest.skip(
            "not running as root: no uid drop, chroot or netns, so hostile code "
            "without the filter is not run here"
        )
    if probe["uid"] in (0, os.getuid()) or probe["rlimits"]["RLIMIT_NPROC"] != [0, 0]:
        pytest.skip(f"uid drop or RLIMIT_NPROC not in force in the child: {probe}")
    return probe


def hostile(program: str, timeout_s: float = T, **kw):
    """Run, and check it is not ok and took no longer than timeout + grace + slack."""
    start = time.monotonic()
    result = run_program(program, "1", timeout_s, limits=kw.pop("limits", GRACE), **kw)
    elapsed = time.monotonic() - start
    assert not result.ok and result.output is None and result.error, result
    assert elapsed < timeout_s + GRACE.startup_grace_s + SLACK, elapsed
    return result


# -- the walls, seen by a trusted probe -----------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs root")
def test_probe_runs_as_unprivileged_sandbox_uid(probe):
    assert probe["uid"] == probe["euid"] == probe["gid"]
    assert UID_LO <= probe["uid"] < UID_HI and probe["groups"] == []


def test_probe_rlimits_are_set(probe):
    limits = probe["rlimits"]
    # timeout 5 s -> RLIMIT_CPU soft 5 + 1 = 6 s, hard 7 s
    assert limits["RLIMIT_CPU"] == [6, 7]
    assert limits["RLIMIT_AS"] == [DEFAULT_LIMITS.memory_bytes] * 2
    assert limits["RLIMIT_NPROC"] == [0, 0] and limits["RLIMIT_CORE"] == [0, 0]
    assert limits["RLIMIT_NOFILE"] == [4, 4]
    assert limits["RLIMIT_FSIZE"][0] > 0


def test_probe_no_new_privileges_and_not_dumpable(probe):
    assert (probe["no_new_privs"], probe["dumpable"]) == (1, 0)


def test_probe_cannot_fork(probe):
    assert probe["fork"].startswith("OSError")  # EAGAIN: RLIMIT_NPROC holds for this uid


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespace needs root")
def test_probe_has_no_network(probe):
    if not probe["netns"]:
        pytest.skip(
            "root without CAP_SYS_ADMIN: no network namespace (RLIMIT_NOFILE and the "
            "filter still stop sockets)"
        )
    assert probe["interfaces"] == ["lo"]  # a fresh namespace: loopback only, and down
    assert "unreachable" in probe["loopback_connect"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_probe_root_is_empty_and_read_only(probe):
    assert probe["root_listing"] == []
    assert "Permission denied" in probe["write"]
    assert probe["write_after_limits"].startswith("OSError")


# -- positive --------------------------------------------------------------------------------


def test_repr_of_the_result():
    program = "def f(a, b):\n    return {'sum': a + b, 'pair': (a, b)}"
    assert run_program(program, "(1, 2)", 2).output == "{'sum': 3, 'pair': (1, 2)}"


def test_tuple_is_the_argument_list_and_other_values_one_argument():
    identity = "def f(x):\n    return x"
    assert run_program(identity, "'Hello World'", 2).output == "'Hello World'"
    assert run_program(identity, "[1, 2]", 2).output == "[1, 2]"
    assert run_program(identity, "(7,)", 2).output == "7"  # a 1-tuple: one argument
    assert run_program(identity, "((1, 2),)", 2).output == "(1, 2)"
    assert run_program("def f(a, b):\n    return a * b", "3, 4", 2).output == "12"


def test_allowed_imports_classes_and_prints_work():
    program = (
        "from collections import Counter\nimport math\n"
        "class Box:\n    def __init__(self, v):\n        self.v = v\n"
        "def f(s):\n    print('noise' * 1000)\n"
        "    return Box(Counter(s).most_common(1)[0]).v, math.isqrt(17)"
    )
    assert run_program(program, "'abca'", 2).output == "(('a', 2), 4)"


def test_run_many_keeps_order_and_replaces_a_hung_worker():
    loop = "def f(x):\n    while True:\n        pass"
    double = "def f(x):\n    return 2 * x"
    jobs = [(double, "1"), (loop, "0"), (double, "2"), (double, "3")]
    results = run_many(jobs, T, max_workers=2, limits=GRACE)
    assert [r.output for r in results] == ["2", None, "4", "6"]
    assert "timeout" in results[1].error


def test_determinism_check():
    same = check_deterministic("def f(x):\n    return sorted({'b', 'a', x})", "'c'", 2)
    assert same.ok and same.output == "['a', 'b', 'c']"
    # random is seeded from the OS in each process: two runs differ
    noisy = check_deterministic("import random\ndef f(x):\n    return random.random()", "0", 2)
    assert not noisy.ok and "nondeterministic" in noisy.error


def test_environment_is_minimal(walls, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    program = "import os\ndef f(x):\n    return sorted(os.environ)"
    keys = eval(run_program(program, "0", 2, filter_code=False).output)  # our own repr
    assert "OPENAI_API_KEY" not in keys and set(keys) <= {
        "PATH",
        "LC_ALL",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
    }


# -- hostile, stopped by the filter or the limits -------------------------------------------


def test_infinite_loop():
    assert "timeout" in hostile("def f(x):\n    while True:\n        pass").error


def test_sleep():
    assert "timeout" in hostile("import time\ndef f(x):\n    time.sleep(60)").error


def test_loop_that_swallows_the_alarm_is_killed_by_the_parent():
    program = (
        "def f(x):\n    while True:\n        try:\n            while True:\n"
        "                pass\n        except BaseException:\n            pass"
    )
    # a short grace, so the parent's wall-clock kill (0.5 + 0.2 s) comes before
    # RLIMIT_CPU (1 s of CPU time, which one thread cannot reach in 0.7 s of wall time)
    short = Limits(startup_grace_s=0.2)
    assert "killed" in hostile(program, limits=short).error


@pytest.mark.parametrize(
    "bomb", ["'a' * 10**10", "[0] * 10**9", "[[0] * 10**4 for _ in range(10**6)]"]
)
def test_memory_bombs(bomb):
    small = Limits(memory_bytes=128 * 2**20, startup_grace_s=1.0)
    hostile(f"def f(x):\n    return len({bomb})", timeout_s=2, limits=small)


@pytest.mark.parametrize(
    "program",
    [
        "import os\ndef f(x):\n    return os.system('id')",
        "import subprocess\ndef f(x):\n    return subprocess.run(['id'])",
        "import sys\ndef f(x):\n    sys.exit(0)",
        "import socket\ndef f(x):\n    return socket.create_connection(('127.0.0.1', 22))",
        "def f(x):\n    return __import__('os').getcwd()",
        "def f(x):\n    return open('/etc/shadow').read()",
        "def f(x):\n    return ().__class__.__bases__[0].__subclasses__()",
        "def f(x):\n    return getattr(object, '__subclasses__')()",
        "from operator import attrgetter\ndef f(x):\n    return attrgetter('_' * 2 + 'class')",
        "def f(x):\n    return '{0.__class__}'.format(x)",
        "def f(x):\n    return f.__globals__['__builtins__']",
        "def f(x):\n    return (lambda: 0).__code__",
        "def f(x):\n    return eval('1 + 1')",
        "def f(x):\n    exec('y = 1')",
        "def f(x):\n    return compile('1', 'a', 'eval')",
        "def f(x):\n    return input()",
        "def f(x):\n    breakpoint()",
        "import importlib\ndef f(x):\n    return importlib.import_module('os')",
        "import builtins\ndef f(x):\n    return builtins.open",
        "import ctypes\ndef f(x):\n    return ctypes.CDLL(None)",
        "import pathlib\ndef f(x):\n    return pathlib.Path('/etc/passwd').read_text()",
        "import threading\ndef f(x):\n    return threading.Thread",
        "import multiprocessing\ndef f(x):\n    return multiprocessing.Process",
        "import shutil, io, pickle\ndef f(x):\n    return 1",
        "def f(x) return x",
        "from . import secrets\ndef f(x):\n    return 1",
    ],
)
def test_refused_by_the_filter(program):
    result = hostile(program)
    assert result.error.startswith("refused:")


def test_sys_exit_through_system_exit():
    assert "SystemExit" in hostile("def f(x):\n    raise SystemExit(0)").error


def test_import_outside_the_allowlist_fails_at_run_time_too(walls):
    # the filter is off, and the chroot leaves nothing on disk to import from
    error = hostile("def f(x):\n    import subprocess\n    return 1", filter_code=False).error
    # not found on disk, or no descriptor left to look with (RLIMIT_NOFILE)
    assert error.startswith(("ModuleNotFoundError", "OSError: [Errno 24]")), error


def test_huge_output():
    assert "longer than" in hostile("def f(x):\n    return 'a' * 100_000").error


def test_deep_recursion():
    assert "RecursionError" in hostile("def f(x):\n    return f(x + 1)").error


def test_deep_recursion_past_the_c_stack_crashes_only_the_child(walls):
    # json's C parser recurses on the C stack once the recursion limit is lifted
    program = (
        "import sys, json\nsys.setrecursionlimit(10**7)\n"
        "def f(x):\n    return json.loads('[' * 10**5 + ']' * 10**5)"
    )
    assert "SIGSEGV" in hostile(program, filter_code=False).error


@pytest.mark.parametrize(
    "inputs",
    [
        "__import__('os').system('id')",
        "f(1)",
        "[x for x in range(3)]",
        "1 +",
        "open('/etc/shadow')",
    ],
)
def test_inputs_that_are_not_literals(inputs):
    result = run_program("def f(x):\n    return x", inputs, T, limits=GRACE)
    assert not result.ok and "not a literal" in result.error


def test_oversized_program_and_inputs():
    assert "longer than" in run_program("#" * 30_000 + "\ndef f(x): return x", "1", T).error
    assert "longer than" in run_program("def f(x): return x", "1" * 20_000, T).error


# -- hostile with the filter off: the operating-system walls alone --------------------------


def test_fork_bomb_is_stopped_by_rlimit_nproc(walls):
    # bounded: at most 200 forks, each child exits by itself; with RLIMIT_NPROC = 0 for the
    # sandbox uid the first fork fails with EAGAIN
    program = (
        "import os, time\ndef f(x):\n    for _ in range(200):\n"
        "        if os.fork() == 0:\n            time.sleep(0.2)\n            os._exit(0)\n"
        "    return 'forked'"
    )
    assert "BlockingIOError" in hostile(program, filter_code=False).error


@pytest.fixture
def outside(tmp_path):
    """A world-writable directory outside the sandbox, which a nobody process could use."""
    tmp_path.chmod(0o777)
    return tmp_path / "escaped.txt"


def test_file_write_outside_fails(walls, outside):
    program = f"def f(x):\n    open({str(outside)!r}, 'w').write('pwned')\n    return 1"
    hostile(program, filter_code=False)
    assert not outside.exists()


def test_file_write_inside_the_temp_dir_fails(walls):
    hostile("def f(x):\n    open('inside.txt', 'w').write('x')\n    return 1", filter_code=False)


def test_os_system_cannot_run_a_command(walls, outside):
    program = f"import os\ndef f(x):\n    assert os.system('touch {outside}') == 0"
    hostile(program, filter_code=False)
    assert not outside.exists()


def test_reading_etc_shadow_fails(walls):
    hostile("def f(x):\n    return open('/etc/shadow').read()", filter_code=False)


def test_no_connection_to_loopback(walls):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    try:
        program = (
            "def f(x):\n    import socket\n"
            f"    return socket.create_connection(('127.0.0.1', {port}), 1)"
        )
        hostile(program, filter_code=False)
        with pytest.raises(TimeoutError):  # nobody knocked
            server.accept()
    finally:
        server.close()


def test_cannot_kill_the_parent(walls):
    program = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)"
    assert "PermissionError" in hostile(program, filter_code=False).error
    # and we are still here to say so


# -- configuration ---------------------------------------------------------------------------


def test_limits_name_the_field_and_the_fix():
    with pytest.raises(ValueError, match=r"Limits.memory_bytes=1 .* at least 64 MiB"):
        Limits(memory_bytes=1)


def test_timeout_must_be_positive():
    with pytest.raises(ValueError, match="timeout_s=0"):
        run_program("def f(x):\n    return x", "1", 0)
