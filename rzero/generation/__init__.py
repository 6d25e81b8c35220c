"""Sampling: the seam every caller uses and the backends behind it (TRL's split: this, and
`rzero.training` apart).

    interface.py  the Generator protocol, SamplingParams, GenerationStats, cut_at_stop,
                  GenerationError: what labelling, evaluation and the roles take, without
                  importing a backend (this `__init__` imports nothing else, so neither
                  does `from rzero.generation.interface import ...`)
    backends.py   the backends: in-process transformers, OpenAI-compatible servers, vLLM;
                  make_generator (`generation.backend`)
    decoding.py   rzero's own batched decoder (pre-allocated KV cache)
    sampling.py   the token sampler the decoder uses
    solver_server.py  the frozen solver as one server per machine, and its URL
"""
