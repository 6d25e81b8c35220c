"""What a run reads from outside its config, checked before anything is written.

A config can be valid field by field and still name a prompt file that does not exist, a
solver prompt without `{question}`, or a benchmark file that does not parse; found two model
loads into the run, each of those used to leave a half-made run directory behind. `check`
raises ConfigError naming the field, the value and the fix, and is called before the run
directory is created.
"""

from __future__ import annotations

from rzero.config import ConfigError, RZeroConfig


def check(cfg: RZeroConfig) -> None:
    """Raise ConfigError for the first outside input of `cfg` that a phase could not use."""
    from rzero.challenger.prompts import challenger_chat
    from rzero.solver.prompts import solver_chat

    for key, build in (("challenger.prompt_file", lambda: challenger_chat(
            cfg.challenger.prompt_file)),
                       ("solver.prompt_file", lambda: solver_chat("1 + 1 = ?",
                                                                  cfg.solver.prompt_file))):
        path = getattr(cfg, key.split(".")[0]).prompt_file
        try:
            build()
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{key}={path!r}: {exc}; point it at a prompt file in the "
                              f"format of rzero/templates.py") from None
    if cfg.eval.enabled:
        from rzero.evaluation import BenchmarkError, load_benchmarks

        try:
            load_benchmarks(cfg.eval.benchmarks, limit=cfg.eval.limit)
        except BenchmarkError as exc:
            raise ConfigError(f"eval.benchmarks={cfg.eval.benchmarks!r}: {exc}") from None
