"""SPAG's collection, rewards, loss and population audit (rzero.spag.play, objective,
population): scripted games with known outcomes played end to end through the collection,
the official reward and loss written out by hand, and the audit's numbers on matrices whose
answers are known."""

import math

import pytest
import torch
from conftest import ScriptedGenerator

from rzero.generation.interface import SamplingParams
from rzero.spag.game import ATTACKER, ATTACKER_WINS, DEFENDER, DEFENDER_WINS, TIE, VIOLATION
from rzero.spag.objective import imitation_loss, sequence_logprob, spag_loss, turn_rewards
from rzero.spag.play import SCRIPT, ModelPlayer, ScriptedPlayer, collect, role_prompt, utterance
from rzero.spag.population import bradley_terry, exploitability, nontransitivity, score, win_matrix
from rzero.spag.words import candidate_words

# one scripted dialogue per target word: (attacker lines, defender lines)
DIALOGUES = {
    "apple": (["A red fruit that keeps the doctor away?"], ["I know the word! It is apple!"]),
    "river": (
        ["Where do boats float, besides the sea?", "Water flowing to the sea?"],
        ["On a lake, I think.", "Oh, a river!"],
    ),
    "piano": (["Which instrument has 88 keys?"], ["I know the word! It is organ."]),
    "cloud": (["Look, a cloud up there."], ["Where?"]),
    "paper": ([f"hint {i}" for i in range(3)], [f"reply {i}" for i in range(3)]),
}


class Scripted:
    """Plays each game's scripted lines for its role; records the prompts it was shown."""

    def __init__(self):
        self.calls = []

    def moves(self, role, games, max_turns):
        self.calls.append((role, [g.id for g in games]))
        lines = 0 if role == ATTACKER else 1
        return [DIALOGUES[g.target][lines][len(g.turns) // 2] for g in games]


def test_scripted_games_play_through_the_collection_with_known_outcomes():
    player = Scripted()
    games = collect({ATTACKER: player, DEFENDER: player}, list(DIALOGUES), max_turns=3)
    records = [g.record(3, "word", split="train") for g in games]
    got = {r["target"]: (r["outcome"], r["messages"], r["reason"]) for r in records}
    assert got == {
        "apple": (DEFENDER_WINS, 2, "the defender guessed the word"),
        "river": (ATTACKER_WINS, 4, "the defender said the word"),
        "piano": (ATTACKER_WINS, 2, "the defender guessed a wrong word"),
        "cloud": (VIOLATION, 1, "the attacker said the word"),
        "paper": (TIE, 6, "no decision in 3 turns each"),
    }
    # the stored episode holds every message with its role, and decided games stopped
    river = next(r for r in records if r["target"] == "river")
    assert [t["role"] for t in river["turns"]] == [ATTACKER, DEFENDER, ATTACKER, DEFENDER]
    assert river["turns"][3]["text"] == "Oh, a river!" and river["winner"] == ATTACKER
    assert all(len(r["turns"]) == r["messages"] for r in records)
    assert records[0]["id"] == "g0000" and records[0]["split"] == "train"
    # one batch per turn, holding only the games still going
    assert player.calls[0] == (ATTACKER, ["g0000", "g0001", "g0002", "g0003", "g0004"])
    assert player.calls[1] == (DEFENDER, ["g0000", "g0001", "g0002", "g0004"])
    assert player.calls[2] == (ATTACKER, ["g0001", "g0004"])
    assert len(player.calls) == 6
    wins = [r["winner"] for r in records]
    assert wins.count(ATTACKER) == 2 and wins.count(DEFENDER) == 1


def test_a_model_player_sees_the_word_only_as_attacker_and_its_turns_are_cleaned():
    gen = ScriptedGenerator(
        lambda text, n, params: ["Attacker: Think of something sweet.\nDefender: ok"], cycle=True
    )
    player = ModelPlayer(gen, SamplingParams(temperature=1.2, max_new_tokens=32, seed=7))
    games = collect({ATTACKER: player, DEFENDER: ScriptedPlayer()}, ["honey", "salt"], max_turns=2)
    assert [t for _, t in games[0].turns][0] == "Think of something sweet."
    prompts, n, params = gen.calls[0]
    assert n == 1 and params.temperature == 1.2 and params.seed == 7
    assert (
        '"honey"' in prompts[0][0]["content"] and "At most 2 turns each" in prompts[0][0]["content"]
    )
    assert gen.calls[1][2].seed == 9  # a seed per turn: the turn index added
    defender = role_prompt(DEFENDER, "", games[0].turns, 2)[0]["content"]
    assert "honey" not in defender and "Attacker: Think of something sweet." in defender
    assert utterance('  "I know the word! It is salt!"  ') == "I know the word! It is salt!"
    assert utterance("**Defender**: Maybe bread?\n\nAttacker: no") == "Maybe bread?"
    with pytest.raises(ValueError, match="one for each of attacker, defender"):
        collect({ATTACKER: player}, ["x"], 2)


def test_the_official_collection_ends_a_game_at_an_unread_guess_phrase():
    # "I know the word." with a period is no guess for the official judge, but its
    # collection stops there: a tie, where the word match plays on
    class Lines:
        def moves(self, role, games, max_turns):
            return [
                "A fruit?" if role == ATTACKER else "I know the word. It is pear" for _ in games
            ]

    official = collect({ATTACKER: Lines(), DEFENDER: Lines()}, ["apple"], 3, match="official")
    assert (official[0].outcome.result, official[0].outcome.messages) == (TIE, 2)
    word = collect({ATTACKER: Lines(), DEFENDER: Lines()}, ["apple"], 3, match="word")
    assert word[0].outcome.result == ATTACKER_WINS  # a wrong guess in the word match


@pytest.mark.slow
def test_the_scripted_anchor_can_neither_say_nor_spell_a_target():
    from rzero.spag.game import mentions, spells_out

    for word in candidate_words():
        for line in SCRIPT[ATTACKER] + SCRIPT[DEFENDER]:
            assert not mentions(line, word) and not spells_out(line, word), (word, line)
    games = collect({ATTACKER: ScriptedPlayer(), DEFENDER: ScriptedPlayer()}, ["garden"], 5)
    assert games[0].outcome.result == TIE and len(games[0].turns) == 10
    # under the official substring match a line can hold a target ("think" holds "thin"):
    # the anchor skips it, so against itself it still only ties
    assert mentions("Why do you think so?", "thin", "official")
    words = candidate_words(30000)[::25]
    games = collect(
        {ATTACKER: ScriptedPlayer("official"), DEFENDER: ScriptedPlayer("official")},
        ["thin", "goon", *words],
        3,
        match="official",
    )
    assert {g.outcome.result for g in games} == {TIE}


# ---------------------------------------------------------------- rewards and loss


def episode(i, outcome, roles, messages=None):
    turns = [{"role": r, "text": f"{r} {n}"} for n, r in enumerate(roles)]
    return {
        "id": f"e{i}",
        "target": "w",
        "turns": turns,
        "outcome": outcome,
        "messages": messages or len(turns),
    }


def test_turn_rewards_are_the_winners_turns_discounted_and_the_roles_balanced():
    roles = [ATTACKER, DEFENDER] * 3
    eps = [
        episode(0, ATTACKER_WINS, roles[:6]),
        episode(1, DEFENDER_WINS, roles[:4]),
        episode(2, ATTACKER_WINS, roles[:2], messages=2),
        episode(3, TIE, roles),
        episode(4, VIOLATION, roles[:1]),
    ]
    rows = turn_rewards(eps, decay=0.8)
    by = {}
    for r in rows:
        by.setdefault(r["episode"], []).append(r)
    assert set(by) == {"e0", "e1", "e2"}  # ties and violations give no rows
    # e0: the attacker's 3 turns, rewards ∝ 1.25, 1.5625, 1.953125, summing to 1
    c = [1.25, 1.5625, 1.953125]
    assert [r["reward"] for r in by["e0"]] == pytest.approx([x / sum(c) for x in c])
    assert [r["index"] for r in by["e0"]] == [0, 2, 4] and by["e0"][1]["history"][-1] == (
        DEFENDER,
        "defender 1",
    )
    assert [r["reward"] for r in by["e1"]] == pytest.approx([1.25 / 2.8125, 1.5625 / 2.8125])
    assert by["e2"][0]["reward"] == pytest.approx(1.0)
    # 3 decided games, 2 attacker wins and 1 defender win: weights 3/4 and 3/2
    assert {r["weight"] for r in by["e0"] + by["e2"]} == {0.75}
    assert {r["weight"] for r in by["e1"]} == {1.5}
    with pytest.raises(ValueError, match="decay 0"):
        turn_rewards(eps, decay=0)


def naive_spag_loss(logp, old, reward, weight, sft, clip, kl, alpha):
    game_terms, sft_terms = [], []
    for lp, o, r, w, s in zip(logp, old, reward, weight, sft, strict=True):
        if s:
            sft_terms.append(-w * lp)
        else:
            ratio = math.exp(lp - o)
            adv = r - kl * (lp - o)
            game_terms.append(-w * min(adv * ratio, adv * min(max(ratio, 1 - clip), 1 + clip)))
    total = sum(game_terms) / len(game_terms) if game_terms else 0.0
    return total + (alpha * sum(sft_terms) / len(sft_terms) if sft_terms else 0.0)


@pytest.mark.parametrize("seed", range(5))
def test_spag_loss_is_the_official_formula_on_random_batches(seed):
    g = torch.Generator().manual_seed(seed)
    n = 12
    logp = -torch.rand(n, generator=g, dtype=torch.float64) * 3
    old = logp + (torch.rand(n, generator=g, dtype=torch.float64) - 0.5)  # ratios in e^±0.5
    reward = torch.rand(n, generator=g, dtype=torch.float64)
    weight = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
    sft = torch.rand(n, generator=g) < 0.3
    got = spag_loss(logp, old, reward, weight, sft, clip=0.2, kl_coef=0.2, sft_coef=0.5)
    want = naive_spag_loss(
        logp.tolist(), old.tolist(), reward.tolist(), weight.tolist(), sft.tolist(), 0.2, 0.2, 0.5
    )
    assert got.item() == pytest.approx(want, rel=1e-12)
    # game rows only, SFT rows only
    none = torch.zeros(n, dtype=torch.bool)
    assert spag_loss(logp, old, reward, weight, none).item() == pytest.approx(
        naive_spag_loss(
            logp.tolist(),
            old.tolist(),
            reward.tolist(),
            weight.tolist(),
            [False] * n,
            0.2,
            0.2,
            0.5,
        ),
        rel=1e-12,
    )
    assert spag_loss(logp, old, reward, weight, ~none).item() == pytest.approx(
        0.5 * float((-logp * weight).mean()), rel=1e-12
    )


def test_at_the_collecting_policy_the_kl_term_shifts_the_reward_by_beta():
    # d/d log π of the loss at ρ = 1 is −w (r − β) / N: a turn rewarded below β goes down
    for r, want in ((0.1, 0.1), (0.2, 0.0), (0.5, -0.3)):
        logp = torch.tensor([-2.0], requires_grad=True)
        spag_loss(
            logp,
            logp.detach(),
            torch.tensor([r]),
            torch.tensor([1.0]),
            torch.tensor([False]),
            kl_coef=0.2,
        ).backward()
        assert logp.grad.item() == pytest.approx(want)


def test_the_loss_raises_a_winning_turn_and_stops_once_the_ratio_is_clipped():
    logp = torch.tensor([-2.0], requires_grad=True)
    old = torch.tensor([-2.0])
    loss = spag_loss(
        logp, old, torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([False]), kl_coef=0.0
    )
    loss.backward()
    assert logp.grad.item() < 0  # descending the loss raises log π of the winner's turn
    far = torch.tensor([-2.0 + math.log(1.5)], requires_grad=True)  # ratio 1.5 > 1 + ε
    spag_loss(
        far, old, torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([False]), kl_coef=0.0
    ).backward()
    assert far.grad.item() == 0.0
    tokens = torch.tensor([[-1.0, -3.0, -9.0]])
    assert sequence_logprob(tokens, torch.tensor([[1.0, 1.0, 0.0]])).item() == -2.0
    lp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -2.0])
    want = ((1.0 + 0.1 * math.exp(-1.0) * 0.5) + 2.0) / 2
    assert imitation_loss(lp, ref, torch.ones(2)).item() == pytest.approx(want)


# ---------------------------------------------------------------- the population audit


def games_between(a, d, outcomes):
    return [{"attacker": a, "defender": d, "outcome": o} for o in outcomes]


def test_the_win_matrix_counts_both_roles_and_drops_violations():
    games = games_between("new", "old", [ATTACKER_WINS] * 3 + [TIE]) + games_between(
        "old", "new", [ATTACKER_WINS, DEFENDER_WINS, VIOLATION]
    )
    w, n = win_matrix(games, ["old", "new"])
    # new: 3 wins + a tie as attacker, 1 win 1 loss as defender = 4.5 of 6
    assert w[1][0] == pytest.approx(4.5 / 6) and w[0][1] == pytest.approx(1.5 / 6)
    assert n == [[0, 6], [6, 0]] and w[0][0] is None
    assert score(VIOLATION, ATTACKER) is None and score(TIE, DEFENDER) == 0.5
    assert score(DEFENDER_WINS, DEFENDER) == 1.0 and score(DEFENDER_WINS, ATTACKER) == 0.0


def test_bradley_terry_recovers_known_strengths_and_reports_its_calibration():
    s = [1.0, 2.0, 4.0]
    big = 10_000
    w = [[s[i] / (s[i] + s[j]) if i != j else None for j in range(3)] for i in range(3)]
    n = [[big if i != j else 0 for j in range(3)] for i in range(3)]
    fit = bradley_terry(w, n)
    ratio = [x / fit["strength"][0] for x in fit["strength"]]
    assert ratio == pytest.approx([1.0, 2.0, 4.0], rel=1e-3)
    assert fit["calibration_gap"] < 1e-3
    assert fit["elo"][2] - fit["elo"][0] == pytest.approx(400 * math.log10(4), abs=1)
    # a cycle: no rating fits it, and the calibration gap says so
    cyc = [[None, 1.0, 0.0], [0.0, None, 1.0], [1.0, 0.0, None]]
    cfit = bradley_terry(cyc, n)
    assert cfit["strength"] == pytest.approx([1, 1, 1], rel=1e-6)
    assert cfit["calibration_gap"] == pytest.approx(0.5)


def test_nontransitivity_and_exploitability_on_a_ladder_and_a_cycle():
    ladder = [[None, 0.3, 0.1], [0.7, None, 0.3], [0.9, 0.7, None]]
    cyc = [[None, 1.0, 0.0], [0.0, None, 1.0], [1.0, 0.0, None]]
    assert nontransitivity(ladder)["cyclic_share"] == pytest.approx(0.0, abs=1e-12)
    assert nontransitivity(cyc)["cyclic_share"] == pytest.approx(1.0)
    assert nontransitivity([[None, 0.7], [0.3, None]]) is None
    # the ladder's top player beats the uniform mixture by (0.9 + 0.7 + 0.5)/3 − ½
    assert exploitability(ladder, [1 / 3] * 3) == pytest.approx(2.1 / 3 - 0.5)
    assert exploitability(ladder, [0, 0, 1]) == pytest.approx(0.0)  # the best alone
    # rock-paper-scissors: the uniform mixture cannot be exploited, a pure one can
    assert exploitability(cyc, [1 / 3] * 3) == pytest.approx(0.0)
    assert exploitability(cyc, [1, 0, 0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one weight per player"):
        exploitability(cyc, [0.5, 0.5])
