"""Benchmarks by name (SPEC §4): the embedded one, the hub's, and local JSONL files.

A benchmark spec is one of:
- `synthetic` (or `synthetic:SEED`): the embedded benchmark (rzero.evaluation.synthetic);
- `easy`: the embedded one- and two-step tier the base model partly solves
  (rzero.evaluation.easy); `easy:SEED` is a development split of it, disjoint from `easy`;
- `math500`, `gsm8k`, `amc23`, `minerva`, `olympiadbench`, `aime24`, `aime25`: fetched from
  the Hugging Face hub with `datasets` (see `HUB_BENCHMARKS`) and cached as JSONL under
  `$RZERO_CACHE/benchmarks/`, so a machine that fetched them once works offline afterwards.
  Without network the loader fails in seconds with `BenchmarkUnavailable`;
- `mmlupro` (`MMLU-Pro`), `supergpqa`, `bbeh`: the paper's general-reasoning benchmarks
  (`GENERAL_BENCHMARKS`), fetched and cached the same way; their items carry a `scoring`
  field (`rzero.evaluation.general`): multiple choice for the first two, short text for BBEH;
- `path/to/file.jsonl` or `name=path/to/file.jsonl`: rows with `problem` and `answer` fields
  (`id` optional), always available. A row with `choices` (a list of option texts) is a
  multiple-choice item whose `answer` is the letter or the text of the right option; rows of
  a file named after a general benchmark (`bbeh=/path/bbeh.jsonl`) are scored as it is.

Any spec may end in `@k` (`aime24@32`): that benchmark is scored as mean@k over k sampled
answers, whatever `num_samples` the others use, as the paper reports AMC and AIME.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rzero.config import ConfigError
from rzero.evaluation.easy import EASY, EASY_SEED, easy_benchmark, easy_dev_benchmark
from rzero.evaluation.general import answer_letter
from rzero.evaluation.synthetic import SYNTHETIC, SYNTHETIC_SEED, Item, synthetic_benchmark
from rzero.io import DamagedFileError, read_jsonl, write_jsonl_atomic

HUB_TIMEOUT_S = 3.0


class BenchmarkError(RuntimeError):
    """A benchmark that cannot be loaded; the message names it and says what to do."""


class BenchmarkUnavailable(BenchmarkError):
    """A hub benchmark requested without network access and without a cached copy."""


# ---------------------------------------------------------------- hub benchmarks


@dataclass(frozen=True)
class HubSource:
    repo: str
    config: str | None
    split: str
    problem_field: str
    answer_field: str
    gsm8k_answer: bool = False  # the answer is the text after '####'
    choices_field: str | None = None  # multiple choice: the list of option texts
    scoring: str | None = None  # rzero.evaluation.general: "choice" or "text"; None: math


HUB_BENCHMARKS: dict[str, HubSource] = {
    "math500": HubSource("HuggingFaceH4/MATH-500", None, "test", "problem", "answer"),
    "gsm8k": HubSource("openai/gsm8k", "main", "test", "question", "answer", gsm8k_answer=True),
    "amc23": HubSource("math-ai/amc23", None, "test", "question", "answer"),
    "minerva": HubSource("math-ai/minervamath", None, "test", "question", "answer"),
    "olympiadbench": HubSource("math-ai/olympiadbench", None, "test", "question", "final_answer"),
    "aime24": HubSource("HuggingFaceH4/aime_2024", None, "train", "problem", "answer"),
    "aime25": HubSource("math-ai/aime25", None, "test", "problem", "answer"),
}
# the paper's general-reasoning benchmarks, as the official evaluation scripts load them
GENERAL_BENCHMARKS: dict[str, HubSource] = {
    "mmlupro": HubSource(
        "TIGER-Lab/MMLU-Pro",
        None,
        "test",
        "question",
        "answer",
        choices_field="options",
        scoring="choice",
    ),
    "supergpqa": HubSource(
        "m-a-p/SuperGPQA",
        None,
        "train",
        "question",
        "answer_letter",
        choices_field="options",
        scoring="choice",
    ),
    "bbeh": HubSource("MrLight/bbeh-eval", None, "train", "question", "answer", scoring="text"),
}
_SOURCES = {**HUB_BENCHMARKS, **GENERAL_BENCHMARKS}
_ALIASES = {
    "math": "math500",
    "minervamath": "minerva",
    "minervamath500": "minerva",
    "olympiad": "olympiadbench",
    "aime2024": "aime24",
    "aime2025": "aime25",
    "amc": "amc23",
    "amc2023": "amc23",
    "bigbenchextrahard": "bbeh",
}


def hub_name(name: str) -> str | None:
    """The HUB_BENCHMARKS or GENERAL_BENCHMARKS key for a user-typed name (`MATH-500`,
    `aime_2024`, `MMLU-Pro`), or None."""
    key = name.lower().replace("-", "").replace("_", "")
    key = _ALIASES.get(key, key)
    return key if key in _SOURCES else None


def hub_endpoint() -> str:
    """The endpoint `datasets` will talk to (HF_ENDPOINT as read when the hub client loaded)."""
    import huggingface_hub.constants

    return huggingface_hub.constants.ENDPOINT.rstrip("/")


def hub_problem(repo: str, timeout: float = HUB_TIMEOUT_S) -> str | None:
    """None when the hub answers for dataset `repo` within `timeout` s, else why not.

    A real HTTP request, not a TCP connect: sandboxes and proxies accept any connection.
    Name resolution ignores socket timeouts, so the probe runs in a daemon thread that we
    stop waiting for; without a network this answers in seconds, instead of the minute of
    retries `datasets` would spend.
    """
    import urllib.error
    import urllib.request

    url = f"{hub_endpoint()}/api/datasets/{repo}"
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                outcome.append(None if response.status == 200 else f"HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            outcome.append(f"HTTP {exc.code} from {url}")
        except (OSError, ValueError) as exc:  # URLError, timeouts, resets, bad URL
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            outcome.append(f"{type(exc).__name__}: {reason}" if str(reason) else type(exc).__name__)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return outcome[0] if outcome else f"no answer from {url} within {timeout:.0f} s"


@contextmanager
def _hub_offline() -> Iterator[None]:
    """HF_HUB_OFFLINE for the duration: `datasets` then reads only its local cache.

    The flag is read at import time, so the already-imported modules are patched too.
    """
    import datasets.config
    import huggingface_hub.constants

    saved_env = os.environ.get("HF_HUB_OFFLINE")
    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


def _hub_answer(value: Any, source: HubSource) -> str:
    if isinstance(value, list):  # OlympiadBench: final_answer is a list of strings
        return ", ".join(str(v) for v in value)
    text = str(value).strip()
    if source.gsm8k_answer:
        text = text.split("####")[-1].strip().replace(",", "")
    return text


def _hub_cache_path(key: str) -> Path:
    from rzero.engine.models import cache_dir

    return cache_dir() / "benchmarks" / f"{key}.jsonl"


def _unavailable(key: str, why: str) -> BenchmarkUnavailable:
    why = " ".join(why.split())  # one line, whatever the exception text held
    return BenchmarkUnavailable(
        f"benchmark {key!r}: {why}; pass a local JSONL file with `problem` and `answer` "
        f"fields instead (e.g. --benchmarks {key}=/path/to/{key}.jsonl)"
    )


def load_hub_benchmark(name: str) -> list[Item]:
    """A hub benchmark: from our JSONL cache, else the hub, else the `datasets` cache."""
    key = hub_name(name)
    if key is None:
        raise BenchmarkError(
            f"unknown benchmark {name!r}; known: {SYNTHETIC}, {EASY}, "
            f"{', '.join(_SOURCES)}, or a path to a .jsonl file"
        )
    source = _SOURCES[key]
    cached = _hub_cache_path(key)
    if cached.is_file():
        return load_jsonl_benchmark(cached, name=key)
    try:
        import datasets
    except ImportError as exc:
        raise BenchmarkError(f"benchmark {key!r} needs the `datasets` package") from exc
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    problem = "HF_HUB_OFFLINE is set" if offline else hub_problem(source.repo)
    try:
        if problem is None:
            ds = datasets.load_dataset(source.repo, source.config, split=source.split)
        else:  # perhaps `datasets` cached it on an earlier, networked run
            with _hub_offline():
                ds = datasets.load_dataset(source.repo, source.config, split=source.split)
    except Exception as exc:
        if problem is None:
            why = f"loading it from the Hugging Face hub failed ({type(exc).__name__}: {exc})"
        else:
            why = (
                f"the Hugging Face hub is unreachable ({problem}) and the dataset is not "
                "in the local `datasets` cache"
            )
        raise _unavailable(key, f"{source.repo}: {why}") from None
    missing = (
        {source.problem_field, source.answer_field, source.choices_field}
        - {None}
        - set(ds.column_names)
    )
    if missing:
        raise BenchmarkError(
            f"benchmark {key!r}: {source.repo} has no field(s) "
            f"{', '.join(sorted(missing))} (it has {', '.join(ds.column_names)});"
            " the table HUB_BENCHMARKS in rzero/evaluation/loaders.py needs "
            "updating"
        )
    items = []
    for i, row in enumerate(ds):
        item = {
            "id": f"{key}-{i}",
            "problem": str(row[source.problem_field]),
            "answer": _hub_answer(row[source.answer_field], source),
        }
        if source.scoring is not None:
            item["scoring"] = source.scoring
        if source.choices_field is not None:
            item["choices"] = [str(c) for c in row[source.choices_field]]
        items.append(item)
    write_jsonl_atomic(cached, items)
    return items


# ---------------------------------------------------------------- local JSONL


def load_jsonl_benchmark(path: str | Path, name: str | None = None) -> list[Item]:
    """Rows with `problem` and `answer` (and optionally `id`); errors name file and line."""
    path = Path(path).expanduser()
    name = name or path.stem
    if not path.is_file():
        raise BenchmarkError(f"benchmark {name!r}: no such file {str(path)!r}")
    items: list[Item] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchmarkError(f"{where}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise BenchmarkError(
                    f"{where}: expected a JSON object with `problem` and "
                    f"`answer` fields, got {type(row).__name__}"
                )
            missing = [k for k in ("problem", "answer") if row.get(k) in (None, "")]
            if missing:
                raise BenchmarkError(
                    f"{where}: missing field(s) "
                    f"{', '.join(repr(m) for m in missing)}; each line needs "
                    "`problem` and `answer`"
                )
            item = {
                **row,
                "id": str(row.get("id", f"{name}-{len(items)}")),
                "problem": str(row["problem"]),
                "answer": str(row["answer"]),
            }
            items.append(_general_fields(item, name, where))
    if not items:
        raise BenchmarkError(f"benchmark {name!r}: {path} holds no items")
    return items


def _general_fields(item: Item, name: str, where: str) -> Item:
    """`scoring` for a multiple-choice row (it has `choices`; its answer becomes the letter)
    or a row of a file named after a general benchmark; math rows pass unchanged."""
    general = GENERAL_BENCHMARKS.get(hub_name(name) or "")
    if "choices" in item:
        choices = item["choices"]
        if not (isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices)):
            raise BenchmarkError(f"{where}: `choices` must be a non-empty list of option texts")
        letter = answer_letter(item["answer"], choices)
        if letter is None:
            raise BenchmarkError(
                f"{where}: answer {item['answer']!r} is neither an option "
                f"letter (A to {chr(64 + len(choices))}) nor one of the "
                "`choices`"
            )
        return {**item, "answer": letter, "scoring": "choice"}
    if item.get("scoring") is None and general is not None:
        if general.scoring == "choice":
            raise BenchmarkError(f"{where}: a {name!r} row needs `choices` (its options)")
        return {**item, "scoring": general.scoring}
    return item


# ---------------------------------------------------------------- by name


def parse_benchmark_spec(spec: str) -> tuple[str, str | None]:
    """`name=path.jsonl` -> (name, path); `path.jsonl` -> (stem, path); `name` -> (name, None)."""
    spec = spec.strip()
    if "=" in spec:
        name, path = spec.split("=", 1)
        return name.strip(), path.strip()
    if spec.endswith(".jsonl"):
        return Path(spec).stem, spec
    return spec, None


def split_samples(spec: str) -> tuple[str, int | None]:
    """`aime24@32` -> ("aime24", 32): the benchmark's own number of samples for mean@k."""
    head, sep, tail = spec.strip().rpartition("@")
    if sep and tail.isdigit():
        if int(tail) < 1:
            raise BenchmarkError(f"benchmark {spec!r}: the number after '@' must be >= 1")
        return head, int(tail)
    return spec, None


def load_benchmark(spec: str) -> tuple[str, list[Item]]:
    """(display name, items) for one benchmark spec; a spec ending in `@k` keeps it in the
    display name, which is how `evaluate` learns that benchmark's k."""
    spec, k = split_samples(spec)
    name, items = _load_benchmark(spec)
    return (name if k is None else f"{name}@{k}"), items


def _seed_after(name: str, prefix: str, default: int) -> int:
    """The SEED of `prefix:SEED` (`default` for a bare `prefix:` or `prefix`)."""
    seed_text = name[len(prefix) + 1 :] or str(default)
    try:
        return int(seed_text)
    except ValueError:
        raise BenchmarkError(
            f"benchmark {name!r}: the seed after '{prefix}:' must be an integer"
        ) from None


def _load_benchmark(spec: str) -> tuple[str, list[Item]]:
    name, path = parse_benchmark_spec(spec)
    if path is not None:
        return name, load_jsonl_benchmark(path, name=name)
    if name == SYNTHETIC or name.startswith(SYNTHETIC + ":"):
        return name, synthetic_benchmark(_seed_after(name, SYNTHETIC, SYNTHETIC_SEED))
    if name == EASY:
        return name, easy_benchmark()
    if name.startswith(EASY + ":"):
        return name, easy_dev_benchmark(_seed_after(name, EASY, EASY_SEED))
    key = hub_name(name)
    return (key or name), load_hub_benchmark(name)


def load_benchmarks(specs: Sequence[str], limit: int | None = None) -> dict[str, list[Item]]:
    """All benchmarks, each cut to its first `limit` items; fails before any model work."""
    if not specs:
        raise BenchmarkError("no benchmarks given")
    out: dict[str, list[Item]] = {}
    for spec in specs:
        name, items = load_benchmark(spec)
        if name in out:
            raise BenchmarkError(f"benchmark {name!r} given twice")
        out[name] = items[:limit] if limit is not None else items
    return out


def load_question_set(spec: str, count: int = 0, key: str = "questions") -> list[dict[str, Any]]:
    """[{id, question, answer or None}] of a benchmark spec (`easy:7`) or a JSONL file of
    {question, answer} rows (`problem` is read as `question`); the first `count` (0: all).
    ConfigError in one line naming the recipe's `key` for a missing file, a bad row or an
    unknown benchmark. The solver task's questions and guided self-play's anchors."""
    if spec.endswith(".jsonl") or Path(spec).is_file():
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"{key}={spec!r}: no such file")
        try:
            raw = read_jsonl(path)
        except DamagedFileError as exc:
            raise ConfigError(f"{key}: {exc}") from None
        rows = []
        for n, r in enumerate(raw, 1):
            question = r.get("question", r.get("problem")) if isinstance(r, dict) else None
            if not isinstance(question, str) or not question.strip():
                raise ConfigError(f"{path}: line {n} has no 'question' string")
            answer = r.get("answer")
            rows.append(
                {
                    "id": str(r.get("id", f"q{n - 1:05d}")),
                    "question": question,
                    "answer": None if answer is None else str(answer),
                }
            )
    else:
        try:
            _, items = load_benchmark(spec)
        except (BenchmarkError, ValueError) as exc:
            raise ConfigError(f"{key}={spec!r}: {exc}") from None
        rows = [{"id": i["id"], "question": i["problem"], "answer": i.get("answer")} for i in items]
    rows = rows[:count] if count else rows
    if not rows:
        raise ConfigError(f"{key}={spec!r}: no questions")
    return rows
