"""The sandbox child: confine this process, then run one model-written program.

Started by `sandbox.py` as `python -S -s -B _runner.py` in a new session, with a JSON
payload on stdin (a file) and stdout pointing at a result file. Uses the standard library
only and imports nothing from rzero: it runs before and after the process is locked away
from the file system.

Order matters, and nothing from the payload runs until step 5:
  1. read the payload; keep stdout as the result descriptor, point 0/1/2 at /dev/null;
  2. import every module a program may import (no file can be read after step 3);
  3. as root: new network, IPC and UTS namespaces; chroot into the empty directory the
     parent made; drop supplementary groups, gid and uid to the unprivileged ids given;
  4. no-new-privileges, not dumpable, parent-death signal, resource limits (CPU, address
     space, no new processes, file size, no new descriptors, no core files);
  5. with a wall-clock alarm: parse the input literal, exec the program with filtered
     builtins and imports, call `f`, take `repr` of the result;
  6. write one JSON line to the result descriptor and `_exit` (no user finalizers run).
"""

import ast
import builtins
import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x40000000, 0x08000000, 0x04000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38


class SandboxTimeout(BaseException):
    """Raised by the alarm; a BaseException so that `except Exception` does not catch it."""


def _on_alarm(signum, frame):
    raise SandboxTimeout()


def _preload(names):
    for name in names:
        try:
            __import__(name)
        except ImportError:
            pass
    import collections.abc  # noqa: F401  (submodule, imported lazily by some programs)


def _confine(payload, probe):
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    netns = False
    if payload["root"] is not None:  # only when we started as root
        # best effort: root without CAP_SYS_ADMIN (a default Docker container) cannot, and
        # RLIMIT_NOFILE below already stops any socket from being created
        netns = libc.unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == 0
        os.chroot(payload["root"])
        os.chdir("/")
        os.setgroups([])
        os.setresgid(payload["gid"], payload["gid"], payload["gid"])
        os.setresuid(payload["uid"], payload["uid"], payload["uid"])
    if probe is not None:
        probe["netns"] = netns
        probe["interfaces"] = _interfaces()
        probe["loopback_connect"] = _try_connect()
        probe["root_listing"] = os.listdir("/")
        probe["write"] = _try_write()
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # no core dump even through a piped core_pattern, where RLIMIT_CORE does not apply
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # set after the uid change, which clears it; and the parent may already be gone
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
    cpu = int(payload["timeout_s"]) + 1
    limits = [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (payload["memory_bytes"],) * 2),
        (resource.RLIMIT_NPROC, (0, 0)),
        (resource.RLIMIT_FSIZE, (payload["fsize_bytes"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
        # descriptors 0-3 are open: with a limit of 4 no file or socket can be opened
        (resource.RLIMIT_NOFILE, (4, 4)),
    ]
    for which, value in limits:
        resource.setrlimit(which, value)
    # writing past RLIMIT_FSIZE then fails with EFBIG instead of killing us mid-result
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _interfaces():
    try:
        import socket

        return [name for _, name in socket.if_nameindex()]
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _try_connect():
    try:
        import socket

        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect(("127.0.0.1", 22))
        s.close()
        return "connected"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _try_write():
    try:
        with open("probe-write", "w") as f:
            f.write("x")
        return "succeeded"
    except OSError as e:
        return f"OSError: {e}"


def _probe_after(probe):
    """What a trusted probe sees once confined (tests use it before any hostile test)."""
    probe.update(
        uid=os.getuid(), euid=os.geteuid(), gid=os.getgid(), groups=os.getgroups(), cwd=os.getcwd()
    )
    libc = ctypes.CDLL(None)
    probe["no_new_privs"], probe["dumpable"] = libc.prctl(39, 0, 0, 0, 0), libc.prctl(3, 0, 0, 0, 0)
    probe["rlimits"] = {
        name: list(resource.getrlimit(getattr(resource, name)))
        for name in (
            "RLIMIT_CPU",
            "RLIMIT_AS",
            "RLIMIT_NPROC",
            "RLIMIT_FSIZE",
            "RLIMIT_NOFILE",
            "RLIMIT_CORE",
        )
    }
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        probe["fork"] = "succeeded"
    except OSError as e:
        probe["fork"] = f"OSError: {e}"
    probe["write_after_limits"] = _try_write()
    return {"ok": True, "output": json.dumps(probe, sort_keys=True), "error": None}


def _safe_builtins(payload):
    real_import = builtins.__import__
    allowed = frozenset(payload["allowed_modules"])

    def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name.partition(".")[0] not in allowed or name not in sys.modules:
            raise ImportError(f"import of {name!r} is not allowed in the sandbox")
        return real_import(name, globals, locals, fromlist, level)

    safe = {k: v for k, v in vars(builtins).items() if k not in payload["forbidden_builtins"]}
    safe["__import__"] = restricted_import
    return safe


def _describe(e):
    try:
        return f"{type(e).__name__}: {_without_addresses(str(e)[:2000])[:300]}"
    except BaseException:  # a program's own exception may fail to print
        return type(e).__name__


def _without_addresses(text):
    """`text` with every ` at 0x<hex>` of a default repr cut (`<ast.BinOp object at
    0x7f...>` -> `<ast.BinOp object>`): an address differs from process to process, and an
    error is part of what a run logs and compares. No `re`: the runner imports only what
    a program may find already imported."""
    out, i = [], 0
    while (j := text.find(" at 0x", i)) >= 0:
        k = j + len(" at 0x")
        while k < len(text) and text[k] in "0123456789abcdefABCDEF":
            k += 1
        out.append(text[i:j] if k > j + len(" at 0x") else text[i:k])
        i = k
    return "".join(out) + text[i:]


def _run(payload):
    namespace = {"__name__": "__sandbox__"}
    namespace["__builtins__"] = _safe_builtins(payload) if payload["filter"] else builtins
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, payload["timeout_s"])
    try:
        try:
            args = ast.literal_eval(payload["inputs"])
        except Exception as e:
            error = f"inputs are not a literal: {_describe(e)}"
            return {"ok": False, "output": None, "error": error}
        if not isinstance(args, tuple):
            args = (args,)
        exec(compile(payload["program"], "<program>", "exec"), namespace)
        f = namespace.get("f")
        if not callable(f):
            return {"ok": False, "output": None, "error": "the program defines no function f"}
        output = repr(f(*args))
        if not isinstance(output, str):
            return {"ok": False, "output": None, "error": "repr did not return a string"}
        if len(output) > payload["max_output_chars"]:
            return {
                "ok": False,
                "output": None,
                "error": f"output longer than {payload['max_output_chars']} characters",
            }
        return {"ok": True, "output": output, "error": None}
    except SandboxTimeout:
        return {"ok": False, "output": None, "error": f"timeout after {payload['timeout_s']}s"}
    except BaseException as e:  # SystemExit, MemoryError, RecursionError, … all mean "not ok"
        return {"ok": False, "output": None, "error": _describe(e)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main():
    payload = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    result_fd = os.dup(1)  # 3: the parent's result file
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    _preload(payload["allowed_modules"] + (["socket"] if payload["probe"] else []))
    probe = {} if payload["probe"] else None
    try:
        _confine(payload, probe)
    except BaseException as e:
        result = {"ok": False, "output": None, "error": f"sandbox setup failed: {_describe(e)}"}
    else:
        try:
            result = _probe_after(probe) if probe is not None else _run(payload)
        except BaseException as e:  # e.g. the alarm going off after _run's own handler
            result = {"ok": False, "output": None, "error": f"sandbox: {_describe(e)}"}
    try:
        data = (json.dumps(result, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        while data:
            data = data[os.write(result_fd, data) :]
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
