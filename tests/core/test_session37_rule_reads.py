"""Session 37: the default rules cost about 90-100 us of training-thread time per weight+gradient
pair at each save step (trial 36p: 12 ms a save step on a 244-tensor model), in reading every
series at every save step. The history now takes a series' values out of the pending records only
when that series is read (``_catch_up``), reads a save step's values of many tensors in one call
(``values_at``) and notes which tensors hold a non-finite value as records come
(``nonfinite_tensors``), so that ``exploding_tensor`` reads no other series. These tests hold the
history's answers to what they were, and the rule to not reading what it does not need."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tripwire import Session
from tripwire._history import History
from tripwire._watch import HistoryAsOf
from tripwire.rules import get_rule

REDS = ("l2", "mean", "nonfinite_count")


def _feed(h: History, ops: list[tuple]) -> None:
    for op in ops:
        if op[0] == "step":
            _, mode, step, worker, names, values = op
            h.add_step(mode, step, worker, float(step), [(n, REDS) for n in names], values)
        else:
            _, mode, steps, worker, names, rows = op
            h.add_steps(mode, steps, worker, [float(s) for s in steps], [(n, REDS) for n in names], rows)


def _random_ops(seed: int) -> list[tuple]:
    rng = random.Random(seed)
    ops: list[tuple] = []
    step = {("train", 0): 0, ("train", 1): 0, ("eval", 0): 0}
    for _ in range(300):
        mode, worker = rng.choice(list(step))
        names = rng.choice([["a", "b", "c"], ["b", "d"], ["loss"]])
        if rng.random() < 0.1:  # (a resume: steps go back)
            step[(mode, worker)] = max(0, step[(mode, worker)] - rng.randint(1, 5))
        if rng.random() < 0.2:
            k = rng.randint(2, 6)
            steps = list(range(step[(mode, worker)], step[(mode, worker)] + k))
            rows = np.asarray([[rng.random() for _ in range(3 * len(names))] for _ in steps])
            ops.append(("steps", mode, steps, worker, names, rows))
            step[(mode, worker)] += k
        else:
            values = np.asarray([rng.choice([rng.random(), 0.0, math.inf, math.nan]) for _ in range(3 * len(names))])
            ops.append(("step", mode, step[(mode, worker)], worker, names, values))
            step[(mode, worker)] += 1
    return ops


def _model(ops: list[tuple]) -> dict[tuple[str, str, str, int], tuple[list[int], list[float]]]:
    """Each series as the ops wrote it, in write order: what a history must read back."""
    out: dict[tuple[str, str, str, int], tuple[list[int], list[float]]] = {}
    for op in ops:
        _, mode, steps, worker, names, values = op
        rows = [values] if op[0] == "step" else list(values)
        for step, row in zip([steps] if op[0] == "step" else steps, rows):
            for i, name in enumerate(names):
                for j, red in enumerate(REDS):
                    got = out.setdefault((name, red, mode, worker), ([], []))
                    got[0].append(step)
                    got[1].append(float(row[3 * i + j]))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("group_values", [History._GROUP_VALUES, 7])
def test_series_read_between_records_equal_those_read_at_the_end(seed: int, group_values: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A history read at random points (one series, a save step's values, everything) holds at the
    end the same series, in the same order, as one read only at the end: the values a catch-up
    took out are not grouped again, the others are not lost, also behind more than _CATCH_UP blocks,
    and where the pending blocks are grouped a part at a time (``group_values``)."""
    monkeypatch.setattr(History, "_GROUP_VALUES", group_values)
    ops = _random_ops(seed)
    # (a long gap: more blocks than a catch-up goes through, none of them read)
    ops[150:150] = [("step", "train", 10_000 + k, 0, ["a", "b"], np.arange(6.0)) for k in range(History._CATCH_UP + 5)]
    reference, read = History(), History()
    _feed(reference, ops)
    rng = random.Random(100 + seed)
    keys = [(n, r) for n in ("a", "b", "c", "d", "loss") for r in REDS]
    for i, op in enumerate(ops):
        _feed(read, [op])
        if 150 <= i < 150 + History._CATCH_UP + 5:
            continue
        roll = rng.random()
        if roll < 0.3:
            n, r = rng.choice(keys)
            if read.has_tensor(n):
                read.series(n, r, rng.choice(["train", "eval"]), rng.choice([0, 1]))
        elif roll < 0.4:
            read.values_at(["a", "b", "c", "d"], "l2", op[2] if op[0] == "step" else op[2][-1], op[1], op[3])
        elif roll < 0.42:
            read.scalar_columns()
        elif roll < 0.45 and read.has_tensor("b"):
            read.ascending("b", "mean", "train", 0)
    model = _model(ops)
    for n, r in keys:
        for mode in ("train", "eval"):
            for worker in (0, 1):
                if not reference.has_tensor(n):
                    continue
                want = model.get((n, r, mode, worker), ([], []))
                for history in (reference, read):
                    got = history.series(n, r, mode, worker)
                    assert got[0].tolist() == want[0]
                    np.testing.assert_array_equal(got[1], np.asarray(want[1], dtype=float))
                assert read.ascending(n, r, mode, worker) == reference.ascending(n, r, mode, worker)
    a, b = reference.scalar_columns(), read.scalar_columns()
    for col in ("step", "mode", "worker", "key"):
        np.testing.assert_array_equal(a[col], b[col])
    np.testing.assert_array_equal(a["value"], b["value"])


def test_values_at_equals_value_of_each() -> None:
    h = History()
    for step in range(5):
        h.add_step("train", step, 0, float(step), [("g1", ("l2",)), ("g2", ("l2",))], np.array([step, 10.0 + step]))
    h.add_step("train", 3, 0, 9.0, [("g1", ("l2",))], np.array([99.0]))  # (step 3 again: a resume)
    h.add_step("eval", 2, 0, 10.0, [("g1", ("l2",))], np.array([-1.0]))
    for step in range(6):
        for mode in ("train", "eval"):
            want = [h.value(n, "l2", step, mode, 0) for n in ("g1", "g2", "never")]
            assert h.values_at(["g1", "g2", "never"], "l2", step, mode, 0) == want
    assert h.values_at(["g1"], "l2", 3, "train", 0) == [99.0]  # the value written last
    assert h.values_at(["g1"], "abs_l2", 4, "train", 0) == [4.0]  # (another name of the same value)
    with pytest.raises(ValueError, match="mode"):
        h.values_at(["g1"], "l2", 1, "training", 0)


def test_values_at_in_a_replay_view_shows_only_records_up_to_its_limit() -> None:
    h = History()
    for step in range(4):
        h.add_step("train", step, 0, float(step), [("g", ("l2",))], np.array([float(step)]))
    view = HistoryAsOf(h)
    view.set_limit(1.5)  # (records up to wall time 1.5: steps 0 and 1)
    assert view.values_at(["g"], "l2", 1, "train", 0) == [1.0]
    assert view.values_at(["g"], "l2", 3, "train", 0) == [None]


def test_nonfinite_tensors_names_the_tensors_with_a_bad_value_in_the_window() -> None:
    h = History()
    scal = [("w", ("l2", "nonfinite_count")), ("g", ("l2", "nonfinite_count")), ("loss", ("raw",))]
    rows = {0: [1, 0, 1, 0, 2.0], 1: [1, 0, math.inf, 0, 2.0], 2: [1, 3, 1, 0, 2.0], 3: [1, 0, 1, 0, math.nan],
            4: [1, 0, 1, 0, 2.0]}
    for step, row in rows.items():
        h.add_step("train", step, 0, float(step), scal, np.array(row, dtype=float))
    assert h.nonfinite_tensors("train", 0, -1, 0) == set()
    assert h.nonfinite_tensors("train", 0, 0, 1) == {"g"}  # an infinite norm
    assert h.nonfinite_tensors("train", 0, 1, 2) == {"w"}  # a count above 0, its norm finite
    assert h.nonfinite_tensors("train", 0, -1, 4) == {"w", "g", "loss"}
    assert h.nonfinite_tensors("train", 0, 3, 4) == set()
    assert h.nonfinite_tensors("eval", 0, -1, 4) == set()
    assert h.nonfinite_tensors("train", 1, -1, 4) == set()
    # (steps that went back: looked through in write order)
    h.add_step("train", 1, 0, 9.0, scal, np.array([1, 0, 1, 0, math.inf]))
    assert h.nonfinite_tensors("train", 0, 0, 1) == {"g", "loss"}
    # (values whose sum overflows are finite all the same)
    h.add_step("train", 9, 0, 10.0, scal, np.array([1e308, 0, 1e308, 0, 1.7e308]))
    assert h.nonfinite_tensors("train", 0, 8, 9) == set()
    # (a stored run's records, many steps at once)
    h2 = History()
    h2.add_steps("train", [0, 1, 2], 0, [0.0, 1.0, 2.0], [("loss", ("raw",))], np.array([[1.0], [math.nan], [1.0]]))
    assert h2.nonfinite_tensors("train", 0, -1, 0) == set()
    assert h2.nonfinite_tensors("train", 0, 0, 2) == {"loss"}


def _session_with(n: int, nan_at: tuple[int, int] | None) -> Session:
    session = Session(rules=["exploding_tensor"], write=False, save_interval=1, include_collections=["weights"])
    rng = np.random.default_rng(0)
    for step in range(12):
        values: dict = {"loss": (1.0 / (step + 1), "losses")}
        for i in range(n):
            w = rng.normal(size=(4, 4))
            if nan_at == (step, i):
                w[1, 2] = np.nan
            values[f"layer{i}.weight"] = (w, "weights")
        session.step("train", step, values)
    return session


def test_exploding_tensor_reads_no_series_of_a_tensor_whose_values_are_finite(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session_with(40, None)
    history = session.history
    reads: list[str] = []
    series = History.series

    def counting(self: History, tensor: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(tensor)
        return series(self, tensor, *args, **kwargs)

    monkeypatch.setattr(History, "series", counting)
    rule = get_rule("exploding_tensor")()
    rule.check(history, 11, "train")  # (the first evaluation: every step so far)
    reads.clear()
    for step in range(12, 15):
        values = [float(step)] + [1.0] * 40
        history.add_step("train", step, 0, float(step), [("loss", ("raw",))] + [(f"layer{i}.weight", ("l2",))
                                                                                  for i in range(40)], np.array(values))
        assert rule.check(history, step, "train") is None
    assert len(reads) <= 3, reads  # (the first tensor looked at tells that the window was seen)
    session.close()


@pytest.mark.parametrize("where", [(7, 39), (3, 0), (10, 17)])
def test_exploding_tensor_still_finds_the_first_nan_of_many_tensors(where: tuple[int, int]) -> None:
    session = _session_with(40, where)
    found = [f for f in session.findings if f.rule == "exploding_tensor"]
    session.close()
    assert found and found[0].step == where[0], [f.message for f in found]
    assert f"layer{where[1]}.weight" in found[0].message


def test_rules_cost_benchmark_quick(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The smoke check of benchmarks/rules_cost.py: it runs, prints its table and writes its JSON."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "rules_cost.py"), "--quick", "--json",
                          str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "default" in out.stdout and "us/pair" in out.stdout
    got = json.loads((tmp_path / "r.json").read_text())
    row = got["sizes"]["10"]
    assert row["none"]["ms_per_step"] > 0 and row["default"]["ms_per_step"] > 0


def test_a_training_begun_with_new_training_that_counts_from_0_is_told(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 37j: a hand loop's second training (new_training()) that numbered its steps from 0 again
    was left unjudged by the loss rules below the step the training began at; the WARNING spoke of
    steps that must increase only."""
    import logging

    session = Session(rules=["default"], write=False)
    for step in range(60):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    session.new_training(continued=False)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session.step("train", 0, {"loss": (1.0, "losses")})
    session.close()
    assert "this training began (new_training()) at train step 60" in caplog.text
    assert "number its steps on from 60" in caplog.text
