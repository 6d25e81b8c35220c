"""`rzero plan --hardware H`: tokens per phase counted from the schedule, wall time from the
stated throughputs, every figure's source printed; bad hardware or a recipe without an
estimate is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rzero.cli import main
from rzero.config import load_config
from rzero.engine.hardware import DEVICES, Hardware, params_billions, parse_hardware
from rzero.math.estimate import phase_costs

ROOT = Path(__file__).resolve().parents[2]


def test_hardware_and_model_sizes_parse():
    hw = parse_hardware("8xA100-40G")
    assert (hw.device.name, hw.count, hw.name) == ("A100-40G", 8, "8xA100-40G")
    assert parse_hardware("4 x h100-80g").device.name == "H100-80G"
    assert parse_hardware("cpu-2").name == "cpu-2"
    for bad in ("8xTPU", "A100", "0xH200", ""):
        with pytest.raises(ValueError, match="expected cpu-2 or COUNTxGPU"):
            parse_hardware(bad)
    assert params_billions("Qwen/Qwen3-4B-Base") == 4.0
    assert params_billions("embedded:smollm2-135m-instruct") == pytest.approx(0.135)
    assert params_billions("meta-llama/Llama-2-7b-chat-hf") == 7.0
    assert params_billions("/models/my-checkpoint") is None


def test_the_reference_recipe_counts_its_tokens_from_its_schedule():
    cfg = load_config(ROOT / "configs" / "r-zero-reference.yaml")
    hw = Hardware(DEVICES["A100-40G"], 8)
    phases = {p.phase: p for p in phase_costs(cfg, hw, 0.5)}
    c = phases["challenger"]
    # 5 steps x 512 prompts x G 4 completions of at most 4,096 tokens, at half of it; each
    # scored by 10 votes of the frozen solver on its 4 GPUs (4,096 new tokens, halved)
    assert c.generated[0] == ("rollouts", 5 * 512 * 4 * 2048, 4, False)
    assert c.generated[1] == ("frozen solver's votes", 5 * 512 * 4 * 9 * 2048, 4, False)
    assert c.flops_per_token_n == 10  # 32 updates per rollout (old log-probs), KL 0.01
    assert c.train_devices == 4
    assert phases["labelling"].generated == [("votes", 8000 * 9 * 2048, 1, False)]
    s = phases["solver"]
    assert s.generated[0][1] == 15 * 512 * 5 * 2048
    # a GRPO phase's time: its generation on 4 devices, its FLOPs at 4 x 93.6 TFLOP/s, 2 min
    seconds = s.generated[0][1] / (hw.gen_tokens_per_s(4.0) * 4) + s.trained * 10 * 4e9 / (
        4 * 312e12 * 0.30
    )
    assert s.seconds(hw, 4.0) == pytest.approx(seconds + 120)


def test_plan_prints_the_estimate_with_its_sources(capsys):
    code = main(
        [
            "plan",
            "--config",
            str(ROOT / "configs" / "r-zero-reference.yaml"),
            "--hardware",
            "8xA100-40G",
            "--length-fraction",
            "0.5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    estimate = out[out.index("Estimate on 8xA100-40G for a 4B model") :]
    assert "tokens at 50% of each maximum length:" in estimate
    for phase in ("challenger", "pool", "labelling", "solver"):
        assert f"| {phase} | " in estimate
    assert "NVIDIA A100 datasheet" in estimate and "morphllm.com" in estimate
    assert "not counted: the evaluation on math500" in estimate  # no hub on this machine
    assert "the run (5 iterations and the evaluation before the first): **" in estimate


def test_plan_on_cpu_2_counts_the_evaluation(capsys):
    assert (
        main(["plan", "--config", str(ROOT / "configs" / "tiny.yaml"), "--hardware", "cpu-2"]) == 0
    )
    out = capsys.readouterr().out
    assert "Estimate on cpu-2 for a 0.135B model" in out
    assert "| eval | " in out and "not counted" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hardware", "8xTPU"], "--hardware '8xTPU': expected cpu-2 or COUNTxGPU"),
        (["--hardware", "2xH200"], "the recipe places work on 8 GPUs"),
        (["--hardware", "8xH200", "--length-fraction", "0"], "--length-fraction 0.0: must be"),
    ],
)
def test_bad_hardware_is_one_line(args, message, capsys):
    config = str(ROOT / "configs" / "r-zero-reference.yaml")
    assert main(["plan", "--config", config, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_system_without_an_estimate_says_so(capsys):
    config = str(ROOT / "configs" / "spin-tiny.yaml")
    assert main(["plan", "--config", config, "--hardware", "cpu-2"]) == 2
    assert "no runtime estimate for a" in capsys.readouterr().err
