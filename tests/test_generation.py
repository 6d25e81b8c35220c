import pytest

from rzero.generation import HFGenerator, OpenAIGenerator, SamplingParams


@pytest.fixture(scope="module")
def hf(tiny_checkpoint):
    return HFGenerator.from_spec(str(tiny_checkpoint), batch_size=5, device="cpu")


PROMPTS = ["Hi", [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "A much longer prompt " * 8}], "What is 1+1?"]


def test_hf_returns_n_completions_per_prompt_for_mixed_lengths(hf):
    out = hf.generate(PROMPTS, 3, SamplingParams(max_new_tokens=8, seed=1))
    # 3 prompts x 3 samples = 9 rows in batches of 5 -> 2 generate calls
    assert [len(row) for row in out] == [3, 3, 3]
    assert all(isinstance(t, str) and t for row in out for t in row)
    assert hf.stats.calls >= 2


def test_hf_same_seed_same_text(hf):
    params = SamplingParams(max_new_tokens=8, seed=7)
    assert hf.generate(PROMPTS, 2, params) == hf.generate(PROMPTS, 2, params)


def test_hf_different_seed_different_text(hf):
    a = hf.generate(PROMPTS, 2, SamplingParams(max_new_tokens=8, seed=1))
    b = hf.generate(PROMPTS, 2, SamplingParams(max_new_tokens=8, seed=2))
    assert a != b


def test_hf_batching_does_not_change_greedy_output(tiny_checkpoint):
    # left padding must not leak into the result: greedy text is the same alone or batched
    greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
    batched = HFGenerator.from_spec(str(tiny_checkpoint), batch_size=8, device="cpu")
    single = HFGenerator.from_spec(str(tiny_checkpoint), batch_size=1, device="cpu")
    assert batched.generate(PROMPTS, 1, greedy) == single.generate(PROMPTS, 1, greedy)


def test_hf_rejects_zero_samples(hf):
    with pytest.raises(ValueError, match="n=0"):
        hf.generate(PROMPTS, 0, SamplingParams())


def test_openai_generator_needs_a_url():
    from rzero.generation import GenerationError

    with pytest.raises(GenerationError, match="no base URL"):
        OpenAIGenerator([], "m")
