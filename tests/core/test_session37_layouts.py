"""Trial 36p: each record's header repeated the list of its tensors and reductions, 63% of a shard's
bytes at 673 tensors. Format version 3 names each list once a shard (``layout``: its number; the
list itself only in its first record), readers keep the lists by number as they read, and a writer
that appends to a shard (a resume) numbers its lists anew."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import CorruptRunError, RunWriter, StepRecord, open_run
from tripwire._format import PREFIX, encode, iter_records, shard_name


def _record(step: int, names: tuple[str, ...], mode: str = "train") -> StepRecord:
    return StepRecord(mode, step, step, float(step), 0,
                      [(n, ("l2", "mean"), np.array([step + i, -step - i], dtype=float)) for i, n in enumerate(names)])


def _raw_headers(shard: Path) -> list[dict]:
    """Each record's header as written (not as iter_records completes it)."""
    data, pos, out = shard.read_bytes(), 0, []
    while pos + PREFIX.size <= len(data):
        _, hlen, plen, _ = PREFIX.unpack_from(data, pos)
        out.append(json.loads(data[pos + PREFIX.size: pos + PREFIX.size + hlen]))
        pos += PREFIX.size + hlen + plen
    return out


def _check_values(run: tripwire.Run, records: list[StepRecord]) -> None:
    for r in records:
        for name, reds, vals in r.scalars:
            for red, v in zip(reds, vals):
                assert run.value(name, red, r.step, r.mode) == v, (name, red, r.step)


def test_a_layout_is_written_once_a_shard_and_read_back(tmp_path: Path) -> None:
    names = tuple(f"layer{i}.weight" for i in range(200))
    writer = RunWriter(tmp_path)
    records = []
    for step in range(20):
        records.append(_record(step, names))
        writer.write(records[-1])
        writer.flush()  # (one record a write: no run of steps joins them)
        if step % 5 == 4:
            records.append(_record(step, ("val_loss",), "eval"))
            writer.write(records[-1])
    writer.close()
    shard = tmp_path / "workers" / shard_name(0)
    headers = _raw_headers(shard)
    assert sum("scalars" in h for h in headers) == 2  # (the train list and the eval list, once each)
    assert all("layout" in h for h in headers)
    # the lists in every header (format version 2) take 2.7 times the bytes here
    full = sum(sum(len(b) for b in encode(r)) for r in records)
    assert shard.stat().st_size < full / 2
    _check_values(open_run(tmp_path), records)
    # the reader of docs/format.md reads it too
    doc = (Path(__file__).parents[2] / "docs" / "format.md").read_text()
    namespace: dict = {}
    exec(compile(doc.split("```python\n", 1)[1].split("```", 1)[0], "format.md", "exec"), namespace)  # noqa: S102
    got = [(d["mode"], d["step"], d["scalars"]) for d in namespace["read_shard"](str(shard))]
    assert got == [(r.mode, r.step, {(n, red): float(v) for n, reds, vals in r.scalars for red, v in zip(reds, vals)})
                   for r in records]


def test_a_writer_that_appends_numbers_its_layouts_anew(tmp_path: Path) -> None:
    first, second = ("a", "b"), ("c",)
    writer = RunWriter(tmp_path)
    records = [_record(s, first) for s in range(3)]
    for r in records:
        writer.write(r)
    writer.close()
    writer = RunWriter(tmp_path)  # (a second writer appends, as a resumed run: its number 0 is another list)
    more = [_record(3, second), _record(4, first), _record(5, second)]
    for r in more:
        writer.write(r)
    writer.close()
    headers = _raw_headers(tmp_path / "workers" / shard_name(0))
    assert [h.get("layout") for h in headers if "scalars" in h] == [0, 0, 1]
    run = open_run(tmp_path)
    _check_values(run, records + more)
    assert run.steps() == [0, 1, 2, 3, 4, 5]


def test_a_run_read_while_it_is_written_keeps_the_layouts_of_what_it_read(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, include_collections=["weights"])
    for step in range(3):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses"), "w": (np.full(4, float(step)), "weights")})
    session.flush()
    run = open_run(tmp_path / "run")
    assert run.value("w", "mean", 2) == 2.0
    for step in range(3, 6):  # (these records name their layout by number only)
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses"), "w": (np.full(4, float(step)), "weights")})
    session.flush()
    assert run.refresh() > 0
    assert [run.value("w", "mean", s) for s in range(6)] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    session.close()


def test_a_layout_no_record_defines_is_corruption(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    for step in range(3):
        writer.write(_record(step, ("a",)))
        writer.flush()
    writer.close()
    shard = tmp_path / "workers" / shard_name(0)
    data = shard.read_bytes()
    _, hlen, plen, _ = PREFIX.unpack_from(data, 0)
    shard.write_bytes(data[PREFIX.size + hlen + plen:])  # (the record that held the list, gone)
    with open(shard, "rb") as f, pytest.raises(CorruptRunError, match="names scalar layout 0, which no record before"):
        list(iter_records(f, str(shard), 0, shard.stat().st_size))


@pytest.mark.parametrize("version", [1, 2])
def test_a_run_of_an_earlier_format_appended_to_keeps_its_format(tmp_path: Path, version: int) -> None:
    """Trial 37d: a run written by a tripwire of format 2, resumed by this one, got records of format 3
    while its run.json said 2: a tripwire of format 2 read them as damage ("fails its checksum"). A
    writer appending to an earlier format's run writes that format's records (no layout numbers; for
    version 1 no ``steps`` records either)."""
    writer = RunWriter(tmp_path)
    first = [_record(s, ("a", "b")) for s in range(3)]
    for r in first:
        writer.write(r)
    writer.close()
    run_json = tmp_path / "run.json"
    info = json.loads(run_json.read_text())
    info["format_version"] = version
    run_json.write_text(json.dumps(info))
    shard = tmp_path / "workers" / shard_name(0)
    shard.write_bytes(b"".join(bytes(b) for r in first for b in encode(r)))  # (as that format wrote them)
    writer = RunWriter(tmp_path)  # (the resume, after an upgrade)
    more = [_record(s, ("a", "b")) for s in range(3, 40)]
    writer.write_steps(more[:10])
    for r in more[10:]:
        writer.write(r)
    writer.close()
    headers = _raw_headers(shard)
    assert all("layout" not in h and "scalars" in h for h in headers)
    if version == 1:
        assert all(h["type"] == "step" for h in headers) and len(headers) == 40
    assert json.loads(run_json.read_text())["format_version"] == version
    _check_values(open_run(tmp_path), first + more)


def test_the_kept_losses_of_save_steps_that_wait_together_are_one_record(tmp_path: Path) -> None:
    """Trial 37d: each save step's kept losses were a ``steps`` record of their own (at
    ``save_interval: 2`` about 100 bytes a step); blocks and records of one mode and layout that wait
    for the writer together now join, in order."""
    from tripwire._format import StepsBlock
    from tripwire._writer import _coalesce

    records = [_record(s, ("loss",)) for s in range(30)]
    other = _record(12, ("other",))
    items = [StepsBlock.of(records[0:5]), StepsBlock.of(records[5:7]), records[7], StepsBlock.of(records[8:12]),
             other, StepsBlock.of(records[13:30]), records[13]]
    out = _coalesce(items)
    assert [type(i).__name__ for i in out] == ["StepsBlock", "StepRecord", "StepsBlock"]
    assert out[0].steps == list(range(12)) and out[1] is other and out[2].steps == [*range(13, 30), 13]
    np.testing.assert_array_equal(out[0].values, StepsBlock.of(records[:12]).values)
    # written: every value reads back, whatever the writer's wake-ups joined
    writer = RunWriter(tmp_path)
    writer.write_steps(records[0:5])
    writer.write_steps(records[5:7])
    writer.write(records[7])
    writer.write_steps(records[8:12])
    writer.write(other)
    writer.write_steps(records[13:30])
    writer.close()
    headers = _raw_headers(tmp_path / "workers" / shard_name(0))
    assert sum(len(h.get("steps", [h.get("step")])) for h in headers) == 30 and len(headers) <= 6
    run = open_run(tmp_path)
    _check_values(run, records[:12] + records[13:])
    assert run.steps() == list(range(30))
