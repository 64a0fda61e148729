"""Trial 31d F2: the training-set check (``_same_data``) copied both matrices whole into CSR form to
compare them: a sklearn ``fit(sample_weight=...)`` with the training data in ``eval_set`` peaked at
about 5.8 times the training matrix (835 MB more for 144 MB). The sources known (the same array, or
views of the same memory) are not read; other values are compared a block of rows at a time. The
answers are those of the old whole-matrix comparison (checked here against it)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.integrations.xgboost import _callback  # noqa: E402
from tripwire.integrations.xgboost._callback import _same_data  # noqa: E402


def _whole(d: Any, dtrain: Any) -> bool:
    """The old comparison: shape, labels, then both matrices as CSR, ``(a != b).nnz == 0``."""
    if (d.num_row(), d.num_col()) != (dtrain.num_row(), dtrain.num_col()):
        return False
    if not np.array_equal(d.get_label(), dtrain.get_label()):
        return False
    a, b = d.get_data(), dtrain.get_data()
    return bool(a.shape == b.shape and (a != b).nnz == 0)


def _peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _data(n: int = 3000, f: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan  # (missing entries)
    X[rng.random(X.shape) < 0.05] = 0.0
    return X, (X[:, 0] > 0).astype(np.float32)


def _variants(X: np.ndarray) -> dict[str, np.ndarray]:
    last, first, zero, neg = X.copy(), X.copy(), X.copy(), X.copy()
    last[-1, -1] += 1.0
    first[0, 1] += 1.0
    nan_at = np.argwhere(np.isnan(X))[0]
    zero[tuple(nan_at)] = 0.0  # missing against an explicit 0: the old comparison read them alike
    neg[X == 0.0] = -0.0
    return {"copy": X.copy(), "last": last, "first": first, "zero": zero, "negzero": neg}


@pytest.mark.parametrize("kind", ["dmatrix", "quantile"])
def test_the_answers_are_the_whole_comparisons(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_callback, "_SAME_DATA_CHUNK", 600)  # blocks of 100 rows: many blocks
    X, y = _data()
    make = (lambda a, ref=None: xgb.DMatrix(a, y)) if kind == "dmatrix" else \
        (lambda a, ref=None: xgb.QuantileDMatrix(a, y, ref=ref))
    train = make(X)
    for name, other in _variants(X).items():
        d = make(other, train)
        assert _same_data(d, train) == _whole(d, train), name
        # and from the sklearn API's sources (the arrays, its missing value): the same answers
        assert _same_data(d, train, (other, X, np.nan)) == _whole(d, train), name
    assert _same_data(make(X.copy(), train), train) is True
    assert _same_data(make(_variants(X)["last"], train), train) is False  # (the last block is read)


def test_views_of_the_same_memory_are_not_read() -> None:
    X, y = _data()

    class Unreadable:  # a matrix whose values cannot be read: only the sources can say
        def __init__(self, m: Any) -> None:
            self.m = m

        def num_row(self) -> int:
            return self.m.num_row()

        def num_col(self) -> int:
            return self.m.num_col()

        def get_label(self) -> np.ndarray:
            return self.m.get_label()

        def get_data(self) -> Any:
            raise AssertionError("values read")

        def slice(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("values read")

    a, b = Unreadable(xgb.DMatrix(X[:400], y[:400])), Unreadable(xgb.DMatrix(X[:400], y[:400]))
    assert _same_data(a, b, (X[:400], X[:400], np.nan)) is True  # (two view objects, one memory)
    assert _same_data(a, b, (X, X, np.nan)) is True
    assert _same_data(a, b) is False  # (nothing else can say: not the same, as before)


def test_dmatrix_blocks_hold_little_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_callback, "_SAME_DATA_CHUNK", 1 << 16)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100_000, 20)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    a, b = xgb.DMatrix(X, y), xgb.DMatrix(X.copy(), y.copy())
    same, peak = _peak(lambda: _same_data(b, a))
    assert same is True
    assert peak < 0.5 * X.nbytes, peak / X.nbytes  # (whole: two CSR copies and their difference, 6.7x)


def test_quantile_matrices_hold_one_matrix_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_callback, "_SAME_DATA_CHUNK", 1 << 16)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100_000, 20)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    a = xgb.QuantileDMatrix(X, y)
    b = xgb.QuantileDMatrix(X.copy(), y.copy(), ref=a)
    same, peak = _peak(lambda: _same_data(b, a))
    assert same is True
    # one matrix's values at a time (its CSR as scipy holds it, about 3x); both at once and their
    # difference: 6.7x
    assert peak < 4.0 * X.nbytes, peak / X.nbytes


@pytest.mark.parametrize("how", ["same object", "copy"])
def test_sklearn_sample_weight_fit_does_not_copy_the_data(tmp_path: Path, how: str) -> None:
    # the trial's case: fit(sample_weight=) makes the sklearn API build a second matrix for eval_set[0]
    rng = np.random.default_rng(0)
    n = 100_000
    X = rng.normal(size=(n, 20)).astype(np.float32)
    y = ((X[:, 0] + rng.normal(size=n)) > 0).astype(np.float32)
    Xe = X if how == "same object" else X.copy()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"])
    model = xgb.XGBClassifier(n_estimators=2, max_depth=2, n_jobs=1, callbacks=[cb])
    _, peak = _peak(lambda: model.fit(X, y, sample_weight=np.ones(n), eval_set=[(Xe, y), (X[:500] * 1.01, y[:500])],
                                      verbose=False))
    assert peak < 1.5 * X.nbytes, peak / X.nbytes  # (before: 6.8x)
    run = tripwire.open_run(tmp_path / "run")
    assert set(run.tensor_names(collection="metrics")) == {"train-logloss", "validation-logloss"}
