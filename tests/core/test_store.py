from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import BASIC_REDUCTIONS, CorruptRunError, RunNotFoundError, RunWriter, StepRecord, TensorNotFoundError, open_run
from tripwire._format import PREFIX, iter_records, shard_name, valid_length
from tripwire._writer import _coalesce
from tripwire._reductions import NumpyBackend

ALL_REDUCTIONS = list(BASIC_REDUCTIONS) + ["fraction_gt:0.5", "fraction_lt:-0.5", "fraction_abs_gt:1.0"]


def _reference(x: np.ndarray, name: str) -> float:
    x = x.astype(np.float64)
    finite = np.isfinite(x)
    table = {
        "min": lambda: x.min(), "max": lambda: x.max(), "mean": lambda: x.mean(), "std": lambda: x.std(),
        "variance": lambda: x.var(), "sum": lambda: x.sum(), "l1": lambda: np.abs(x).sum(),
        "l2": lambda: np.linalg.norm(x.ravel()), "abs_min": lambda: np.abs(x).min(), "abs_max": lambda: np.abs(x).max(),
        "abs_mean": lambda: np.abs(x).mean(), "abs_std": lambda: np.abs(x).std(), "abs_variance": lambda: np.abs(x).var(),
        "abs_sum": lambda: np.abs(x).sum(), "abs_l1": lambda: np.abs(x).sum(),
        "abs_l2": lambda: np.linalg.norm(np.abs(x).ravel()), "zero_fraction": lambda: np.mean(x == 0), "positive_fraction": lambda: np.mean(x > 0),
        "nonfinite_count": lambda: np.sum(~finite), "numel": lambda: x.size,
        "fraction_gt:0.5": lambda: np.mean(x > 0.5), "fraction_lt:-0.5": lambda: np.mean(x < -0.5),
        "fraction_abs_gt:1.0": lambda: np.mean(np.abs(x) > 1.0),
    }
    return float(table[name]())


def test_round_trip_raw_tensors_and_every_reduction(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tensors = {
        "w_f32": rng.standard_normal((7, 5)).astype(np.float32),
        "w_f64": rng.standard_normal(33),
        "w_f16": rng.standard_normal((4, 4)).astype(np.float16),
        "ints": rng.integers(-3, 3, size=(2, 3, 4)).astype(np.int64),
        "with_zeros": np.where(rng.random(50) > 0.5, 0.0, rng.standard_normal(50)).astype(np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    config = {
        "out_dir": str(tmp_path / "run"),
        "save": {"interval": 1},
        "collections": {"weights": {"reductions": ALL_REDUCTIONS + ["raw", "histogram"], "histogram_bins": 8}},
    }
    with tripwire.Session(config) as session:
        for step in range(3):
            plan = session.begin_step("train", step)
            for name, t in tensors.items():
                assert plan.add(name, t * (step + 1), "weights")
            session.end_step()
    run = open_run(tmp_path / "run")
    assert run.is_complete and run.status == "complete"
    assert run.steps("train") == [0, 1, 2]
    assert set(run.tensor_names(collection="weights")) == set(tensors)
    for step in range(3):
        for name, t in tensors.items():
            x = t * (step + 1)
            got = run.tensor(name).value(step)
            assert got.dtype == x.dtype and got.shape == x.shape
            np.testing.assert_array_equal(got, x)
            if x.size == 0:
                assert run.tensor(name).reduction("numel", step) == 0
                continue
            for red in ALL_REDUCTIONS:
                np.testing.assert_allclose(run.tensor(name).reduction(red, step), _reference(x, red), rtol=1e-6, atol=1e-9,
                                           err_msg=f"{name} {red}")
            counts, edges = run.tensor(name).histogram(step)
            assert counts.sum() == x.size and len(edges) == 9
            lo, hi = float(x.min()), float(x.max())
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            np.testing.assert_array_equal(counts, np.histogram(x, bins=8, range=(lo, hi))[0])


def test_nonfinite_values_survive(tmp_path: Path) -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1},
                           "collections": {"gradients": {"reductions": ["nonfinite_count", "max", "raw", "histogram"]}}}) as s:
        s.step("train", 0, {"gradients/fc": (x, "gradients")})
    run = open_run(tmp_path)
    t = run.tensor("gradients/fc")
    assert t.reduction("nonfinite_count", 0) == 3
    assert np.isnan(t.reduction("max", 0))
    np.testing.assert_array_equal(t.value(0), x)
    np.testing.assert_array_equal(t.value(0, mode="train", worker=0), x)
    # written as Run.value without the tensor: a reduction's value (it read the reduction as a mode)
    assert t.value("nonfinite_count", 0) == 3 and t.value("nonfinite_count", 0, "train", 0) == 3
    assert t.value(reduction="nonfinite_count", step=0, mode="train") == 3
    with pytest.raises(TensorNotFoundError, match="has no reduction 'l2'"):
        t.value("l2", 0)
    counts, _ = t.histogram(0)
    assert counts.sum() == 2  # finite values only


def test_scalars_dataframe_modes_and_workers(tmp_path: Path) -> None:
    for rank in range(2):
        with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1}}, rank=rank, world_size=2) as s:
            for step in range(4):
                s.step("train", step, {"loss": (float(10 * rank + step), "losses")})
            s.step("eval", 3, {"val_loss": (0.5 + rank, "losses"), "val_acc": (0.9, "metrics")})
    run = open_run(tmp_path)
    assert run.workers == [0, 1] and run.world_size == 2
    assert run.steps("eval") == [3]
    steps, values = run.series("loss", "raw", "train", worker=1)
    assert steps.tolist() == [0, 1, 2, 3] and values.tolist() == [10, 11, 12, 13]
    df = run.dataframe()
    assert list(df.columns) == ["step", "mode", "worker", "tensor", "reduction", "value", "superseded"]
    assert len(df) == 2 * (4 + 2)
    row = df[(df.tensor == "val_loss") & (df.worker == 1)]
    assert row["value"].tolist() == [1.5] and row["mode"].tolist() == ["eval"]
    assert run.tensor("val_acc").collections == ["metrics"]


def test_missing_things_are_named(tmp_path: Path) -> None:
    with pytest.raises(RunNotFoundError, match="does not exist"):
        open_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotFoundError, match="run.json is missing"):
        open_run(tmp_path / "empty")
    with tripwire.Session({"out_dir": str(tmp_path / "r"), "save": {"interval": 1}}) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    run = open_run(tmp_path / "r")
    with pytest.raises(TensorNotFoundError, match=r"tensor 'los' not in this run; did you mean 'loss'\?; available: loss"):
        run.tensor("los")
    with pytest.raises(TensorNotFoundError, match=r"has no reduction 'l2'.*available: raw"):
        run.tensor("loss").reduction("l2", 0)
    assert run.tensor_names(collection="weights") == []  # a built-in collection with no tensor (trial 21d)
    with pytest.raises(TensorNotFoundError, match=r"collection 'weight' not in this run; did you mean 'weights'\?; "
                                                  r"available: losses; accepted too: a built-in collection"):
        run.tensor_names(collection="weight")
    with pytest.raises(KeyError):
        run.tensor("x")
    with pytest.raises(ValueError, match=r"mode: got 'training'; accepted: train, eval, test, predict; did you mean 'train'\?"):
        run.series("loss", "raw", mode="training")
    with pytest.raises(ValueError, match=r"mode: got 'validation'"):
        run.tensor("loss").series("raw", mode="validation")
    # a fresh user's silent empties: a mode typo in steps(), a reduction never stored
    with pytest.raises(ValueError, match=r"mode: got 'validation'.*validation is mode 'eval'"):
        run.steps(mode="validation")
    with pytest.raises(TensorNotFoundError, match=r"tensor 'loss' has no reduction 'l1'; stored: raw"):
        run.series("loss", "l1")
    assert run.series("loss", "raw", mode="eval")[0].size == 0  # a stored reduction, no value in this mode: empty
    assert run.latest("loss", "l1") is None and run.value("loss", "l1", 0) is None  # (what rules read)


def test_a_tensor_view_reads_the_mode_its_tensor_has(tmp_path: Path) -> None:
    """``run.tensor("val_loss").series()`` read mode 'train' and came back empty."""
    with tripwire.Session({"out_dir": str(tmp_path / "r"), "save": {"interval": 1}}) as s:
        for step in range(2):
            s.step("train", step, {"loss": (1.0, "losses")})
            s.step("eval", step, {"val_loss": (2.0 + step, "losses")})
            s.step("test", step, {"both": (5.0, "losses")})
            s.step("eval", step, {"both": (6.0, "losses")})
    run = open_run(tmp_path / "r")
    assert run.tensor("val_loss").series()[1].tolist() == [2.0, 3.0] and run.tensor("val_loss").modes() == ["eval"]
    assert run.tensor("val_loss").reduction("raw", 1) == 3.0 and run.tensor("val_loss").steps() == [0, 1]
    assert run.tensor("loss").series()[1].tolist() == [1.0, 1.0]
    assert run.tensor("val_loss").series(mode="train")[0].size == 0  # asked for: as it is
    with pytest.raises(TensorNotFoundError, match=r"tensor 'both' has values in modes eval, test \(not train\): pass mode="):
        run.tensor("both").series()
    assert run.tensor("both").series(mode="test")[1].tolist() == [5.0, 5.0]
    # the run's own readers pick the mode the same way (run.series("val_loss") came back empty)
    assert run.series("val_loss")[1].tolist() == [2.0, 3.0] and run.latest("val_loss") == (1, 3.0)
    assert run.value("val_loss", "raw", 0) == 2.0 and run.series("loss")[1].tolist() == [1.0, 1.0]
    assert run.series("val_loss", mode="train")[0].size == 0
    with pytest.raises(TensorNotFoundError, match=r"^tensor 'nothing' not in this run"):
        run.latest("nothing")  # (trial 32a F1: a tensor the run does not hold raises, as run.series does)
    with pytest.raises(TensorNotFoundError, match=r"tensor 'both' has values in modes eval, test \(not train\): pass mode="):
        run.series("both")


def test_arrays_and_histograms_are_listed_and_named(tmp_path: Path) -> None:
    cfg = {"out_dir": str(tmp_path / "r"), "save": {"interval": 1},
           "collections": {"w": {"include": ["^w$"], "reductions": ["raw", "l2", "histogram"]},
                           "v": {"include": ["^v$"], "reductions": ["raw"]}}}
    with tripwire.Session(cfg) as s:
        s.step("train", 0, {"w": (np.arange(6.0), "weights"), "v": (np.ones(3), "weights")})
    run = open_run(tmp_path / "r")
    assert run.reductions("w") == ["l2"] and run.array_kinds("w") == ["raw", "histogram"]
    assert run.reductions("v") == [] and run.array_kinds("v") == ["raw"]
    with pytest.raises(TensorNotFoundError, match=r"no reduction 'raw'; stored: l2 \(arrays: raw, histogram\); .*run.array\('w', step\)"):
        run.series("w", "raw")
    with pytest.raises(TensorNotFoundError, match=r"run.histogram\('w', step\)"):
        run.series("w", "histogram")
    assert run.array("w", 0).tolist() == list(range(6))


def test_reader_follows_a_live_writer(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, rank=0, world_size=1)
    run = open_run(tmp_path)
    assert run.steps() == [] and not run.is_complete
    for step in range(5):
        writer.write(StepRecord("train", step, step, time.time(), 0, [("loss", ("raw",), np.array([float(step)]))],
                                declare={"loss": ["losses"]} if step == 0 else {}))
        writer.flush()
        assert run.refresh() == 1
        assert run.steps() == list(range(step + 1))
        assert run.latest("loss", "raw") == (step, float(step))
    writer.close()
    run.refresh()
    assert run.is_complete


def test_background_writer_with_concurrent_reader_thread(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, queue_size=2)
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        run = open_run(tmp_path)
        while not done.is_set() or run.refresh():
            run.refresh()
            seen.append(len(run.steps()))
            time.sleep(0.001)

    t = threading.Thread(target=read)
    t.start()
    big = np.arange(200_000, dtype=np.float32)
    for step in range(40):
        writer.write(StepRecord("train", step, step, time.time(), 0, [("loss", ("raw",), np.array([1.0]))],
                                [("w", "raw", big + step)]))
    writer.close()
    done.set()
    t.join()
    run = open_run(tmp_path)
    assert run.steps() == list(range(40))
    np.testing.assert_array_equal(run.array("w", 39), big + 39)
    assert seen == sorted(seen)  # never went backwards, never saw garbage


def _scalar_record(step: int, mode: str = "train", names: tuple[str, ...] = ("loss",), **kw: object) -> StepRecord:
    return StepRecord(mode, step, step, 1000.0 + step / 8, 0,
                      [(n, ("raw", "l2"), np.array([step + i / 4, -step - 0.5])) for i, n in enumerate(names)], **kw)  # type: ignore[arg-type]


def test_coalesce_groups_consecutive_scalar_records_of_one_mode_and_layout() -> None:
    a = [_scalar_record(s) for s in range(3)]
    declared = _scalar_record(3, declare={"loss": ["losses"]})
    ev = _scalar_record(4, "eval")
    other = _scalar_record(5, names=("loss", "acc"))
    arrays = _scalar_record(6, arrays=[("w", "raw", np.zeros(2))])
    b = [_scalar_record(s) for s in (7, 8)]
    out = _coalesce([*a, declared, *b[:1], ev, other, arrays, *b[1:], "finding"])
    assert out == [a, declared, b[0], ev, other, arrays, b[1], "finding"]
    assert _coalesce([declared, a[0], a[1]]) == [declared, [a[0], a[1]]]  # a declaring record starts no run
    assert _coalesce([]) == []


def test_runs_of_scalar_records_read_back_as_their_steps(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    records = [_scalar_record(0, declare={"loss": ["losses"]})]
    records += [_scalar_record(s) for s in range(1, 30)]
    records += [_scalar_record(0, "eval"), _scalar_record(30, arrays=[("w", "raw", np.arange(3.0))])]
    records += [_scalar_record(s, names=("loss", "acc")) for s in range(31, 40)]
    for r in records:
        writer.write(r)
    writer.close()
    shard = tmp_path / "workers" / shard_name(0)
    with open(shard, "rb") as f:
        headers = [r.header for r in iter_records(f, str(shard), 0, shard.stat().st_size)]
    assert sum(len(h["steps"]) if h["type"] == "steps" else 1 for h in headers) == len(records)
    assert any(h["type"] == "steps" for h in headers) and len(headers) < len(records)
    run = open_run(tmp_path)
    assert run.steps() == list(range(40)) and run.steps("eval") == [0]
    for r in records:
        for name, reds, vals in r.scalars:
            for red, v in zip(reds, vals):
                assert run.tensor(name).reduction(red, r.step, r.mode) == v
    assert run.tensor("loss").steps(reduction="l2") == list(range(40))
    np.testing.assert_array_equal(run.array("w", 30), np.arange(3.0))
    # the reader of docs/format.md reads the same steps and values
    doc = (Path(__file__).parents[2] / "docs" / "format.md").read_text()
    namespace: dict = {}
    exec(compile(doc.split("```python\n", 1)[1].split("```", 1)[0], "format.md", "exec"), namespace)  # noqa: S102
    got = [(d["mode"], d["step"], d["scalars"]) for d in namespace["read_shard"](str(shard))]
    want = [(r.mode, r.step, {(n, red): float(v) for n, reds, vals in r.scalars for red, v in zip(reds, vals)}) for r in records]
    assert got == want


def test_writer_errors_surface_on_the_training_thread(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    writer.write(StepRecord("train", 0, 0, 0.0, 0, [("x", ("raw",), np.array([1.0]))], [("bad", "raw", np.array([object()], dtype=object))]))
    with pytest.raises(RuntimeError, match="run writer failed"):
        writer.flush()
    with pytest.raises(RuntimeError, match="run writer failed"):
        writer.close()


def test_closed_writer_refuses_writes(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    writer.close()
    with pytest.raises(tripwire.StoreClosedError, match="is closed"):
        writer.write(StepRecord("train", 0, 0, 0.0))


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import tripwire
    out = sys.argv[1]
    s = tripwire.Session({"out_dir": out, "save": {"interval": 1},
                          "collections": {"weights": {"reductions": ["l2", "raw"]}, "losses": None}})
    step = 0
    while True:
        w = np.full(50_000, float(step), dtype=np.float32)
        s.step("train", step, {"w": (w, "weights"), "loss": (float(step), "losses")})
        if step == 20:
            print("ready", flush=True)
        step += 1
    """
)


def test_sigkill_mid_run_keeps_every_completed_step(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(_KILL_SCRIPT)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    run = open_run(out)
    assert not run.is_complete and run.status == "running"
    steps = run.steps()
    assert len(steps) >= 21 and steps == list(range(len(steps)))
    for step in (0, steps[len(steps) // 2], steps[-1]):
        w = run.tensor("w").value(step)
        assert w.shape == (50_000,) and np.all(w == step)
        assert run.tensor("loss").reduction("raw", step) == step
    np.testing.assert_allclose(run.series("w", "l2")[1], np.sqrt(50_000) * np.arange(len(steps)), rtol=1e-6)

    # simulate a kill in the middle of a record: append half a record, then read and resume
    shard = out / "workers" / shard_name(0)
    size = shard.stat().st_size
    with open(shard, "ab") as f:
        f.write(PREFIX.pack(b"TWR1", 100, 1000, 0) + b"{" * 50)
    run = open_run(out)
    assert run.steps() == steps  # the torn tail is invisible
    with tripwire.Session({"out_dir": str(out), "save": {"interval": 1}}) as s:
        s.step("train", len(steps), {"loss": (-1.0, "losses")})
    assert valid_length(str(shard)) == shard.stat().st_size != size  # torn bytes gone, new record in
    run = open_run(out)
    assert run.steps() == steps + [len(steps)] and run.is_complete
    assert run.latest("loss", "raw") == (len(steps), -1.0)


def test_corruption_in_the_middle_is_an_error_not_silence(tmp_path: Path) -> None:
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1}}) as s:
        for step in range(3):
            s.step("train", step, {"loss": (float(step), "losses")})
    shard = tmp_path / "workers" / shard_name(0)
    data = bytearray(shard.read_bytes())
    data[PREFIX.size + 5] ^= 0xFF  # flip a byte of the first header
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptRunError, match="fails its checksum"):
        open_run(tmp_path)


def test_a_zero_filled_tail_is_a_torn_tail_and_zeros_before_data_are_corruption(tmp_path: Path) -> None:
    # trial 23j: a crash (or power loss) that leaves zero bytes after the last record made the whole
    # run unreadable ("bad record marker"), and the next session could not open its out_dir
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1}}) as s:
        for step in range(3):
            s.step("train", step, {"loss": (float(step), "losses")})
    shard = tmp_path / "workers" / shard_name(0)
    good = shard.read_bytes()
    shard.write_bytes(good + b"\0" * 4096)
    assert open_run(tmp_path).steps() == [0, 1, 2]
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1}}) as s:  # resumes: the zeros go
        s.step("train", 3, {"loss": (3.0, "losses")})
    assert open_run(tmp_path).series("loss")[1].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert valid_length(str(shard)) == shard.stat().st_size
    shard.write_bytes(good + b"\0" * 64 + good[:PREFIX.size])  # zeros, then data: not a crash's tail
    with pytest.raises(CorruptRunError, match="bad record marker at byte"):
        open_run(tmp_path)


def test_run_metadata_and_no_pickle(tmp_path: Path) -> None:
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1}}, framework="unit-test") as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["framework"] == "unit-test" and info["world_size"] == 1
    assert info["environment"]["packages"]["numpy"] == np.__version__
    assert info["config"]["save"]["interval"] == 1
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert not path.read_bytes().startswith(b"\x80"), f"{path} looks like a pickle"


def test_numpy_backend_matches_reference() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    values = NumpyBackend().reduce([x], ALL_REDUCTIONS)[0]
    for red, v in zip(ALL_REDUCTIONS, values):
        assert v == pytest.approx(_reference(x, red), rel=1e-6, abs=1e-9), red


def test_format_doc_reader_reads_a_run(tmp_path: Path) -> None:
    """docs/format.md holds a reader written with numpy alone: it must read what we write."""
    doc = (Path(__file__).parents[2] / "docs" / "format.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["l2", "raw"]}, "losses": None}}) as s:
        for step in range(3):
            s.step("train", step, {"w": (np.full(4, step, dtype=np.float32), "weights"), "loss": (step / 2, "losses")})
    namespace: dict = {}
    exec(compile(code, "format.md", "exec"), namespace)  # noqa: S102 - our own documentation
    records = list(namespace["read_shard"](str(tmp_path / "workers" / shard_name(0))))
    assert [r["step"] for r in records] == [0, 1, 2]
    assert records[2]["scalars"][("loss", "raw")] == 1.0
    np.testing.assert_array_equal(records[2]["arrays"][("w", "raw")], np.full(4, 2, dtype=np.float32))


def test_open_run_of_none_names_the_likely_cause() -> None:
    # a ddp_spawn launcher's callback has out_dir None: pathlib's TypeError said nothing of that
    with pytest.raises(tripwire.RunNotFoundError, match=r"open_run: path=None; accepted: a run directory .*ddp_spawn"):
        open_run(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("blocks", [
    [(0, 5), (5, 9)],             # in order
    [(0, 5), (3, 7)],             # a resumed training's steps again (out of order from there)
    [(0, 1), (1, 2), (2, 6)],
])
def test_steps_records_ingested_together_equal_one_step_at_a_time(blocks) -> None:
    # the reader ingests a `steps` record (the every-step loss, a million of them in a long run) in
    # one call: the same history as one add_step per step
    from tripwire._history import History

    layout = [("loss", ("raw",)), ("lr", ("raw",))]
    one, bulk = History(), History()
    for lo, hi in blocks:
        steps = list(range(lo, hi))
        walls = [100.0 + s for s in steps]
        rows = np.column_stack([np.arange(lo, hi) * 0.5, np.full(hi - lo, 1e-3)])
        for s, w, row in zip(steps, walls, rows):
            one.add_step("train", s, 0, w, layout, row)
        bulk.add_steps("train", steps, 0, walls, layout, rows)
    for h in (one, bulk):
        h.add_step("eval", 0, 0, 200.0, [("val_loss", ("raw",))], np.array([0.7]))
    for tensor in ("loss", "lr"):
        for a, b in zip(one.series(tensor, "raw", "train"), bulk.series(tensor, "raw", "train")):
            np.testing.assert_array_equal(a, b)
    assert one.steps("train") == bulk.steps("train")
    for a, b in zip(one.wall_times("train"), bulk.wall_times("train")):
        np.testing.assert_array_equal(a, b)
    ca, cb = one.scalar_columns(), bulk.scalar_columns()
    for k in ("step", "mode", "worker", "key", "value"):
        np.testing.assert_array_equal(ca[k], cb[k])


def test_numpy_backend_reduces_nan_and_inf_without_numpy_warnings(recwarn: pytest.WarningsRecorder) -> None:
    """A diverging tensor's std is NaN: a result, not numpy's 'invalid value encountered' warning
    pointing at numpy instead of the user's tensor."""
    values = NumpyBackend().reduce([np.array([1.0, np.inf]), np.array([np.nan, -np.inf, 0.0])], ALL_REDUCTIONS)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in recwarn]
    assert np.isnan(values[0, ALL_REDUCTIONS.index("std")]) and values[0, ALL_REDUCTIONS.index("max")] == np.inf


def test_abs_l1_and_abs_l2_are_l1_and_l2_under_their_own_names(tmp_path: Path) -> None:
    """Issue 2 lists "l1, l2, their abs_ variants": asked as abs_l1/abs_l2, stored under those names."""
    x = np.array([3.0, -4.0])
    with tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["abs_l1", "abs_l2", "l2"]}}}) as s:
        s.step("train", 0, {"w": (x, "weights")})
    run = open_run(tmp_path)
    assert run.value("w", "abs_l1", 0) == 7.0 and run.value("w", "abs_l2", 0) == run.value("w", "l2", 0) == 5.0


def test_numpy_backend_reduces_python_numbers_as_the_general_path_does() -> None:
    # a Keras log's loss and metrics at every save step: the value itself, without a pass per number
    from tripwire import NumpyBackend
    from tripwire._reductions import _reduce_one

    backend = NumpyBackend()
    values = [1.5, -2.0, 3, float("nan"), float("inf"), -0.0, 2**60 + 1]
    for reductions in (["sum"], ["mean", "min", "max", "sum"]):
        got = backend.reduce(values, reductions)
        want = np.array([[_reduce_one(np.asarray(v), r) for r in reductions] for v in values])
        assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    assert backend.reduce([1.0, 2.0], ["nonfinite_count"]).tolist() == [[0.0], [0.0]]  # (the general path)
    assert backend.reduce([True, 2.0], ["sum"]).tolist() == [[1.0], [2.0]]


def test_reading_a_raw_array_as_a_scalar_says_how_to_read_it(tmp_path: Path) -> None:
    # trial 18b: value("raw", step) on a stored weight matrix said "has no reduction 'raw'; available: l2",
    # read as "the raw weights were not stored"
    with tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1,
                          collections={"weights": {"reductions": ["l2", "raw", "histogram"]}}) as s:
        s.step("train", 0, {"fc.weight": (np.ones((3, 4)), "weights")})
    t = open_run(tmp_path / "run").tensor("fc.weight")
    assert t.value(0).shape == (3, 4)
    with pytest.raises(TensorNotFoundError, match=r"tensor 'fc.weight' holds raw arrays, not a 'raw' scalar: read one "
                                                  r"with tensor.value\(step\) \(an array\); its scalar reductions: l2"):
        t.value("raw", 0)
    with pytest.raises(TensorNotFoundError, match=r"holds histograms, not a 'histogram' scalar: read one with "
                                                  r"tensor.histogram\(step\)"):
        t.value("histogram", 0)


def test_a_removed_run_directory_never_ends_the_training(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 18f: the run directory removed during training: records went to the unlinked shard, and
    # close() raised FileNotFoundError on the end marker, so xgb.train returned no booster and the code
    # after Lightning's fit never ran
    import shutil

    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"])
    for i in range(5):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.flush()
    shutil.rmtree(out)
    with caplog.at_level("ERROR", logger="tripwire"):
        for i in range(5, 10):
            s.step("train", i, {"loss": (float("nan") if i == 8 else 1.0, "losses")})
        s.close()  # (no exception)
    said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("could not write the run" in m and "the run directory was removed during training" in m for m in said)
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", 8)]  # the rules still judged it


def test_a_full_disk_keeps_what_was_written_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    # trial 18f: a full disk raised out of the training's step 41 of 192 and left the run "running"
    import errno

    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1)
    for i in range(3):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.flush()

    def full(self: RunWriter, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunWriter, "_write_all", full)
    with caplog.at_level("ERROR", logger="tripwire"):
        for i in range(3, 8):
            s.step("train", i, {"loss": (1.0, "losses")})
        s.close()
    assert sum("could not write the run" in r.getMessage() for r in caplog.records) == 1  # said once
    run = open_run(out)
    assert run.status == "complete" and run.steps() == [0, 1, 2]
    assert run.warnings == ["worker 0 could not write all of its records (OSError: [Errno 28] No space left on "
                            "device): this run holds the 3 step records it wrote before; its training went on"]


def test_a_resumed_runs_shard_cut_short_in_an_earlier_sessions_records_is_flagged(tmp_path: Path) -> None:
    # trial 18f: the end marker counted the last writing session's records only: a resumed run whose
    # shard lost 99 of its 200 steps read as complete with nothing damaged
    out = tmp_path / "run"
    for start in (0, 100):
        with tripwire.Session(out_dir=str(out), save_interval=1) as s:
            for i in range(start, start + 100):
                s.step("train", i, {"loss": (1.0, "losses"), "w": (np.ones(64), "weights")})
    assert open_run(out).end_markers[0]["records"] == 200 and open_run(out).damaged == {}
    shard = out / "workers" / shard_name(0)
    data = shard.read_bytes()
    shard.write_bytes(data[: int(len(data) * 0.6)])
    run = open_run(out)
    assert run.status == "complete" and 0 in run.damaged and run.damaged[0][0] == 200 and run.damaged[0][1] < 200


def test_a_histogram_of_a_bool_tensor_warns_nothing() -> None:
    # trial 19a: numpy's "Converting input from bool to <class 'numpy.uint8'>" reached the user's stderr
    import warnings

    from tripwire._reductions import NumpyBackend

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counts, edges = NumpyBackend().histogram(np.array([True, False, True]), 2, None)
    assert counts.tolist() == [1, 2] and edges[0] == 0 and edges[-1] == 1


def test_write_steps_queues_one_item_and_reads_back_as_written_one_by_one(tmp_path: Path) -> None:
    """``RunWriter.write_steps`` (the session's kept every-step losses of a save step) puts a run
    of scalar records in the queue as one item, each counted against ``queue_size``, and the run
    reads back as if each had been written with ``write``."""
    one_by_one, batched = tmp_path / "a", tmp_path / "b"
    first = _scalar_record(0, declare={"loss": ["losses"]})
    runs = [[_scalar_record(s) for s in range(1, 11)], [_scalar_record(11)], [],
            [_scalar_record(s) for s in range(12, 40)]]
    writer = RunWriter(one_by_one)
    for r in [first, *(r for run in runs for r in run)]:
        writer.write(r)
    writer.close()
    writer = RunWriter(batched, queue_size=4)  # (a run longer than the queue: the training thread waits for room)
    writer.write(first)
    for run in runs:
        writer.write_steps(run)
    writer.flush()
    assert writer._queued == writer._handled == 1 + sum(len(run) for run in runs)
    writer.close()
    assert writer.records_written == 40
    a, b = open_run(one_by_one), open_run(batched)
    assert a.steps() == b.steps() == list(range(40))
    for reduction in ("raw", "l2"):
        (steps_a, values_a), (steps_b, values_b) = a.series("loss", reduction), b.series("loss", reduction)
        np.testing.assert_array_equal(steps_a, steps_b)
        np.testing.assert_array_equal(values_a, values_b)
    assert a.global_steps().tolist() == b.global_steps().tolist() == list(range(40))
