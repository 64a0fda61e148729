"""Trial 29b: an smdebug user analysing stored runs.

F1: a read with ``mode=None`` (``run.value``, ``TensorView.value``, ``reduction``, ``latest``,
``series``) found the tensor's modes again at every call, from a set of every step of every
reduction in each mode: 4 ms a call on a 5,000-step run, growing with its length. The modes are
now kept per tensor and worker until the next ``refresh()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import TensorNotFoundError
from tripwire._history import History


def _write(path: Path, steps: int = 60) -> None:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": [],
                           "collections": {"gradients": {"reductions": ["l2", "mean", "max", "min", "std"]},
                                           "losses": {}}}) as s:
        for step in range(steps):
            s.step("train", step, {"g": (np.full(3, step + 1.0, dtype=np.float32), "gradients"),
                                   "loss": (1.0 / (step + 1), "losses")})
            if step % 10 == 9:
                s.step("eval", step // 10, {"val_loss": (0.5 / (step + 1), "losses")}, summary=True)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("t29b") / "run"
    _write(path)
    return path


def _count_series(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every call of :meth:`History.series` (what finding a tensor's modes read, once per reduction
    and mode) from now on."""
    calls: list[Any] = []
    real = History.series

    def counted(self: History, *args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(History, "series", counted)
    return calls


def test_mode_none_reads_do_not_look_for_the_modes_at_every_call(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tripwire.open_run(run_dir)
    t = run.tensor("g")
    expected = {s: run.value("g", "l2", s, mode="train") for s in range(60)}
    calls = _count_series(monkeypatch)
    got = {s: t.value("l2", s) for s in range(60)}
    got_run = {s: run.value("g", "l2", s) for s in range(60)}
    latest = [run.latest("g", "l2") for _ in range(60)]
    series = [t.series("mean") for _ in range(60)]
    reductions = [t.reduction("max", 5) for _ in range(60)]
    # the same answers as with mode="train"
    assert got == expected and got_run == expected
    assert latest[0] == (59, expected[59]) and float(series[0][1][3]) == 4.0 and reductions[0] == 6.0
    # each read is one series read (its own), plus the modes of the tensor found once: not 4 modes x
    # 6 reductions more at every call (before the fix: 300 reads gave over 7,000 series calls)
    assert len(calls) <= 300 + 4 * 6 + 10, len(calls)


def test_the_modes_are_found_again_after_refresh(tmp_path: Path) -> None:
    """A tensor with eval values only is read in eval; once train values of it are written, a
    refresh reads it in train (the kept modes are not those of the run read before)."""
    path = tmp_path / "live"
    s = tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": []})
    try:
        for step in range(3):
            s.step("train", step, {"loss": (1.0, "losses")})
        s.step("eval", 0, {"val_loss": (0.25, "losses")}, summary=True)
        s.flush()
        run = tripwire.open_run(path)
        assert run.tensor("val_loss").modes() == ["eval"]
        assert run.value("val_loss", "raw", 0) == 0.25 and run.tensor("val_loss").value(0).item() == 0.25
        s.step("train", 3, {"loss": (1.0, "losses"), "val_loss": (0.75, "losses")})
        s.flush()
        assert run.tensor("val_loss").modes() == ["eval"]  # (as of the last refresh)
        assert run.refresh() >= 1
        assert run.tensor("val_loss").modes() == ["train", "eval"]
        assert run.value("val_loss", "raw", 3) == 0.75  # train now
        assert run.value("val_loss", "raw", 0) is None
        assert run.value("val_loss", "raw", 0, mode="eval") == 0.25
    finally:
        s.close()


def test_a_tensor_in_two_modes_but_train_still_needs_mode(tmp_path: Path) -> None:
    path = tmp_path / "two"
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": []}) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.step("eval", 0, {"m": (0.5, "metrics")}, summary=True)
        s.step("test", 0, {"m": (0.25, "metrics")}, summary=True)
    run = tripwire.open_run(path)
    for _ in range(2):  # (the second answer from what was kept)
        with pytest.raises(TensorNotFoundError, match=r"tensor 'm' has values in modes eval, test \(not train\): "
                                                      r"pass mode=, one of them"):
            run.value("m", "raw", 0)
    assert run.value("m", "raw", 0, mode="test") == 0.25


# ----------------------------------------------------------------------------------------- F5
# smdebug conveniences: every reduction at a step (smdebug's tensor.reduction_values(step)), a
# per-tensor pandas view, and run.steps(mode=None) saying why it needs a mode


def test_reduction_values_gives_every_reduction_at_a_step(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    t = run.tensor("g")
    got = t.reduction_values(7)
    assert list(got) == t.reductions() == ["l2", "max", "mean", "min", "std"]
    assert got == {r: t.value(r, 7) for r in t.reductions()}
    assert got["mean"] == 8.0 and got["std"] == 0.0 and got["l2"] == pytest.approx(8.0 * np.sqrt(3))
    assert run.tensor("loss").reduction_values(3) == {"raw": 0.25}
    assert run.tensor("val_loss").reduction_values(2) == {"raw": pytest.approx(0.5 / 30)}  # (its own mode, eval)
    assert t.reduction_values(7, mode="train", worker=0) == got


def test_reduction_values_at_a_step_without_one(run_dir: Path, tmp_path: Path) -> None:
    run = tripwire.open_run(run_dir)
    with pytest.raises(TensorNotFoundError, match=r"tensor 'val_loss' has no reduction value at step 9 in mode 'eval' "
                                                  r"\(worker 0\); steps with one: \[0, 1, 2, 3, 4, 5\]"):
        run.tensor("val_loss").reduction_values(9)
    with pytest.raises(tripwire.ConfigError, match=r"step"):
        run.tensor("g").reduction_values(1.5)  # type: ignore[arg-type]
    path = tmp_path / "arrays"
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": [],
                           "collections": {"weights": {"reductions": ["raw"]}, "losses": {}}}) as s:
        s.step("train", 0, {"w": (np.ones(3), "weights"), "loss": (1.0, "losses")})
    with pytest.raises(TensorNotFoundError, match=r"tensor 'w' has no scalar reductions, only arrays \(raw\): read them "
                                                  r"with tensor.value\(step\)"):
        tripwire.open_run(path).tensor("w").reduction_values(0)


def test_a_tensors_dataframe(run_dir: Path) -> None:
    pd = pytest.importorskip("pandas")
    run = tripwire.open_run(run_dir)
    t = run.tensor("g")
    df = t.dataframe()
    assert list(df.columns) == t.reductions() and df.columns.name == "reduction" and df.index.name == "step"
    assert df.index.tolist() == list(range(60)) and df.index.dtype == np.int64
    assert df.loc[7].to_dict() == t.reduction_values(7)
    # the same numbers as the whole run's long table, pivoted
    long = run.dataframe()
    wide = long[(long.tensor == "g") & (long["mode"] == "train")].pivot_table(
        index="step", columns="reduction", values="value", observed=True)
    wide = wide[t.reductions()]
    wide.columns = wide.columns.astype(str)
    pd.testing.assert_frame_equal(df, wide, check_names=False, check_dtype=False, check_column_type=False)
    ev = run.tensor("val_loss").dataframe()  # (its own mode)
    assert list(ev.columns) == ["raw"] and ev.index.tolist() == [0, 1, 2, 3, 4, 5]
    assert run.tensor("val_loss").dataframe(mode="train").empty


def test_a_tensors_dataframe_holds_the_value_written_last(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    path = tmp_path / "again"
    for value in (1.0, 2.0):  # (a second training appended to the run: steps 0-2 written twice)
        with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": []}) as s:
            for step in range(3):
                s.step("train", step, {"loss": (value * (step + 1), "losses")})
    t = tripwire.open_run(path).tensor("loss")
    df = t.dataframe()
    assert df.index.tolist() == [0, 1, 2] and df["raw"].tolist() == [2.0, 4.0, 6.0]
    assert [t.value(s).item() for s in range(3)] == [2.0, 4.0, 6.0]


def test_a_tensors_dataframe_without_pandas(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_pandas(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kwargs)

    run = tripwire.open_run(run_dir)
    with monkeypatch.context() as m:
        m.setattr(builtins, "__import__", no_pandas)
        with pytest.raises(ImportError, match="pandas") as got:
            run.tensor("g").dataframe()
        with pytest.raises(ImportError, match="pandas") as whole:
            run.dataframe()
    assert str(got.value) == str(whole.value)


def test_run_steps_without_a_mode_says_why(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    with pytest.raises(tripwire.ConfigError, match=r"^mode: got None; accepted: one of train, eval, test, predict "
                                                   r"\(default: train\)\. Each mode numbers its own steps .* "
                                                   r"run\.steps\('eval'\) gives eval's"):
        run.steps(mode=None)  # type: ignore[arg-type]
    assert run.steps() == list(range(60)) and run.steps("eval") == [0, 1, 2, 3, 4, 5]
