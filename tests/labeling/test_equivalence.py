"""math-verify equivalence behind the hard guard: verdicts, caching, timeouts, threads."""

import os
import threading
import time

import pytest

from rzero.labeling import equivalence
from rzero.labeling.equivalence import EquivalenceChecker, equivalence_stats, equivalent


@pytest.fixture(scope="module")
def checker():
    with EquivalenceChecker(timeout_s=5.0) as c:
        yield c


def test_fraction_decimal_and_slash_are_equivalent(checker):
    assert checker.equivalent(r"\frac{1}{2}", "0.5")
    assert checker.equivalent("1/2", "0.5")
    assert checker.equivalent(r"\sqrt{2}", r"2^{1/2}")


def test_different_values_are_not_equivalent(checker):
    assert not checker.equivalent(r"\frac{1}{3}", "0.333")  # 3 digits is not 1/3
    assert not checker.equivalent("x+1", "x-1")


def test_none_and_empty_are_never_equivalent(checker):
    assert not checker.equivalent(None, None)
    assert not checker.equivalent("", "")
    assert not checker.equivalent("5", None)


def test_normalised_equal_strings_take_the_fast_path(checker):
    before = checker.stats()
    assert checker.equivalent(r"$\dfrac{1}{2}$", r"\frac{1}{2}")
    after = checker.stats()
    assert after.fast_path_hits == before.fast_path_hits + 1
    assert after.math_verify_calls == before.math_verify_calls


def test_plain_integers_take_the_fast_path_and_agree_with_math_verify(checker):
    # the integer fast path must give math-verify's own verdicts
    pairs = [("12", "13"), ("007", "7"), ("-0", "0"), ("100", "-100")]
    before = checker.stats()
    fast = checker.equivalent_many(pairs)
    assert checker.stats().math_verify_calls == before.math_verify_calls
    slow = checker._math_verify_only(pairs)
    assert fast == slow == [False, True, True, False]


def test_cache_key_is_order_free_for_the_symmetric_direction(checker):
    checker.clear_cache()
    assert checker.equivalent("2/4", "0.5")
    before = checker.stats()
    assert checker.equivalent("0.5", "2/4")
    after = checker.stats()
    assert after.cache_hits == before.cache_hits + 1
    assert after.math_verify_calls == before.math_verify_calls


def test_batch_deduplicates_pairs_into_one_round_trip(checker):
    checker.clear_cache()
    before = checker.stats()
    verdicts = checker.equivalent_many([("3/6", "0.5"), ("0.5", "3/6"), ("3/6", "0.25")])
    after = checker.stats()
    assert verdicts == [True, True, False]
    # (3/6, 0.5) and (0.5, 3/6) are one symmetric key -> 2 checks for 3 pairs
    assert after.math_verify_calls - before.math_verify_calls == 2


def test_both_directions_is_stricter_than_either(checker):
    # verify(gold="1 < x < 2", target="(1,2)") holds; the reverse does not, because
    # math-verify compares a relation with a set only when the prediction is the set
    assert checker.equivalent("1 < x < 2", "(1,2)", direction="forward")
    assert not checker.equivalent("(1,2)", "1 < x < 2", direction="forward")
    assert checker.equivalent("1 < x < 2", "(1,2)", direction="either")
    assert not checker.equivalent("1 < x < 2", "(1,2)", direction="both")


def test_unknown_direction_is_rejected(checker):
    with pytest.raises(ValueError, match="direction"):
        checker.equivalent("1", "2", direction="sideways")


@pytest.mark.slow
def test_guard_cuts_off_a_hung_check_and_replaces_the_worker():
    with EquivalenceChecker(timeout_s=1.0) as c:
        assert c.equivalent("1/2", "0.5")  # worker up
        start = time.perf_counter()
        check = c._debug_sleep_in_worker(30.0)  # the test hook: the worker hangs
        elapsed = time.perf_counter() - start
        assert (check.equivalent, check.source) == (False, "timeout")
        assert elapsed < 1.0 + 1.0
        # the replacement worker answers the next calls
        assert c.equivalent("2/4", "0.5")
        stats = c.stats()
        assert stats.timeouts == 1
        assert stats.worker_starts == 2


def test_guard_cuts_off_a_real_slow_sympy_input():
    # 10^(10^10) vs 2: sympy grinds on the comparison; with math-verify's own signal
    # timeouts disabled only the wall-clock guard can stop it
    with EquivalenceChecker(timeout_s=1.0, inner_timeout_s=None) as c:
        assert c.equivalent("1", "1.0")  # worker up
        start = time.perf_counter()
        assert not c.equivalent(r"10^{10^{10}}", "2")
        assert time.perf_counter() - start < 1.0 + 1.0
        assert c.stats().timeouts == 1
        # the timeout is cached: asking again costs nothing
        start = time.perf_counter()
        assert not c.equivalent("2", r"10^{10^{10}}")
        assert time.perf_counter() - start < 0.1
        assert c.equivalent(r"\frac{3}{4}", "0.75")


def test_a_deadline_below_the_limit_is_a_budget_cut_and_not_cached():
    with EquivalenceChecker(timeout_s=5.0) as c:
        c.equivalent("1", "1.0")  # worker up
        [cut] = c.check_many([("x^2", "x*x")], deadlines=[0.0])
        assert (cut.equivalent, cut.source) == (False, "budget")
        [full] = c.check_many([("x^2", "x*x")])
        assert (full.equivalent, full.source) == (True, "math_verify")
        assert c.stats().budget_cuts == 1


@pytest.mark.slow
def test_a_budget_pays_for_a_worker_still_starting_even_at_the_full_limit():
    # a budget equal to the limit is still a budget: the replacement worker's start-up
    # (about half a second) comes out of it, so the call ends within the budget
    with EquivalenceChecker(timeout_s=2.0, inner_timeout_s=None) as c:
        c.equivalent("1", "1.0")  # worker up
        c._worker._kill(restart=True)  # a replacement is starting, as after a cut
        start = time.perf_counter()
        [cut] = c.check_many([(r"10^{10^{10}}", "7")], deadlines=[2.0])
        elapsed = time.perf_counter() - start
        assert cut.source == "budget" and elapsed < 2.0 + 0.25
        assert cut.seconds == pytest.approx(elapsed, abs=0.1)
        # without a budget, start-up is not charged: the full limit runs and times out
        c._worker._kill(restart=True)
        [full] = c.check_many([(r"10^{10^{10}}", "7")])
        assert full.source == "timeout"


def test_works_from_a_non_main_thread(checker):
    results = []
    thread = threading.Thread(target=lambda: results.append(checker.equivalent("6/8", "0.75")))
    thread.start()
    thread.join(timeout=60)
    assert results == [True]


def test_concurrent_threads_get_consistent_verdicts(checker):
    pairs = [(f"{k}/{2 * k}", "0.5") for k in range(1, 9)] + [(f"{k}/3", "0.5") for k in (1, 2)]
    expected = [True] * 8 + [False, False]
    results: dict[int, list[bool]] = {}

    def work(t: int) -> None:
        results[t] = checker.equivalent_many(pairs)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(results[t] == expected for t in range(4))


def test_module_level_api_counts_calls():
    before = equivalence_stats()
    assert equivalent(r"\frac{5}{10}", "0.5")
    after = equivalence_stats()
    assert after.calls == before.calls + 1


def test_configure_replaces_the_default_checker():
    old = equivalence.get_checker()
    try:
        new = equivalence.configure(timeout_s=2.0, direction="either")
        assert equivalence.get_checker() is new
        assert (new.timeout_s, new.direction) == (2.0, "either")
    finally:
        equivalence.configure()  # back to the defaults
        assert old is not equivalence.get_checker()


def test_use_settings_sets_the_grading_direction_and_keeps_a_matching_checker(checker):
    # math-verify accepts this pair in one direction only: an inequality (gold) against
    # an interval (prediction), but not the interval against the inequality
    a, b = "x > 3", r"(3,\infty)"
    assert checker._math_verify_only([(a, b)], "forward") == [True]
    assert checker._math_verify_only([(b, a)], "forward") == [False]
    from rzero.labeling.voting import majority_vote

    try:
        either = equivalence.use_settings(timeout_s=5.0, direction="either")
        assert equivalence.get_checker() is either
        assert (either.timeout_s, either.direction) == (5.0, "either")
        assert equivalent(a, b) and equivalent(b, a)
        assert equivalence.equivalent_many([(b, a), ("x > 4", b)]) == [True, False]
        assert majority_vote([a, b, b]).num_groups == 1
        starts = either.stats().worker_starts
        # the same settings again: the same checker, its warm worker and cache kept
        assert equivalence.use_settings(timeout_s=5.0, direction="either") is either
        assert equivalent(a, b) and either.stats().worker_starts == starts

        both = equivalence.use_settings(timeout_s=5.0, direction="both")
        assert both is not either and equivalence.get_checker() is both
        assert not equivalent(a, b) and not equivalent(b, a)
        assert equivalence.equivalent_many([(b, a), ("x > 4", b)]) == [False, False]
        assert majority_vote([a, b, b]).num_groups == 2
        assert equivalence.use_settings(timeout_s=5.0, direction="both") is both
        assert equivalence.use_settings(timeout_s=2.0, direction="both") is not both
    finally:
        equivalence.use_settings(timeout_s=5.0, direction="both")  # back to the defaults
    restored = equivalence.get_checker()
    assert (restored.timeout_s, restored.direction) == (5.0, "both")


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="timeout_s"):
        EquivalenceChecker(timeout_s=0)
    with pytest.raises(ValueError, match="cache_size"):
        EquivalenceChecker(cache_size=-1)


@pytest.mark.slow
def test_a_pair_that_ran_out_of_budget_is_not_retried_with_less():
    with EquivalenceChecker(timeout_s=2.0, inner_timeout_s=None) as c:
        c.equivalent("1", "1.0")  # worker up
        [first] = c.check_many([(r"10^{10^{10}}", "3")], deadlines=[0.5])
        assert (first.source, round(first.seconds, 1)) == ("budget", 0.5)
        # 0.4 s is less than the 0.5 s it already failed with: answered at once
        start = time.perf_counter()
        [again] = c.check_many([("3", r"10^{10^{10}}")], deadlines=[0.4])
        assert again.source == "budget"
        assert time.perf_counter() - start < 0.1
        # with the full limit it runs (and times out for good)
        [full] = c.check_many([(r"10^{10^{10}}", "3")])
        assert full.source == "timeout"


@pytest.mark.slow
def test_an_answer_that_keeps_timing_out_gets_no_more_worker_time():
    # with a 2 s limit math-verify's own 1 s timeout stops each tower comparison;
    # after 3 timeouts (and no completed comparison) the tower is skipped outright
    with EquivalenceChecker(timeout_s=2.0) as c:
        c.equivalent("1", "1.0")  # worker up
        tower = r"10^{10^{10}}"
        sources = [c.check_many([(tower, n)])[0].source for n in ("2", "3", "4")]
        assert sources == ["math_verify"] * 3 and c.stats().inner_timeouts == 3
        start = time.perf_counter()
        [skipped] = c.check_many([(tower, "5")])
        assert (skipped.equivalent, skipped.source) == (False, "slow_answer")
        assert time.perf_counter() - start < 0.1
        assert c.equivalent(tower, " 10^{10^{10}} ")  # identical strings still match
        assert c.equivalent("2", "2.0")  # its partners are not blamed


def test_worker_runs_under_a_memory_limit():
    with EquivalenceChecker(memory_limit_mb=4096) as c:
        assert c.equivalent(r"\frac{3}{6}", "0.5")
        assert c.stats().errors == 0


def test_a_forked_child_starts_its_own_worker(checker):
    assert checker.equivalent("5/10", "0.5")  # the parent's worker is up
    pid = os.fork()
    if pid == 0:  # child: must not share (or kill) the parent's worker
        ok = False
        try:  # a pair nothing has asked before, so it needs a worker
            ok = checker.equivalent("13/26", "0.5") and checker.stats().worker_starts >= 2
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert checker.equivalent("15/30", "0.5")  # the parent's worker still answers
