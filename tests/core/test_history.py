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
