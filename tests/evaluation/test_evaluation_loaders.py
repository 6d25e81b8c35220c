"""Benchmark loaders: local JSONL, names and aliases, the hub (offline, hanging, faked) and
the JSONL cache."""

from __future__ import annotations

import json
import socket
import time

import pytest

from rzero.evaluation import loaders


def test_jsonl_round_trip(tmp_path):
    rows = [
        {"problem": "What is $1+1$?", "answer": "2"},
        {"id": "q7", "problem": "Half of 3?", "answer": "\\frac{3}{2}", "level": 2},
        {"problem": "AIME-style", "answer": 204},
    ]  # a numeric answer becomes a string
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    name, items = loaders.load_benchmark(str(path))
    assert name == "mine"
    assert [i["problem"] for i in items] == [r["problem"] for r in rows]
    assert [i["answer"] for i in items] == ["2", "\\frac{3}{2}", "204"]
    assert [i["id"] for i in items] == ["mine-0", "q7", "mine-2"]
    assert items[1]["level"] == 2  # extra fields are kept
    name, named = loaders.load_benchmark(f"gsm8k-local={path}")  # name=path form
    assert name == "gsm8k-local"
    assert [i["id"] for i in named] == ["gsm8k-local-0", "q7", "gsm8k-local-2"]


def test_bad_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"problem": "a", "answer": "1"}\n{"problem": "b", "answer":\n')
    with pytest.raises(loaders.BenchmarkError, match=r"bad\.jsonl:2: invalid JSON"):
        loaders.load_benchmark(str(path))
    path.write_text('{"problem": "a", "answer": "1"}\n\n{"question": "b", "answer": "2"}\n')
    with pytest.raises(loaders.BenchmarkError, match=r"bad\.jsonl:3: missing field\(s\) 'problem'"):
        loaders.load_benchmark(str(path))
    with pytest.raises(loaders.BenchmarkError, match="no such file"):
        loaders.load_benchmark(str(tmp_path / "absent.jsonl"))


def test_unknown_benchmark_name():
    with pytest.raises(loaders.BenchmarkError, match="unknown benchmark 'mathh500'"):
        loaders.load_benchmark("mathh500")


def test_hub_names_and_aliases():
    assert loaders.hub_name("MATH-500") == "math500"
    assert loaders.hub_name("aime_2025") == "aime25"
    assert loaders.hub_name("OlympiadBench") == "olympiadbench"
    assert loaders.hub_name("mathh500") is None
    assert set(loaders.HUB_BENCHMARKS) == {
        "math500",
        "gsm8k",
        "amc23",
        "minerva",
        "olympiadbench",
        "aime24",
        "aime25",
    }


def test_gsm8k_answer_is_the_text_after_hashes():
    source = loaders.HUB_BENCHMARKS["gsm8k"]
    assert loaders._hub_answer("She pays 3 * 400 = 1200.\n#### 1,200", source) == "1200"
    assert (
        loaders._hub_answer(["$\\frac{1}{2}$", "3"], loaders.HUB_BENCHMARKS["olympiadbench"])
        == "$\\frac{1}{2}$, 3"
    )


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    """No rzero JSONL cache and an empty `datasets` cache, whatever this machine holds."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("RZERO_CACHE", str(tmp_path / "rzero"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.fixture
def silent_server():
    """A local TCP port that accepts connections and never answers: a hanging hub."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def _assert_unavailable_fast(name: str) -> str:
    t0 = time.perf_counter()
    with pytest.raises(loaders.BenchmarkUnavailable) as info:
        loaders.load_benchmark(name)
    elapsed = time.perf_counter() - t0
    message = str(info.value)
    assert "\n" not in message
    assert f"benchmark {loaders.hub_name(name)!r}" in message
    assert "unreachable" in message
    assert "`problem` and `answer`" in message
    assert elapsed < 15, f"took {elapsed:.1f} s"
    return message


def test_hub_loader_connection_refused_fails_fast(empty_caches, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    assert "Connection refused" in _assert_unavailable_fast("math500")


@pytest.mark.slow
def test_hub_loader_hanging_hub_fails_fast(empty_caches, silent_server, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", silent_server)
    t0 = time.perf_counter()
    _assert_unavailable_fast("gsm8k")
    # the probe gives up after HUB_TIMEOUT_S = 3 s instead of waiting on the socket
    assert time.perf_counter() - t0 >= loaders.HUB_TIMEOUT_S - 0.1


def test_hub_loader_real_endpoint(empty_caches):
    if loaders.hub_problem(loaders.HUB_BENCHMARKS["aime24"].repo) is None:
        # a machine with network: the real download works
        assert len(loaders.load_benchmark("aime24")[1]) == 30
    else:  # this sandbox: no route to huggingface.co
        _assert_unavailable_fast("aime24")


def test_hub_loader_maps_fields_and_caches(empty_caches, tmp_path, monkeypatch):
    # the online branch, with the hub replaced by an in-memory dataset
    import datasets

    calls = []

    def fake_load_dataset(repo, config, split):
        calls.append((repo, config, split))
        return datasets.Dataset.from_list([{"question": "Q?", "answer": "3 * 400\n#### 1,200"}])

    monkeypatch.setattr(loaders, "hub_problem", lambda repo: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert loaders.load_benchmark("GSM8K") == (
        "gsm8k",
        [{"id": "gsm8k-0", "problem": "Q?", "answer": "1200"}],
    )
    assert calls == [("openai/gsm8k", "main", "test")]
    assert (tmp_path / "rzero" / "benchmarks" / "gsm8k.jsonl").is_file()
    loaders.load_benchmark("gsm8k")  # the second load reads the JSONL cache, not the hub
    assert len(calls) == 1
    with pytest.raises(loaders.BenchmarkError, match="has no field.*problem"):
        loaders.load_benchmark("math500")  # the fake rows have `question`, MATH-500 `problem`


def test_hub_loader_prefers_the_jsonl_cache(empty_caches, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    cached = tmp_path / "rzero" / "benchmarks" / "aime25.jsonl"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps({"id": "aime25-0", "problem": "p", "answer": "7"}) + "\n")
    assert loaders.load_benchmark("AIME-2025") == (
        "aime25",
        [{"id": "aime25-0", "problem": "p", "answer": "7"}],
    )
