from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tripwire
from tripwire import History

_record = st.tuples(
    st.sampled_from(["train", "eval"]),
    st.integers(0, 30),
    st.integers(0, 2),
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_record, max_size=25), st.integers(1, 6))
def test_series_identical_whether_grouped_incrementally_or_in_bulk(records, query_every) -> None:
    """In-process ingestion (query after each step) and bulk loading (one query at the end) agree."""
    incremental, bulk = History(), History()
    expected: dict[tuple, list[tuple[int, float]]] = {}
    for i, (mode, step, worker, tensors) in enumerate(records):
        scalars = [(t, ("l2", "mean")) for t in tensors]
        values = np.arange(2 * len(tensors), dtype=np.float64) + i
        for h in (incremental, bulk):
            h.add_step(mode, step, worker, float(i), scalars, values)
        for j, t in enumerate(tensors):
            expected.setdefault((t, "l2", mode, worker), []).append((step, values[2 * j]))
            expected.setdefault((t, "mean", mode, worker), []).append((step, values[2 * j + 1]))
        if i % query_every == 0:
            incremental.series(tensors[0], "l2", mode, worker)
    for (t, red, mode, worker), pairs in expected.items():
        for h in (incremental, bulk):
            steps, values = h.series(t, red, mode, worker)
            assert steps.tolist() == [p[0] for p in pairs]
            assert values.tolist() == [p[1] for p in pairs]
    df_rows = len(bulk.dataframe()) if records else 0
    assert df_rows == sum(2 * len(r[3]) for r in records)


def test_keep_arrays_bounds_memory() -> None:
    h = History(keep_arrays=2)
    for step in range(5):
        h.add_step("train", step, 0, 0.0, [], np.zeros(0), [("w", "raw", np.full(3, step))])
    assert h.array_steps("w") == [3, 4]
    np.testing.assert_array_equal(h.array("w", 4), np.full(3, 4))


def test_tensor_names_filters() -> None:
    h = History()
    h.add_step("train", 0, 0, 0.0, [("fc1.weight", ("l2",)), ("fc2.weight", ("l2",))], np.ones(2),
               declare={"fc1.weight": ["weights"], "fc2.weight": ["weights"]})
    assert h.tensor_names(regex="fc1") == ["fc1.weight"]
    assert h.tensor_names(collection="weights") == ["fc1.weight", "fc2.weight"]
    assert h.latest("fc2.weight", "l2") == (0, 1.0)
    assert h.value("fc2.weight", "l2", 5) is None
    # a tensor not captured (yet): None from the "maybe" readers (a rule reading val_acc before the
    # first validation), an error naming what there is from series()
    assert h.latest("val_acc", "raw", "eval") is None and h.value("val_acc", "raw", 0, "eval") is None
    with pytest.raises(tripwire.TensorNotFoundError, match="'val_acc' not in this run.*fc1.weight"):
        h.series("val_acc", "raw", "eval")


def _steps_history(steps: list[int], mode: str = "train") -> History:
    h = History()
    for i, step in enumerate(steps):
        h.add_step(mode, step, 0, float(i), [("loss", ("raw",))], np.array([float(i)]))
    return h


def test_steps_between_over_repeated_steps_is_exact() -> None:
    """A run that holds a second training's steps after the first's (same out_dir twice)."""
    h = _steps_history(list(range(30)) + list(range(30)))
    assert h.steps_between("train", 10, 20) == list(range(11, 21))
    assert h.steps_between("train", None, 15) == [15]
    assert h.steps_between("train", None, 30) == []
    assert h.steps_between("train", 29, 100) == []
    assert h.steps_between("train", -1, 2) == [0, 1, 2]
    # a resume past a crash: 0..19, then 15..24 again
    h = _steps_history(list(range(20)) + list(range(15, 25)))
    assert h.steps_between("train", 12, 17) == [13, 14, 15, 16, 17]
    assert h.steps_between("train", 18, 30) == list(range(19, 25))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=40), st.one_of(st.none(), st.integers(-2, 42)), st.integers(-2, 42),
       st.integers(0, 40))
def test_steps_between_matches_its_definition_in_any_write_order(steps, after, upto, split) -> None:
    h = _steps_history(steps[:split])
    h.steps_between("train", after, upto)  # a query between writes, as rules make them
    for i, step in enumerate(steps[split:]):
        h.add_step("train", step, 0, 0.0, [("loss", ("raw",))], np.array([float(i)]))
    if after is None:
        expected = [upto] if upto in steps else []
    else:
        expected = sorted({s for s in steps if after < s <= upto})
    assert h.steps_between("train", after, upto) == expected
    assert h.steps_between("eval", after, upto) == []


def test_value_at_a_repeated_step_is_the_one_written_last() -> None:
    h = History()
    for i, step in enumerate([5, 6, 7, 5, 6]):
        h.add_step("train", step, 0, float(i), [("loss", ("raw",))], np.array([float(10 * i)]),
                   [("w", "raw", np.full(2, float(i)))])
    steps, values = h.series("loss")
    assert steps.tolist() == [5, 6, 7, 5, 6] and values.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert h.value("loss", "raw", 5) == 30.0 and h.value("loss", "raw", 6) == 40.0 and h.value("loss", "raw", 7) == 20.0
    np.testing.assert_array_equal(h.array("w", 5), np.full(2, 3.0))  # arrays alike
    assert h.latest("loss") == (6, 40.0)  # the last written, not the largest step


def test_array_steps_kind_names() -> None:
    h = History()
    h.add_step("train", 0, 0, 0.0, [], np.zeros(0),
               [("w", "hist_counts", np.ones(3, dtype=np.int64)), ("w", "hist_edges", np.arange(4.0))])
    assert h.array_kinds("w") == ["histogram"]
    assert h.array_steps("w", "histogram") == h.array_steps("w", "hist_counts") == [0]
    assert h.array_steps("w", "raw") == []
    with pytest.raises(tripwire.ConfigError, match=r"kind: got 'histgram'; did you mean 'histogram'\?.*stored for 'w': histogram"):
        h.array_steps("w", "histgram")
    with pytest.raises(tripwire.ConfigError, match=r"regex: invalid regular expression '\['"):
        h.tensor_names(regex="[")
