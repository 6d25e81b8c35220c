"""The code tier (seed 003, Absolute Zero): the only place that runs model-written code.

sandbox.py    run_program / run_many / check_deterministic / sandbox_probe: one
              confined child process per call (see its docstring for the walls and
              their limits)
_runner.py    the sandbox child: confine this process, then run one program
codecheck.py  the static filter on imports, builtins and dunder access (defence in depth)
tasks.py      CodeTask (triplets and induction tasks), output comparison, proposal
              validity, judging the solver's answers
buffer.py     TaskBuffer seeded with the identity triplet
parsing.py    reading ```python fences and <input>/<output>/<message> tags
prompts.py    proposer and solver chat prompts per task type
rewards.py    learnability, solver verdict, format penalties; ExecutorProposerReward,
              ExecutorSolverReward
"""

from rzero.executor.buffer import TaskBuffer
from rzero.executor.prompts import proposer_messages, solver_messages
from rzero.executor.rewards import (
    ExecutorProposerReward,
    ExecutorSolverReward,
    SolverSampler,
    format_reward,
    learnability,
    solver_verdict,
)
from rzero.executor.sandbox import (
    ExecResult,
    Limits,
    check_deterministic,
    run_many,
    run_program,
    sandbox_probe,
)
from rzero.executor.tasks import (
    IDENTITY,
    TASK_TYPES,
    CodeTask,
    judge,
    outputs_equal,
    validate_induction,
    validate_triplets,
)

__all__ = [
    "IDENTITY",
    "TASK_TYPES",
    "CodeTask",
    "ExecResult",
    "Limits",
    "ExecutorProposerReward",
    "ExecutorSolverReward",
    "SolverSampler",
    "TaskBuffer",
    "check_deterministic",
    "format_reward",
    "judge",
    "learnability",
    "outputs_equal",
    "proposer_messages",
    "run_many",
    "run_program",
    "sandbox_probe",
    "solver_messages",
    "solver_verdict",
    "validate_induction",
    "validate_triplets",
]
