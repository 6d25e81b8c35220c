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


# ---------------------------------------------------------------- against real servers


@pytest.fixture(scope="module")
def two_servers(tiny_checkpoint, tmp_path_factory):
    """Two real `transformers serve` processes serving the tiny checkpoint."""
    from contextlib import ExitStack

    from rzero.serving import serve_checkpoint

    logs = tmp_path_factory.mktemp("serve")
    with ExitStack() as stack:
        servers = [stack.enter_context(serve_checkpoint(tiny_checkpoint,
                                                        log_path=logs / f"s{i}.log"))
                   for i in range(2)]
        yield servers


def test_openai_backend_against_transformers_serve(two_servers):
    server = two_servers[0]
    gen = OpenAIGenerator([server.base_url], server.model, concurrency=2, timeout=60,
                          retries=0)
    out = gen.generate(PROMPTS[:2], 2, SamplingParams(max_new_tokens=6, seed=0))
    assert [len(row) for row in out] == [2, 2]
    assert all(isinstance(t, str) and t for row in out for t in row)
    assert gen.stats.calls == 4


def test_openai_backend_spreads_requests_over_servers(two_servers):
    gen = OpenAIGenerator([s.base_url for s in two_servers], two_servers[0].model,
                          concurrency=2, timeout=60, retries=0)
    out = gen.generate(PROMPTS[:2], 3, SamplingParams(max_new_tokens=4, seed=0))
    assert [len(row) for row in out] == [3, 3]
    # 6 requests round-robin over 2 servers -> 3 each; and each server's own log saw them
    assert gen.requests_per_url == [3, 3]
    for server in two_servers:
        assert "chat/completions" in server.log_path.read_text()


def test_openai_backend_error_names_the_url(refused_port):
    from rzero.generation import GenerationError

    url = f"http://127.0.0.1:{refused_port}/v1"
    gen = OpenAIGenerator([url], "m", timeout=5, retries=0)
    with pytest.raises(GenerationError, match=f"openai backend: request to {url} failed"):
        gen.generate(["hi"], 1, SamplingParams(max_new_tokens=2))
