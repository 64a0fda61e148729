"""Trial 36a: ``TuningResult.ranked()`` (``tune-report --top``'s list, ``--json``'s ``top``) put
first a trial that a completion criterion cut short below ``min_resource``, with a higher value,
while ``result.best`` was rightly another: the list of the candidates of ``best`` did not start
with ``best``."""

from __future__ import annotations

from tripwire.tune._result import TrialRecord, TuningResult

JOB = {"strategy": {"type": "hyperband", "min_resource": 3, "max_resource": 9, "reduction_factor": 3}}


def _rec(number: int, value: float, resource: int, status: str = "stopped") -> TrialRecord:
    return TrialRecord(number, {}, status, value, None, resource, 0, 0, "tuning job complete", None, 1, 0.0, 1.0)


def test_ranked_starts_with_best_and_puts_the_trials_cut_below_min_resource_last() -> None:
    trials = [_rec(0, 0.85, 8), _rec(1, 9.56, 1), _rec(2, 0.90, 3), _rec(3, 0.95, 2)]
    for mode, order in (("max", [2, 0, 1, 3]), ("min", [0, 2, 3, 1])):
        result = TuningResult(trials, "acc", mode, 9, JOB)
        ranked = [t.number for t in result.ranked()]
        assert ranked == order
        assert result.best is not None and result.best.number == ranked[0]


def test_ranked_keeps_the_short_ones_when_no_trial_reached_min_resource() -> None:
    trials = [_rec(0, 0.5, 1), _rec(1, 0.7, 2)]
    result = TuningResult(trials, "acc", "max", 9, JOB)
    assert [t.number for t in result.ranked()] == [1, 0] and result.best.number == 1
    # no min_resource (random search): by value alone
    result = TuningResult([_rec(0, 0.85, 8), _rec(1, 9.56, 1)], "acc", "max", 9, {"strategy": {"type": "random"}})
    assert [t.number for t in result.ranked()] == [1, 0] and result.best.number == 1
