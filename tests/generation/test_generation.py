import pytest
import torch

from rzero.generation.backends import HFGenerator, OpenAIGenerator
from rzero.generation.decoding import StopCheck, decode
from rzero.generation.interface import SamplingParams, cut_at_stop
from rzero.prompts.boxed import first_box_end


@pytest.fixture(scope="module")
def hf(tiny_checkpoint):
    return HFGenerator.from_spec(str(tiny_checkpoint), batch_size=5, device="cpu")


PROMPTS = [
    "Hi",
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "A much longer prompt " * 8},
    ],
    "What is 1+1?",
]


def test_hf_returns_n_completions_per_prompt_for_mixed_lengths(hf):
    out = hf.generate(PROMPTS, 3, SamplingParams(max_new_tokens=8, seed=1))
    # 3 prompts x 3 samples = 9 rows, at most 5 decoding at once
    assert [len(row) for row in out] == [3, 3, 3]
    assert all(isinstance(t, str) and t for row in out for t in row)
    assert hf.stats.calls >= 1 and hf.stats.new_tokens >= 9


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
    from rzero.generation.interface import GenerationError

    with pytest.raises(GenerationError, match="no base URL"):
        OpenAIGenerator([], "m")


# ---------------------------------------------------------------- the decode loop


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    from rzero.engine.models import load_model, load_tokenizer

    return (
        load_model(str(tiny_checkpoint), device="cpu").eval(),
        load_tokenizer(str(tiny_checkpoint)),
    )


def random_prompts(n: int, seed: int, vocab: int = 1000) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 12, (n,), generator=g).tolist()
    return [torch.randint(10, vocab, (k,), generator=g).tolist() for k in lengths]


def hf_greedy(model, prompts, max_new_tokens, eos_ids=()):
    """The naive reference: one `model.generate` per prompt, no padding at all."""
    out = []
    for p in prompts:
        seq = model.generate(
            torch.tensor([p]),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=list(eos_ids) or None,
            pad_token_id=0,
        )
        new = seq[0, len(p) :].tolist()
        for i, t in enumerate(new):
            if t in eos_ids:
                new = new[: i + 1]
                break
        out.append(new)
    return out


def test_decode_greedy_matches_generate_prompt_by_prompt(tiny):
    model, _ = tiny
    # mixed lengths (left padding) and repeated prompts (one shared prefill)
    prompts = random_prompts(6, seed=0)
    prompts = prompts + [prompts[1], prompts[1], prompts[4]]
    new = decode(model, prompts, max_new_tokens=10, temperature=0.0)
    assert new == hf_greedy(model, prompts, 10)


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_decode_greedy_matches_generate_on_other_architectures(arch):
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    from rzero.generation.decoding import supports_decode

    config_cls, model_cls = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    }[arch]
    torch.manual_seed(0)
    config = config_cls(
        vocab_size=1000,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
    )
    model = model_cls(config).eval()
    assert supports_decode(model)
    prompts = random_prompts(5, seed=6)
    assert decode(model, prompts, max_new_tokens=8, temperature=0.0) == hf_greedy(model, prompts, 8)


class EndAfter:
    """A stop rule for the test: the row whose first new token is t ends after lengths[t]."""

    def __init__(self, lengths: dict[int, int]):
        self.lengths = lengths

    def ends(self, ids: list[int]) -> bool:
        return len(ids) >= self.lengths.get(ids[0], 10**9)


def test_finished_rows_leave_the_batch_without_changing_the_others(tiny):
    model, _ = tiny
    prompts = random_prompts(8, seed=1)
    free = decode(model, prompts, max_new_tokens=12, temperature=0.0)
    firsts = [row[0] for row in free]
    assert len(set(firsts)) == 8  # the rule below can tell the rows apart
    # rows 0-5 end after 2..7 tokens, rows 6-7 run to 12: the batch is compacted each time
    # a quarter of it is done: 8 -> 6 rows after 3 tokens, 6 -> 4 after 5, 4 -> 3, 3 -> 2
    stop = EndAfter({t: 2 + r for r, t in enumerate(firsts[:6])})
    stopped = decode(model, prompts, max_new_tokens=12, temperature=0.0, stop=stop)
    assert stopped == [row[: 2 + r] for r, row in enumerate(free[:6])] + free[6:]


def test_waiting_prompts_join_as_rows_finish(tiny, monkeypatch):
    from rzero.generation.decoding import PreallocatedCache, _Batch

    model, _ = tiny
    prompts = random_prompts(9, seed=7)
    prompts = prompts + [prompts[3], prompts[3]]  # 11 rows, one prompt three times
    free = decode(model, prompts, max_new_tokens=14, temperature=0.0)
    lengths = {row[0]: 1 + (r * 5) % 14 for r, row in enumerate(free)}  # 1..14 tokens
    assert len(lengths) == 9  # the rule tells the distinct prompts apart
    sizes, drops = [], []
    step, drop = _Batch.step, PreallocatedCache.drop_columns
    monkeypatch.setattr(_Batch, "step", lambda self, t: sizes.append(len(t)) or step(self, t))
    monkeypatch.setattr(
        PreallocatedCache, "drop_columns", lambda self, n: drops.append(n) or drop(self, n)
    )
    stopped = decode(
        model, prompts, max_new_tokens=14, temperature=0.0, batch_size=4, stop=EndAfter(lengths)
    )
    # each row is what it is alone, cut where the rule ends it
    assert stopped == [row[: lengths[row[0]]] for row in free]
    assert max(sizes) == 4  # never more than batch_size rows, and rows were refilled
    assert len(sizes) < sum(len(row) for row in stopped) / 2  # ~4 rows a step, not 1
    assert drops  # leading columns were dropped as old rows left


def test_an_eos_token_ends_its_row_and_is_kept(tiny):
    model, _ = tiny
    prompts = random_prompts(4, seed=5)
    free = decode(model, prompts, max_new_tokens=6, temperature=0.0)
    eos = free[2][0]
    stopped = decode(model, prompts, max_new_tokens=6, temperature=0.0, eos_ids=[eos])
    assert stopped == [row[: row.index(eos) + 1] if eos in row else row for row in free]
    assert stopped[2] == [eos]


def test_sampled_rows_are_reproducible_and_respect_min_new_tokens(tiny):
    model, _ = tiny
    prompts = random_prompts(5, seed=2)
    eos = decode(model, prompts, max_new_tokens=3, temperature=0.0)[0][0]

    def run(seed):
        return decode(
            model,
            prompts,
            max_new_tokens=8,
            temperature=1.0,
            top_k=20,
            top_p=0.9,
            min_new_tokens=8,
            eos_ids=[eos],
            generator=torch.Generator().manual_seed(seed),
        )

    a, b = run(0), run(0)
    assert a == b and a != run(1)
    assert all(len(row) == 8 and eos not in row for row in a)  # EOS suppressed throughout


def test_stop_string_ends_a_row_and_the_text_keeps_the_stop(tiny):
    model, tokenizer = tiny
    prompts = random_prompts(3, seed=3)
    free = decode(model, prompts, max_new_tokens=12, temperature=0.0)
    text = tokenizer.decode(free[0])
    stop = text[len(tokenizer.decode(free[0][:4])) :][:3]  # 3 characters of the 5th token on
    assert stop.strip()
    check = StopCheck(tokenizer, (stop,))
    stopped = decode(model, prompts, max_new_tokens=12, temperature=0.0, stop=check)
    # row 0 ends at the token that completes the stop string, not later
    assert stop in tokenizer.decode(stopped[0])
    assert stop not in tokenizer.decode(stopped[0][:-1])
    assert check.cut(tokenizer.decode(stopped[0])).endswith(stop)


def test_cut_at_stop_keeps_up_to_the_first_stop_or_closed_box():
    # the box closes at the second "}" (the first closes \\frac's numerator)
    text = "so \\boxed{\\frac{1}{2}} then more \\boxed{3}"
    assert cut_at_stop(text, boxed=True) == "so \\boxed{\\frac{1}{2}}"
    assert first_box_end("\\boxed{\\{x\\}") is None  # escaped braces do not close it
    assert cut_at_stop("<question>Q</question> rest", ("</question>",)) == "<question>Q</question>"
    assert cut_at_stop("no stop here", ("</question>",), boxed=True) == "no stop here"


def test_generate_like_hf_returns_what_generate_returns(tiny):
    from transformers import GenerationConfig

    from rzero.generation.decoding import generate_like_hf

    model, _ = tiny
    prompts = random_prompts(4, seed=4)
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])  # [B, P] left-padded
    mask = torch.arange(width) >= width - torch.tensor([len(p) for p in prompts])[:, None]
    config = GenerationConfig(do_sample=False, max_new_tokens=7, pad_token_id=0, eos_token_id=None)
    ours = generate_like_hf(
        model, model, input_ids=ids, attention_mask=mask.long(), generation_config=config
    )
    theirs = model.generate(input_ids=ids, attention_mask=mask.long(), generation_config=config)
    assert torch.equal(ours, theirs)


def test_generate_like_hf_hands_unsupported_settings_to_transformers(tiny):
    from transformers import GenerationConfig

    from rzero.generation.decoding import _sampling_args

    assert _sampling_args(GenerationConfig(do_sample=True, max_new_tokens=4, top_k=0)) == {
        "max_new_tokens": 4,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "min_new_tokens": 0,
        "eos_ids": [],
    }
    assert _sampling_args(GenerationConfig(max_new_tokens=4, repetition_penalty=1.2)) is None
    assert _sampling_args(GenerationConfig(max_new_tokens=4, num_beams=2)) is None


def test_hf_generator_in_bf16_samples_from_a_copy_refreshed_each_call(tiny):
    model, tokenizer = tiny
    gen = HFGenerator(model, tokenizer, batch_size=4, dtype="bfloat16")
    assert gen.sampler is not model and gen.sampler.dtype == torch.bfloat16
    assert model.dtype == torch.float32  # the model itself is untouched
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    before = gen.generate(["Hi"], 1, greedy)
    with torch.no_grad():
        model.model.norm.weight.mul_(-1.0)  # negates the logits: greedy takes the argmin
    try:
        after = gen.generate(["Hi"], 1, greedy)
    finally:
        with torch.no_grad():
            model.model.norm.weight.mul_(-1.0)
    assert before != after


# ---------------------------------------------------------------- the generation dtype


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"avx2", "amx_bf16", "amx_tile"}, "bfloat16"),  # Sapphire Rapids and later
        ({"avx512f", "avx512_bf16"}, "bfloat16"),  # Cooper Lake, Zen 4
        ({"avx2", "avx512f"}, "float32"),  # no bf16 matrix instructions: torch would emulate
    ],
)
def test_auto_generation_dtype_follows_the_cpu_flags(monkeypatch, flags, expected):
    import rzero.engine.models

    monkeypatch.setattr(rzero.engine.models, "cpu_flags", lambda: flags)
    monkeypatch.setattr(rzero.engine.models, "bf16_speedup", lambda: 2.3)  # where bf16 pays
    assert rzero.engine.models.generation_dtype("auto", "cpu") == expected
    assert rzero.engine.models.generation_dtype("float32", "cpu") == "float32"  # asked for: kept


@pytest.mark.parametrize(
    "speedup,expected", [(2.3, "bfloat16"), (1.19, "float32"), (0.6, "float32")]
)
def test_auto_generation_dtype_takes_bf16_only_where_it_is_measured_faster(
    monkeypatch, speedup, expected
):
    import rzero.engine.models

    monkeypatch.setattr(rzero.engine.models, "cpu_flags", lambda: {"avx512f", "avx512_bf16"})
    monkeypatch.setattr(rzero.engine.models, "bf16_speedup", lambda: speedup)
    assert rzero.engine.models.generation_dtype("auto", "cpu") == expected


def test_the_bf16_speedup_is_measured_on_this_machine():
    from rzero.engine.models import bf16_speedup

    assert 0.05 < bf16_speedup() < 50
    assert bf16_speedup() == bf16_speedup()  # measured once per machine, then read


@pytest.mark.parametrize(
    "flags,weights,expected",
    [
        ({"avx512_bf16"}, "float32", "bfloat16"),  # autocast over float32 master weights
        ({"avx2"}, "float32", "float32"),
        ({"avx2"}, "bfloat16", "bfloat16"),  # bf16 weights compute in bf16 anywhere
        ({"avx512_bf16"}, "float16", "float32"),
    ],
)
def test_auto_train_compute(monkeypatch, flags, weights, expected):
    import rzero.engine.models
    from rzero.config import load_config

    monkeypatch.setattr(rzero.engine.models, "cpu_flags", lambda: flags)
    monkeypatch.setattr(rzero.engine.models, "bf16_speedup", lambda: 2.3)
    assert rzero.engine.models.train_compute("auto", weights, "cpu") == expected
    assert rzero.engine.models.train_compute("float32", weights, "cpu") == "float32"
    cfg = load_config(None, [f"model.dtype={weights}", "model.device=cpu"])
    assert rzero.engine.models.compute_dtypes(cfg) == {
        "weights": weights,
        "generation": "bfloat16" if "avx512_bf16" in flags else "float32",
        "training": expected,
    }
    served = load_config(None, ["generation.backend=openai", "generation.base_urls=[http://x/v1]"])
    assert rzero.engine.models.compute_dtypes(served)["generation"] == "openai backend"


def test_cpu_flags_reads_the_flags_line(tmp_path):
    from rzero.engine.models import cpu_flags

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\nbugs\t\t: none\n")
    assert cpu_flags(str(info)) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == set()


def test_generation_dtype_names_the_choices_on_a_typo():
    from rzero.engine.models import generation_dtype

    with pytest.raises(ValueError, match="auto, float32 or bfloat16"):
        generation_dtype("bf16")


# ---------------------------------------------------------------- against real servers


@pytest.fixture(scope="module")
def two_servers(tiny_checkpoint, tmp_path_factory):
    """Two real `transformers serve` processes serving the tiny checkpoint."""
    from contextlib import ExitStack

    from rzero.engine.serving import serve_checkpoint

    logs = tmp_path_factory.mktemp("serve")
    with ExitStack() as stack:
        servers = [
            stack.enter_context(serve_checkpoint(tiny_checkpoint, log_path=logs / f"s{i}.log"))
            for i in range(2)
        ]
        yield servers


@pytest.mark.slow
def test_openai_backend_against_transformers_serve(two_servers):
    server = two_servers[0]
    gen = OpenAIGenerator([server.base_url], server.model, concurrency=2, timeout=60, retries=0)
    out = gen.generate(PROMPTS[:2], 2, SamplingParams(max_new_tokens=6, seed=0))
    assert [len(row) for row in out] == [2, 2]
    assert all(isinstance(t, str) and t for row in out for t in row)
    assert gen.stats.calls == 4


def test_openai_backend_spreads_requests_over_servers(two_servers):
    gen = OpenAIGenerator(
        [s.base_url for s in two_servers],
        two_servers[0].model,
        concurrency=2,
        timeout=60,
        retries=0,
    )
    out = gen.generate(PROMPTS[:2], 3, SamplingParams(max_new_tokens=4, seed=0))
    assert [len(row) for row in out] == [3, 3]
    # 6 requests round-robin over 2 servers -> 3 each; and each server's own log saw them
    assert gen.requests_per_url == [3, 3]
    for server in two_servers:
        assert "chat/completions" in server.log_path.read_text()


def test_openai_backend_error_names_the_url(refused_port):
    from rzero.generation.interface import GenerationError

    url = f"http://127.0.0.1:{refused_port}/v1"
    gen = OpenAIGenerator([url], "m", timeout=5, retries=0)
    with pytest.raises(GenerationError, match=f"openai backend: request to {url} failed"):
        gen.generate(["hi"], 1, SamplingParams(max_new_tokens=2))


def test_servers_seeded_once_get_no_per_request_seed(monkeypatch):
    # vLLM-CPU servers: a seeded request kills the engine once its prefill is chunked, so
    # their client sends none (the server was started with --seed); others get seed + i*n + j
    from types import SimpleNamespace

    from rzero.generation.backends import OpenAIGenerator

    for per_request, expected in ((True, [7, 8, 9, 10]), (False, [None] * 4)):
        gen = OpenAIGenerator(
            ["http://127.0.0.1:9/v1"], "m", concurrency=1, per_request_seed=per_request
        )
        seen: list = []

        def create(k, messages, params, seed, extra, seen=seen):
            seen.append(seed)
            return SimpleNamespace(
                choices=[SimpleNamespace(message=SimpleNamespace(content="\\boxed{1}"))], usage=None
            )

        monkeypatch.setattr(gen, "_create", create)
        gen.generate(["a", "b"], 2, SamplingParams(seed=7))
        assert seen == expected
