"""History's ingest (``add_step``/``add_steps``) holds values in Python lists and blocks until a
reader asks (``_Column``'s tail, ``_Records``' blocks): whatever the order of the calls and the reads,
every reader answers as a plain model of the records does, and one ``add_steps`` call as the
``add_step`` calls of its steps."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from tripwire._history import History, _Column, _Records

LAYOUTS: list[list[tuple[str, tuple[str, ...]]]] = [
    [("loss", ("raw",))],
    [("acc", ("raw",)), ("w", ("l2", "mean"))],
    [("w", ("raw", "l2"))],
]
MODES = ("train", "eval")
WORKERS = (0, 1)
KEYS = [(t, r) for t, r in (("loss", "raw"), ("acc", "raw"), ("w", "l2"), ("w", "mean"), ("w", "raw"))]

Block = tuple[str, int, list[int], list[float], list[tuple[str, tuple[str, ...]]], np.ndarray, list[int]]


def _blocks(seed: int) -> list[Block]:
    """Random records, as the blocks of ``add_steps`` calls: steps in order, repeated, going back and
    shuffled, of two modes and two workers, some values NaN or infinite."""
    rng = random.Random(seed)
    last: dict[tuple[str, int], int] = {}
    gstep = 0
    out: list[Block] = []
    for _ in range(rng.randint(20, 60)):
        mode, worker = rng.choice(MODES), rng.choice(WORKERS)
        cur = last.get((mode, worker), 0)
        k = rng.choice([1, 1, 2, 5, 10, 10])
        roll = rng.random()
        start = max(0, cur - rng.randint(1, 8)) if roll < 0.15 else cur if roll < 0.25 else cur + 1
        steps = list(range(start, start + k))
        if rng.random() < 0.1:
            rng.shuffle(steps)
        layout = rng.choice(LAYOUTS)
        width = sum(len(r) for _, r in layout)
        rows = np.array([[rng.choice([math.nan, math.inf]) if rng.random() < 0.1 else rng.uniform(-3, 3)
                          for _ in range(width)] for _ in steps], dtype=np.float64)
        out.append((mode, worker, steps, [1000.0 + s + rng.random() for s in steps], layout, rows,
                    list(range(gstep, gstep + k))))
        gstep += k
        last[(mode, worker)] = max(cur, *steps)
    return out


class _Model:
    """What the readers should answer, kept in plain Python."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str, str, int], list[tuple[int, float]]] = {}
        self.walls: dict[tuple[str, int], list[tuple[int, float, int]]] = {}
        self.records: list[tuple[int, int, int, list[tuple[tuple[str, str], float]]]] = []
        self.keys: list[tuple[str, str]] = []

    def add(self, block: Block) -> None:
        mode, worker, steps, walls, layout, rows, gsteps = block
        for step, wall, row, g in zip(steps, walls, rows.tolist(), gsteps):
            self.walls.setdefault((mode, worker), []).append((step, wall, g))
            keys = [(t, r) for t, reds in layout for r in reds]
            for key, v in zip(keys, row):
                if key not in self.keys:
                    self.keys.append(key)
                self.series.setdefault((*key, mode, worker), []).append((step, v))
            self.records.append((step, ("train", "eval", "test", "predict").index(mode), worker, list(zip(keys, row))))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _answers(h: History) -> list[Any]:
    """Every reader's answer, for every series, mode and worker."""
    out: list[Any] = [h.workers, h.modes(), h.scalar_keys(), h.tensor_names(), repr(h), h.scalar_columns()]
    for mode in MODES:
        for worker in (*WORKERS, None):
            out += [h.steps(mode, worker), h.wall_times(mode, worker), h.train_steps(mode, None, worker)]
            out += [h.steps_between(mode, after, upto, worker) for after, upto in ((None, 7), (-1, 500), (4, 12))]
            out.append(h.tensor_names(mode=mode, step=5, worker=worker))
            for tensor, red in KEYS:
                if not h.has_tensor(tensor):
                    continue
                try:
                    out += [h.series(tensor, red, mode, worker), h.finite_series(tensor, red, mode, worker)]
                except Exception as exc:  # (a reduction the tensor never stored: the same error)
                    out.append(str(exc))
                out += [h.latest(tensor, red, mode, worker), h.ascending(tensor, red, mode, worker)]
                out += [h.value(tensor, red, s, mode, worker) for s in (0, 3, 5, 9, 20)]
        out += [h.global_steps(mode, w) for w in WORKERS]
    rec = h._rec
    out.append(tuple(rec[name].view().copy() for name in ("step", "mode", "worker", "layout", "pos")))
    return out


def _check_model(h: History, model: _Model) -> None:
    for (tensor, red, mode, worker), pairs in model.series.items():
        steps, values = h.series(tensor, red, mode, worker)
        assert steps.tolist() == [s for s, _ in pairs]
        assert np.array_equal(values, [v for _, v in pairs], equal_nan=True)
        fsteps, fvalues = h.finite_series(tensor, red, mode, worker)
        assert fsteps.tolist() == [s for s, v in pairs if math.isfinite(v)]
        assert fvalues.tolist() == [v for _, v in pairs if math.isfinite(v)]
        assert h.ascending(tensor, red, mode, worker) == all(a <= b for (a, _), (b, _) in zip(pairs, pairs[1:]))
        latest = h.latest(tensor, red, mode, worker)
        assert latest is not None and latest[0] == pairs[-1][0] and _same(latest[1], pairs[-1][1])
        for step in {s for s, _ in pairs} | {-1, 10**6}:
            written = [v for s, v in pairs if s == step]
            assert _same(h.value(tensor, red, step, mode, worker), written[-1] if written else None)
    for (mode, worker), rows in model.walls.items():
        steps, walls = h.wall_times(mode, worker)
        assert steps.tolist() == [s for s, _, _ in rows] and walls.tolist() == [w for _, w, _ in rows]
        assert h.global_steps(mode, worker).tolist() == [g for _, _, g in rows]
        held = sorted({s for s, _, _ in rows})
        assert h.steps(mode, worker) == held
        for after, upto in ((None, held[0]), (None, -5), (-1, 10**6), (held[0], held[-1]), (3, 9)):
            want = [s for s in held if (after is None and s == upto) or (after is not None and after < s <= upto)]
            assert h.steps_between(mode, after, upto, worker) == want
    for mode in MODES:
        assert h.steps(mode) == sorted({s for (m, _), rows in model.walls.items() if m == mode for s, _, _ in rows})
    cols = h.scalar_columns()
    assert cols["keys"] == model.keys
    flat = [(step, mode, worker, model.keys.index(key), v)
            for step, mode, worker, values in model.records for key, v in values]
    assert cols["step"].tolist() == [r[0] for r in flat]
    assert cols["mode"].tolist() == [r[1] for r in flat]
    assert cols["worker"].tolist() == [r[2] for r in flat]
    assert cols["key"].tolist() == [r[3] for r in flat]
    assert np.array_equal(cols["value"], [r[4] for r in flat], equal_nan=True)
    # each record's place among its mode's and worker's records
    seen: dict[tuple[int, int], int] = {}
    places = []
    for _, mode, worker, _ in model.records:
        places.append(seen.get((mode, worker), 0))
        seen[(mode, worker)] = places[-1] + 1
    assert h._rec["pos"].view().tolist() == places


@pytest.fixture(params=["default", "small"])
def thresholds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """As they are, and small: the tail and the blocks written into the columns every few values."""
    if request.param == "small":
        monkeypatch.setattr(_Column, "_TAIL", 3)
        monkeypatch.setattr(_Records, "_BLOCKS", 2)


@pytest.mark.parametrize("seed", range(12))
def test_add_steps_and_add_step_answer_as_the_records_do(seed: int, thresholds: None) -> None:
    blocks = _blocks(seed)
    by_block, by_step, read_between = History(), History(), History()
    model = _Model()
    rng = random.Random(seed + 1000)
    for block in blocks:
        mode, worker, steps, walls, layout, rows, gsteps = block
        by_block.add_steps(mode, steps, worker, walls, layout, rows, global_steps=gsteps)
        read_between.add_steps(mode, steps, worker, walls, layout, rows, global_steps=gsteps)
        for step, wall, row, g in zip(steps, walls, rows, gsteps):
            by_step.add_step(mode, step, worker, wall, layout, row, global_step=g)
        model.add(block)
        if rng.random() < 0.3:  # (a reader between the calls writes the waiting values into the columns)
            _check_model(read_between, model)
    _check_model(by_block, model)
    _check_model(by_step, model)
    _check_model(read_between, model)
    assert _same(tuple(_answers(by_block)), tuple(_answers(by_step)))
    assert _same(tuple(_answers(read_between)), tuple(_answers(by_block)))


def test_a_column_counts_its_waiting_values_and_tracks_ascending(thresholds: None) -> None:
    col = _Column(np.int64, track=True)
    col.extend([1, 2, 2])
    col.append(5)
    assert col.n == 4 and col.ascending and col.last() == 5
    first = col.view()
    col.extend(np.array([5, 6]))
    col.append(7)
    assert col.view().tolist() == [1, 2, 2, 5, 5, 6, 7] and first.tolist() == [1, 2, 2, 5]
    assert not col.view().flags.writeable
    col.extend((3,))
    assert not col.ascending and col.n == 8
    col.extend([9, 10])  # (once not ascending, never again)
    assert not col.ascending and col.view().tolist() == [1, 2, 2, 5, 5, 6, 7, 3, 9, 10]
    floats = _Column(np.float64)
    floats.extend([])
    assert floats.n == 0 and floats.view().dtype == np.float64 and len(floats.view()) == 0
