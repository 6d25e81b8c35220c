"""Absolute Zero's code tasks: formulas, parsing, validity, judging, buffer, prompts, rewards."""

from __future__ import annotations

import pickle
import random

import pytest

from rzero.executor.buffer import TaskBuffer
from rzero.executor.parsing import (
    extract_code,
    extract_tag,
    parse_answer,
    parse_induction_proposal,
    parse_program_proposal,
)
from rzero.executor.prompts import proposer_messages, solver_messages
from rzero.executor.rewards import (
    ExecutorProposerReward,
    ExecutorSolverReward,
    format_reward,
    learnability,
    solver_verdict,
)
from rzero.executor.tasks import (
    IDENTITY,
    CodeTask,
    call_text,
    judge,
    outputs_equal,
    validate_induction,
    validate_triplets,
)

ADD = "def f(a, b):\n    return a + b"


# -- formulas --------------------------------------------------------------------------------


def test_learnability_is_one_minus_the_success_rate():
    assert learnability(3 / 8) == pytest.approx(0.625)  # r̄ = 3/8 -> 1 - 0.375 = 0.625


def test_learnability_is_zero_when_always_solved():
    assert learnability(1.0) == 0.0  # r̄ = 8/8: too easy, 0 rather than 1 - 1 = 0 anyway


def test_learnability_is_zero_when_never_solved():
    assert learnability(0.0) == 0.0  # r̄ = 0/8: unsolvable, 0 rather than 1 - 0 = 1


def test_learnability_refuses_a_rate_outside_zero_one():
    with pytest.raises(ValueError, match="r_bar"):
        learnability(1.5)


def test_solver_verdict_is_one_or_zero():
    assert [solver_verdict(True), solver_verdict(False), solver_verdict(None)] == [1.0, 0, 0]


def test_format_reward_penalties():
    # passable -> the role's reward; well-formed but wrong -> -0.5; broken format -> -1
    assert [format_reward(0.625, True), format_reward(None, True), format_reward(None, False)] == [
        0.625,
        -0.5,
        -1.0,
    ]


# -- comparing and showing values --------------------------------------------------------------


def test_outputs_equal_ignores_literal_spacing():
    assert outputs_equal("(1,2)", "(1, 2)")


def test_outputs_equal_ignores_quote_style():
    assert outputs_equal('"a"', "'a'")


def test_outputs_equal_keeps_int_and_float_apart():
    assert not outputs_equal("1", "1.0")  # repr '1' != '1.0', though 1 == 1.0


def test_outputs_equal_compares_non_literals_as_stripped_text():
    assert outputs_equal(" Counter({'a': 1}) ", "Counter({'a': 1})")


def test_call_text_spreads_a_tuple_into_arguments():
    assert [call_text("(3,'hi')"), call_text("[1, 2]")] == ["f(3, 'hi')", "f([1, 2])"]


# -- parsing ----------------------------------------------------------------------------------


def test_extract_code_takes_the_last_python_block_outside_think():
    text = (
        "<think>```python\ndef f(x): return 0\n```</think>```python\ndef f(x):\n    return 1"
        "\n```\nand\n```python\ndef f(x):\n    return 2\n```"
    )
    assert extract_code(text) == "def f(x):\n    return 2"


def test_extract_tag_takes_the_last_non_empty_tag():
    assert extract_tag("<output>1</output> <output> 2 </output><output></output>", "output") == "2"


def test_program_proposal_needs_both_code_and_input():
    assert parse_program_proposal(f"```python\n{ADD}\n```") is None


def test_induction_proposal_reads_all_inputs_and_the_message():
    proposal = parse_induction_proposal("<input>1</input><input>2</input><message>m</message>")
    assert proposal is not None and proposal.inputs == ("1", "2") and proposal.message == "m"


def test_parse_answer_per_kind():
    text = "<input>(1, 2)</input><output>3</output>\n```python\ndef f(x):\n    return x\n```"
    assert [parse_answer(k, text) for k in ("deduction", "abduction", "induction")] == [
        "3",
        "(1, 2)",
        "def f(x):\n    return x",
    ]


# -- proposal validity ---------------------------------------------------------------------------


def test_valid_triplet_gets_its_output_from_the_executor():
    [check] = validate_triplets([("deduction", ADD, "(2, 3)")])
    assert check.task == CodeTask(kind="deduction", program=ADD, input="(2, 3)", output="5")


@pytest.mark.parametrize(
    "program, inputs, reason",
    [
        ("import random\ndef f(x):\n    return random.random()", "1", "nondeterministic module"),
        ("import os\ndef f(x):\n    return x", "1", "forbidden module"),
        ("def f(x):\n    return 1 / x", "0", "ZeroDivisionError"),
        (ADD, "(2, x)", "not a literal"),
        ("def g(x):\n    return x", "1", "defines no function f"),
    ],
)
def test_invalid_triplets_are_refused_with_a_reason(program, inputs, reason):
    [check] = validate_triplets([("abduction", program, inputs)])
    assert check.task is None and reason in check.reason


@pytest.mark.parametrize(
    "program, inputs, reason",
    [
        (
            ADD,
            "2 * 3",
            "inputs are not a literal: ValueError: malformed node or string on "
            "line 1: <ast.BinOp object>",
        ),
        ("def f(x):\n    raise ValueError(object())", "1", "ValueError: <object object>"),
    ],
)
def test_a_reason_names_no_memory_address(program, inputs, reason):
    # a reason is logged with every proposal and compared across a resume: an address in
    # it (`<ast.BinOp object at 0x7f...>`) would differ from process to process
    [check] = validate_triplets([("deduction", program, inputs)])
    assert check.task is None and reason in check.reason and "0x" not in check.reason


def _no_address_randomisation() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).personality(0x0040000)  # ADDR_NO_RANDOMIZE


def test_an_output_naming_an_address_is_refused_even_where_two_runs_agree(tmp_path):
    # with address randomisation off (as on some CI hosts) two fresh processes print the
    # same `<object object at 0x...>`; the proposal must still be refused, and the check
    # runs in a child whose executor processes inherit that personality
    import subprocess
    import sys

    script = (
        "from rzero.executor.tasks import validate_triplets\n"
        "for p in ('def f(x):\\n    return object()', 'def f(x):\\n    return [x, f]',"
        " 'def f(x):\\n    return \"<a at 0x1f>\"'):\n"
        "    [c] = validate_triplets([('deduction', p, '1')])\n"
        "    print(c.reason if c.task is None else 'valid ' + c.task.output)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=_no_address_randomisation,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == out[1] == "nondeterministic: the output names a memory address"
    assert out[2] == "valid '<a at 0x1f>'"  # a string holding such text is a literal


def test_induction_splits_valid_inputs_into_shown_and_held_out():
    # 4 distinct inputs, one fails (None + 1): 3 pairs -> ceil(3/2) = 2 shown, 1 held out
    program = "def f(x):\n    return x + 1"
    check = validate_induction(program, ["1", "2", "2", "None", "3"], "Add one.")
    assert check.task is not None
    assert check.task.visible == (("1", "2"), ("2", "3")) and check.task.hidden == (("3", "4"),)


def test_induction_needs_two_valid_inputs():
    check = validate_induction("def f(x):\n    return x", ["1", "1"], "Same.")
    assert check.task is None and "1 valid inputs, need 2" in check.reason


def test_induction_needs_a_message():
    assert validate_induction("def f(x):\n    return x", ["1", "2"], " ").reason == "empty message"


# -- judging the solver ------------------------------------------------------------------------


def test_deduction_is_judged_by_value():
    task = CodeTask(kind="deduction", program=ADD, input="(1, 2)", output="(1, 2)")
    assert judge([task, task, task], ["(1,2)", "[1, 2]", None]) == [True, False, None]


def test_abduction_accepts_any_input_with_the_same_output():
    task = CodeTask(kind="abduction", program="def f(x):\n    return x % 3", input="4", output="1")
    assert judge([task, task], ["7", "3"]) == [True, False]  # 7 % 3 = 1, 3 % 3 = 0


def test_induction_is_judged_on_held_out_pairs():
    task = CodeTask(
        kind="induction",
        program="def f(x):\n    return x * x",
        message="Square.",
        visible=(("2", "4"),),
        hidden=(("3", "9"), ("-1", "1")),
    )
    right = "def f(x):\n    return x ** 2"
    memorised = "def f(x):\n    return 4"  # fits the visible pair only
    assert judge([task, task], [right, memorised]) == [True, False]


# -- buffer ----------------------------------------------------------------------------------


def test_buffer_starts_with_the_identity_triplet():
    buffer = TaskBuffer()
    assert buffer.triplets == [IDENTITY] and IDENTITY.program == "def f(x):\n    return x"


def test_buffer_keeps_a_triplet_once():
    buffer = TaskBuffer()
    assert buffer.add(IDENTITY.as_kind("abduction")) is False and len(buffer) == 1


def test_buffer_samples_at_most_what_it_holds():
    buffer = TaskBuffer()
    buffer.add(CodeTask(kind="deduction", program=ADD, input="(1, 2)", output="3"))
    assert len(buffer.sample_references(6, random.Random(0))) == 2


def test_buffer_round_trips_through_jsonl(tmp_path):
    buffer = TaskBuffer()
    buffer.add(
        CodeTask(
            kind="induction",
            program=ADD,
            message="Add.",
            visible=(("(1, 2)", "3"),),
            hidden=(("(2, 2)", "4"),),
        )
    )
    buffer.save(tmp_path / "buffer.jsonl")
    loaded = TaskBuffer.load(tmp_path / "buffer.jsonl")
    assert loaded.triplets == buffer.triplets and loaded.induction == buffer.induction


# -- prompts ---------------------------------------------------------------------------------


def test_proposer_prompt_shows_the_references():
    messages = proposer_messages("deduction", [IDENTITY])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "<input>'Hello World'</input>" in messages[-1]["content"]


@pytest.mark.parametrize("kind", ["deduction", "abduction"])
def test_proposer_worked_example_is_a_valid_proposal(kind):
    example = proposer_messages(kind, [IDENTITY])[2]["content"]
    proposal = parse_program_proposal(example)
    [check] = validate_triplets([(kind, proposal.program, proposal.input)])
    assert check.task is not None and check.task.output == "[6, 10]"  # odd 3, 5 times 2


def test_induction_proposer_worked_example_is_valid():
    messages = proposer_messages("induction", program=ADD)
    assert ADD in messages[-1]["content"]
    proposal = parse_induction_proposal(messages[2]["content"])
    program = "def f(s):\n    return s[::-1].upper()"
    assert validate_induction(program, proposal.inputs, proposal.message).task is not None


@pytest.mark.parametrize("kind", ["deduction", "abduction", "induction"])
def test_solver_worked_example_is_judged_right(kind):
    messages = solver_messages(
        CodeTask(kind=kind, program=ADD, input="(1, 2)", output="3", visible=(("(1, 2)", "3"),))
    )
    example = {
        "deduction": CodeTask(kind="deduction", program="", output="[6, 'hi!']"),
        "abduction": CodeTask(
            kind="abduction", program="def f(x, y):\n    return x * 3 - y", output="10"
        ),
        "induction": CodeTask(kind="induction", program="", hidden=(("7", "14"),)),
    }[kind]
    answer = parse_answer(kind, messages[2]["content"])
    assert judge([example], [answer]) == [True]


def test_solver_prompts_hide_what_is_asked():
    deduction = solver_messages(
        CodeTask(kind="deduction", program=ADD, input="(20, 22)", output="42")
    )[-1]["content"]
    induction = solver_messages(
        CodeTask(kind="induction", program=ADD, message="Add.", visible=(("(1, 2)", "3"),))
    )[-1]["content"]
    assert "f(20, 22)" in deduction and "42" not in deduction
    assert "a + b" not in induction and "f(1, 2) == 3" in induction


# -- rewards ---------------------------------------------------------------------------------


class ScriptedSolver:
    """Answers every prompt with the same scripted samples (module level, so it pickles)."""

    def __init__(self, samples: list[str]):
        self.samples = samples

    def __call__(self, prompts, num_samples):
        assert num_samples == len(self.samples)
        return [list(self.samples) for _ in prompts]


def test_solver_reward_scores_each_task_type():
    deduction = CodeTask(kind="deduction", program=ADD, input="(2, 3)", output="5")
    abduction = deduction.as_kind("abduction")
    completions = [
        "<output>5</output>",
        "<output>6</output>",
        "no answer",
        "<input>(4, 1)</input>",  # 4 + 1 = 5 too: right
        [{"role": "assistant", "content": "<input>(0, 0)</input>"}],
    ]
    tasks = [deduction, deduction, deduction, abduction, abduction]
    rewards = ExecutorSolverReward()(None, completions, task=[t.to_json() for t in tasks])
    assert rewards == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_solver_reward_format_penalty_for_no_answer():
    task = CodeTask(kind="deduction", program=ADD, input="(2, 3)", output="5").to_json()
    reward = ExecutorSolverReward(format_penalty=True)
    assert reward(None, ["<output>4</output>", "5"], task=[task, task]) == [0.0, -1.0]


def test_solver_reward_pickles():
    reward = pickle.loads(pickle.dumps(ExecutorSolverReward(format_penalty=True)))
    assert reward.format_penalty and reward.__name__ == "code_solver"


def test_proposer_reward_is_learnability_of_the_solver_rate():
    # the solver is right in 3 of 8 samples: r̄ = 3/8 -> 1 - 0.375 = 0.625
    solver = ScriptedSolver(["<output>5</output>"] * 3 + ["<output>6</output>"] * 5)
    reward = ExecutorProposerReward(solver, num_samples=8)
    proposal = f"```python\n{ADD}\n```\n<input>(2, 3)</input>"
    assert reward(None, [proposal], kind=["deduction"]) == [pytest.approx(0.625)]


def test_proposer_reward_penalises_invalid_and_unparsable_proposals():
    reward = ExecutorProposerReward(ScriptedSolver(["<output>5</output>"]), num_samples=1)
    invalid = "```python\nimport os\ndef f(x):\n    return x\n```\n<input>1</input>"
    assert reward(None, [invalid, "no code"], kind=["deduction"] * 2) == [-0.5, -1.0]


def test_proposer_reward_adds_valid_proposals_to_the_buffer():
    buffer = TaskBuffer()
    reward = ExecutorProposerReward(
        ScriptedSolver(["<output>5</output>"]), num_samples=1, buffer=buffer
    )
    reward(None, [f"```python\n{ADD}\n```\n<input>(2, 3)</input>"], kind=["abduction"])
    assert len(buffer) == 2 and buffer.triplets[-1].output == "5"


def test_proposer_reward_scores_induction_on_held_out_pairs():
    # pairs 1->2, 2->3, 3->4: shown 2, held out 1; the solver's program is right in 1 of 2
    # samples: r̄ = 1/2 -> 1 - 0.5 = 0.5
    right, wrong = (
        "```python\ndef f(x):\n    return x + 1\n```",
        "```python\ndef f(x):\n    return 2\n```",
    )
    reward = ExecutorProposerReward(ScriptedSolver([right, wrong]), num_samples=2)
    proposal = "<input>1</input><input>2</input><input>3</input><message>Add one.</message>"
    rewards = reward(None, [proposal], kind=["induction"], program=["def f(x):\n    return x + 1"])
    assert rewards == [0.5]


def test_proposer_reward_pickles():
    reward = ExecutorProposerReward(ScriptedSolver(["x"]), num_samples=1, buffer=TaskBuffer())
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.buffer.triplets == [IDENTITY] and copy.sample_solver.samples == ["x"]
