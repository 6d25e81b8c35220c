"""The label-accuracy audit: sampling, verdicts under injected faults, cache, key hygiene,
the Wilson interval, the report files, and an end-to-end run against `transformers serve`."""

from __future__ import annotations

import json
import math
import uuid

import pytest
import yaml
from fake_runs import labelled_row, step_row, write_run
from fault_server import FaultServer

from rzero.audit import judge as judge_mod
from rzero.audit.judge import PROMPT_VERSION, JudgeReply, cache_key, verdict_of
from rzero.audit.report import build_report, p_hat_bucket, render_html, summarize, wilson_interval
from rzero.audit.run import audit_run
from rzero.audit.sampling import select_items
from rzero.config import AuditConfig
from rzero.engine.models import generation_dtype
from rzero.io import read_jsonl, write_jsonl_atomic, write_text_atomic


def judge_cfg(server: FaultServer, **kw) -> AuditConfig:
    base = {
        "enabled": True,
        "base_url": server.base_url,
        "model": server.model,
        "per_step": 8,
        "max_tokens": 64,
        "concurrency": 8,
        "timeout": 1.0,
        "retries": 2,
        "seed": 0,
    }
    return AuditConfig(**{**base, **kw})


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    # first retry waits 0.2 s, the second 0.4 s: a Retry-After of 2 s is clearly distinguishable
    monkeypatch.setattr(judge_mod, "BACKOFF_BASE", 0.2)


# ---------------------------------------------------------------- Wilson interval


def test_wilson_7_of_10():
    # p = 0.7, z = 1.96, z^2 = 3.8416, z^2/n = 0.38416, denom = 1.38416
    # center = (0.7 + 3.8416/20) / 1.38416 = 0.89208 / 1.38416 = 0.64449
    # half = 1.96 / 1.38416 * sqrt(0.21/10 + 3.8416/400) = 1.41602 * sqrt(0.030604)
    #      = 1.41602 * 0.174940 = 0.247718  ->  [0.39677, 0.89221]
    lo, hi = wilson_interval(7, 10)
    assert lo == pytest.approx(0.39677, abs=1e-4)
    assert hi == pytest.approx(0.89221, abs=1e-4)
    assert (round(lo, 3), round(hi, 3)) == (0.397, 0.892)


def test_wilson_edges():
    # k = 0, n = 10: center = (0 + 0.19208)/1.38416 = 0.13877, half = 1.41602*sqrt(0.0009604)
    # = 1.41602 * 0.03099 = 0.13883 -> lower 0 (clipped), upper 0.27753
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0
    assert hi == pytest.approx(0.27753, abs=1e-4)
    # symmetric: 10 of 10 mirrors 0 of 10
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0
    assert lo == pytest.approx(1 - 0.27753, abs=1e-4)
    # nothing judged: nothing known
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_wilson_narrows_with_n():
    # 700 of 1000: half ~ 1.96 * sqrt(0.21/1000) = 0.0284 (normal approximation is close)
    lo, hi = wilson_interval(700, 1000)
    assert hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.21 / 1000), abs=2e-3)


def test_summary_says_when_too_few():
    s = summarize(["correct"] * 7 + ["wrong"] * 3 + ["unjudged"] * 5 + ["ill_posed"])
    # 7 of 10 judged; unjudged and ill-posed are counted but not in the denominator
    assert (s["n_judged"], s["n_unjudged"], s["n_ill_posed"]) == (10, 5, 1)
    assert s["accuracy"] == 0.7
    # width 0.892 - 0.397 = 0.495 < 0.5 and n = 10: just enough to report
    assert s["caveat"] is None
    s = summarize(["correct"] * 4 + ["wrong"])
    assert "too few judged items" in s["caveat"]
    assert summarize(["unjudged"])["accuracy"] is None


def test_p_hat_buckets():
    assert p_hat_bucket(0.0) == "[0.0, 0.3)"
    assert p_hat_bucket(0.3) == "[0.3, 0.5)"
    assert p_hat_bucket(0.7) == "[0.7, 0.9)"
    assert p_hat_bucket(0.9) == "[0.9, 1.0]"
    assert p_hat_bucket(1.0) == "[0.9, 1.0]"


# ---------------------------------------------------------------- verdicts and sampling


def test_verdicts():
    assert verdict_of(JudgeReply("so \\boxed{5}", None, 1), "5") == ("correct", "5", None)
    assert verdict_of(JudgeReply("\\boxed{\\frac{1}{2}}", None, 1), "0.5")[0] == "correct"
    assert verdict_of(JudgeReply("\\boxed{6}", None, 1), "5") == ("wrong", "6", None)
    for box in ("ILL-POSED", "\\text{ILL-POSED}", "ill posed"):
        assert verdict_of(JudgeReply(f"\\boxed{{{box}}}", None, 1), "5")[0] == "ill_posed"
    assert verdict_of(JudgeReply("five", None, 1), "5") == ("unjudged", None, "no boxed answer")
    assert verdict_of(JudgeReply(None, "timeout after 3 attempts", 3), "5") == (
        "unjudged",
        None,
        "timeout after 3 attempts",
    )


def test_verdict_direction():
    # verify(gold="1 < x < 2", target="(1,2)") holds, the reverse does not
    reply = JudgeReply("\\boxed{1 < x < 2}", None, 1)
    assert verdict_of(reply, "(1,2)")[0] == "wrong"  # default "both"
    assert verdict_of(reply, "(1,2)", direction="either")[0] == "correct"


def test_sample_is_seeded_per_group_and_stable(tmp_path):
    steps = {s: [step_row(f"Q{s}-{i}?", str(i)) for i in range(12)] for s in range(2)}
    steps[0].append(step_row("invalid?", "1", valid=False))
    steps[0].append(dict(step_row("no label?", "1"), label=None))
    labelled = [labelled_row(f"L{i}?", str(i), kept=i < 5) for i in range(20)]
    write_run(tmp_path, steps, labelled)
    items = select_items(tmp_path, per_step=4, seed=0)
    # 2 steps x 4 + 4 kept + 4 of all
    assert len(items) == 16
    assert {it.question for it in items} & {"invalid?", "no label?"} == set()
    assert all(it.kept for it in items if it.source == "labelled_kept")
    assert items == select_items(tmp_path, per_step=4, seed=0)
    assert items != select_items(tmp_path, per_step=4, seed=1)
    # adding a later iteration leaves the first iteration's sample (and its cache) alone
    write_run(
        tmp_path,
        {0: [step_row(f"R{i}?", "1", iteration=2) for i in range(9)]},
        labelled,
        iteration=2,
    )
    again = select_items(tmp_path, per_step=4, seed=0)
    assert [it for it in again if it.iteration == 1] == items
    assert len([it for it in again if it.iteration == 2]) == 12


def test_global_step_is_derived_for_logs_without_it(tmp_path):
    # iteration 2, step 1 with 3 challenger steps per iteration: global step (2-1)*3 + 1 = 4
    row = step_row("What is 2+3?", "5", iteration=2, step=1)
    del row["global_step"]
    write_run(tmp_path, {1: [row]}, [], iteration=2)
    write_text_atomic(tmp_path / "config.yaml", yaml.safe_dump({"challenger": {"steps": 3}}))
    (item,) = select_items(tmp_path, per_step=4, seed=0)
    assert (item.iteration, item.step, item.global_step) == (2, 1, 4)


def test_cache_key_covers_model_prompt_and_sampling():
    k = cache_key("What is 2+3?", "5", "m", temperature=0.0, max_tokens=64, seed=0)
    assert k != cache_key("What is 2+3?", "6", "m", temperature=0.0, max_tokens=64, seed=0)
    assert k != cache_key("What is 2+3?", "5", "m2", temperature=0.0, max_tokens=64, seed=0)
    assert k != cache_key("What is 2+3?", "5", "m", temperature=0.7, max_tokens=64, seed=0)
    assert k != cache_key("What is 2+3?", "5", "m", temperature=0.0, max_tokens=32, seed=0)
    assert len(PROMPT_VERSION) > 0


# ---------------------------------------------------------------- faults


FAULT_REPLIES = {
    "What is 2+3?": "2+3 = 5, so \\boxed{5}.",  # 500 once, then fine -> correct
    "What is 4+4?": "\\boxed{8}",  # 429 with Retry-After: 2 once -> correct
    "What is 3*3?": "\\boxed{9}",  # label 10 -> wrong
    "What is 7-2?": "\\boxed{5}",  # always 500 -> unjudged
    "What is 6/2?": "\\boxed{3}",  # always slower than the timeout -> unjudged
    "What is 1+1?": "\\boxed{2}",  # always malformed JSON -> unjudged
    "What is 9-4?": "The answer is five.",  # no box -> unjudged, not retried
    "What is x?": "\\boxed{ILL-POSED}",  # -> ill_posed
}
FAULTS = {
    "What is 2+3?": ["500"],
    "What is 4+4?": ["429:2"],
    "What is 7-2?": ["500"] * 20,
    "What is 6/2?": ["slow:3"] * 20,
    "What is 1+1?": ["malformed"] * 20,
}
LABELS = {
    "What is 2+3?": "5",
    "What is 4+4?": "8",
    "What is 3*3?": "10",
    "What is 7-2?": "5",
    "What is 6/2?": "3",
    "What is 1+1?": "2",
    "What is 9-4?": "5",
    "What is x?": "1",
}
EXPECTED = {
    "What is 2+3?": "correct",
    "What is 4+4?": "correct",
    "What is 3*3?": "wrong",
    "What is 7-2?": "unjudged",
    "What is 6/2?": "unjudged",
    "What is 1+1?": "unjudged",
    "What is 9-4?": "unjudged",
    "What is x?": "ill_posed",
}


@pytest.mark.slow
def test_faults_become_unjudged_and_good_items_are_unaffected(tmp_path):
    steps = {0: [step_row(q, a, p_hat=0.6) for q, a in LABELS.items()]}
    # the labelled set repeats two questions: judged once, reported in both places
    labelled = [labelled_row("What is 2+3?", "5", 0.5), labelled_row("What is 3*3?", "10", 0.4)]
    write_run(tmp_path, steps, labelled)
    with FaultServer(FAULT_REPLIES, FAULTS) as server:
        report = audit_run(tmp_path, judge_cfg(server))

        verdicts = {
            it["question"]: it["verdict"] for it in report["items"] if it["source"] == "step"
        }
        assert verdicts == EXPECTED
        # retried until success, judged (and counted) once
        assert server.count("What is 2+3?") == 2
        assert server.count("What is 4+4?") == 2
        t429 = server.times("What is 4+4?")
        assert t429[1] - t429[0] >= 1.9  # Retry-After: 2 honoured, not the 0.2 s backoff
        # retries = 2 -> 3 attempts for each persistent failure; a missing box is final
        for q in ("What is 7-2?", "What is 6/2?", "What is 1+1?"):
            assert server.count_at_least(3, q) == 3
        assert server.count("What is 9-4?") == 1
        assert server.count_at_least(16) == 2 + 2 + 1 + 3 * 3 + 1 + 1
        reasons = {it["question"]: it["reason"] for it in report["items"]}
        assert reasons["What is 7-2?"] == "HTTP 500 after 3 attempts"
        assert reasons["What is 6/2?"] == "timeout after 3 attempts"
        assert reasons["What is 1+1?"].startswith("malformed response")
        assert reasons["What is 9-4?"] == "no boxed answer"

        # step 0: 2 correct, 1 wrong -> 2/3; 4 unjudged are not wrong; 1 ill-posed
        (step,) = report["per_step"]
        assert (step["correct"], step["wrong"], step["n_unjudged"], step["n_ill_posed"]) == (
            2,
            1,
            4,
            1,
        )
        assert step["accuracy"] == pytest.approx(2 / 3)
        assert "too few judged items" in step["caveat"]
        # flat numbers for the loop's metric log
        assert report["summary"]["label_accuracy"] == pytest.approx(2 / 3)
        assert report["summary"]["n_unjudged"] == 4
        assert report["summary"]["labelled_all_label_accuracy"] == 0.5
        (it1,) = report["per_iteration"]
        assert (it1["labelled_all"]["correct"], it1["labelled_all"]["wrong"]) == (1, 1)
        # overall counts distinct items: the two repeated questions once
        assert report["overall"]["n_audited"] == 8
        for name in ("report.json", "report.md", "report.html", "accuracy.png", "cache.jsonl"):
            assert (tmp_path / "audit" / name).stat().st_size > 0

        # a rerun asks again only for the failed calls (not cached); the reply without a box
        # was the judge's answer and is cached like the verdicts
        before = server.count()
        report2 = audit_run(tmp_path, judge_cfg(server, retries=0))
        asked = {r.key for r in server.requests[before:]}
        assert asked == {"What is 7-2?", "What is 6/2?", "What is 1+1?"}
        assert report2["cached"] == 5  # 2+3, 4+4, 3*3, x and 9-4 (no box)


def test_second_audit_makes_no_requests(tmp_path):
    replies = {
        "What is 2+3?": "\\boxed{5}",
        "What is 10/4?": "\\boxed{5/2}",
        "<script>alert(1)</script> What is 1?": "\\boxed{1} <b>bold</b>",
    }
    steps = {
        0: [step_row("What is 2+3?", "5"), step_row("What is 10/4?", "2.5")],
        1: [step_row("<script>alert(1)</script> What is 1?", "1", step=1)],
    }
    write_run(tmp_path, steps, [labelled_row("What is 2+3?", "5", kept=False)])
    with FaultServer(replies) as server:
        first = audit_run(tmp_path, judge_cfg(server))
        assert server.count() == 3
        assert first["overall"]["correct"] == 3
        second = audit_run(tmp_path, judge_cfg(server))
        assert server.count() == 3  # all from RUN_DIR/audit/cache.jsonl
        assert second["requests"] == 0 and second["cached"] == 3
        assert [it["verdict"] for it in second["items"]] == [it["verdict"] for it in first["items"]]
        # other sampling settings are another cache key: asked again
        third = audit_run(tmp_path, judge_cfg(server, max_tokens=32))
        assert third["requests"] == 3
    page = (tmp_path / "audit" / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page and "<b>bold" not in page


def test_api_key_is_sent_but_never_written(tmp_path, monkeypatch):
    key = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("RZERO_TEST_JUDGE_KEY", key)
    # a server that echoes the key back in its reply must not get it onto disk either
    replies = {"What is 2+3?": "\\boxed{5}", "What is 3+3?": f"key {key} \\boxed{{6}}"}
    faults = {"What is 3+3?": ["500"]}
    write_run(
        tmp_path,
        {0: [step_row("What is 2+3?", "5"), step_row("What is 3+3?", "6")]},
        [labelled_row("What is 2+3?", "5")],
    )
    with FaultServer(replies, faults) as server:
        report = audit_run(tmp_path, judge_cfg(server, api_key_env="RZERO_TEST_JUDGE_KEY"))
        assert report["overall"]["correct"] == 2
        assert server.count() == 3
        assert {r.authorization for r in server.requests} == {f"Bearer {key}"}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 7  # config, 2 inputs, cache, 3 reports, png
    for p in files:
        assert key.encode() not in p.read_bytes(), p
    assert report["judge"]["host"] == "127.0.0.1"


def test_missing_model_is_taken_from_a_single_model_endpoint(tmp_path):
    write_run(tmp_path, {0: [step_row("What is 2+3?", "5")]}, [])
    with FaultServer({"What is 2+3?": "\\boxed{5}"}, model="only-one") as server:
        report = audit_run(tmp_path, judge_cfg(server, model=None))
        assert report["judge"]["model"] == "only-one"
        assert server.requests[0].body["model"] == "only-one"
        body = server.requests[0].body
        assert body["temperature"] == 0.0 and body["max_tokens"] == 64
        # the question goes last, after the instructions that ask for a box or ILL-POSED
        assert body["messages"][-1]["role"] == "user"
        assert body["messages"][-1]["content"].endswith("What is 2+3?")
        assert "\\boxed{ILL-POSED}" in body["messages"][-1]["content"]


def test_html_escapes_model_text():
    item = {
        "source": "step",
        "iteration": 1,
        "step": 0,
        "global_step": 0,
        "question": "<script>alert(1)</script>",
        "label": "<i>5</i>",
        "p_hat": 0.5,
        "kept": None,
        "key": "k",
        "verdict": "wrong",
        "judge_answer": "</td><td>x",
        "reason": None,
        "response": "<img src=x onerror=alert(2)>",
    }
    judge = {
        "model": "<b>judge</b>",
        "host": "h",
        "prompt_version": PROMPT_VERSION,
        "temperature": 0.0,
        "max_tokens": 8,
        "note": None,
    }
    page = render_html(build_report([item], judge))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;i&gt;5&lt;/i&gt;" in page and "&lt;/td&gt;&lt;td&gt;x" in page
    assert "&lt;b&gt;judge&lt;/b&gt;" in page
    for raw in ("<script", "<i>5", "<b>judge</b>", "<img src=x"):
        assert raw not in page


# ---------------------------------------------------------------- end to end, real server


@pytest.mark.slow
def test_embedded_judge_end_to_end_with_transformers_serve(tiny_checkpoint, tmp_path):
    """No judge configured: the base model (here a tiny random Llama) is served with
    `transformers serve`, audits, and is stopped; the report says what such a judge is worth."""
    ckpt = str(tiny_checkpoint)
    run = tmp_path / "run"
    write_run(
        run,
        {
            0: [step_row("What is 2+3?", "5"), step_row("What is 4+4?", "8")],
            1: [step_row("What is 1+1?", "2", step=1)],
        },
        [labelled_row("What is 2+3?", "5"), labelled_row("What is 7*7?", "49", kept=False)],
    )
    cfg = AuditConfig(enabled=True, per_step=2, max_tokens=12, concurrency=2, timeout=60, retries=0)
    report = audit_run(run, cfg, model_spec=ckpt)
    assert report["judge"]["embedded"] and report["judge"]["model"] == ckpt
    assert "base model itself" in report["judge"]["note"]
    assert report["judge"]["host"] == "127.0.0.1"
    # a random 2-layer model answers, but rarely with a box: every item has a verdict
    assert report["overall"]["n_audited"] == 4
    assert report["requests"] == 4
    assert len(report["per_step"]) == 2 and len(report["per_iteration"]) == 1
    audit_dir = run / "audit"
    for name in ("report.json", "report.md", "report.html", "accuracy.png"):
        assert (audit_dir / name).stat().st_size > 0
    assert (audit_dir / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((audit_dir / "report.json").read_text())["judge"]["prompt_version"] == (
        PROMPT_VERSION
    )
    assert "base model itself" in (audit_dir / "report.md").read_text()
    assert "base model itself" in (audit_dir / "report.html").read_text()
    server_log = (audit_dir / "judge_server.log").read_text()
    assert "Uvicorn running" in server_log
    # the judge computes in the run's generation dtype (bf16 where the CPU has it natively)
    dtype = generation_dtype("auto", "cpu")
    assert server_log.startswith("$ ") and f"--dtype {dtype} " in server_log.splitlines()[0]
    # every reply that arrived is cached, a reply without a box included
    cached = read_jsonl(audit_dir / "cache.jsonl")
    assert len(cached) == 4
    assert all(r["verdict"] != "unjudged" or r["reason"] == "no boxed answer" for r in cached)


def test_embedded_judge_is_not_started_when_every_verdict_is_cached(tmp_path):
    write_run(tmp_path, {0: [step_row("What is 2+3?", "5")]}, [])
    spec = str(tmp_path / "no-such-checkpoint")  # resolving or serving it would fail
    cfg = AuditConfig(enabled=True, per_step=2)
    key = cache_key(
        "What is 2+3?",
        "5",
        spec,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        seed=cfg.seed,
    )
    write_jsonl_atomic(
        tmp_path / "audit" / "cache.jsonl",
        [
            {
                "key": key,
                "question": "What is 2+3?",
                "label": "5",
                "judge_model": spec,
                "prompt_version": PROMPT_VERSION,
                "verdict": "correct",
                "judge_answer": "5",
                "reason": None,
                "attempts": 1,
                "response": "\\boxed{5}",
            }
        ],
    )
    report = audit_run(tmp_path, cfg, model_spec=spec)
    assert report["requests"] == 0 and report["cached"] == 1
    assert report["overall"]["correct"] == 1
    assert not (tmp_path / "audit" / "judge_server.log").exists()
