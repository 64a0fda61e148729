"""Trial 27c finding 2: docs/format.md's "reader with numpy alone" checks every checksum. It read a
flipped bit in a scalar block as a value that was written, and a shard damaged in its middle as a
shorter one, where tripwire raises CorruptRunError. The documented code block is run here on a real
run (the same records and values as ``open_run``) and on damaged copies of its shard."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import CorruptRunError, open_run
from tripwire._format import PREFIX, shard_name

DOCS = Path(__file__).parents[2] / "docs"


def _doc_reader() -> dict[str, Any]:
    """The namespace of docs/format.md's first ``python`` block (the reader), executed."""
    doc = (DOCS / "format.md").read_text()
    code = doc.split("## A reader with numpy alone\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "format.md", "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Single-step and ``steps`` records, arrays, eval records and a NaN value."""
    path = tmp_path_factory.mktemp("fmt") / "run"
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 3}, "rules": [],
                           "collections": {"weights": {"reductions": ["l2", "raw"]},
                                           "losses": {"every_step": True}}}) as s:
        for step in range(20):
            loss = float("nan") if step == 7 else 1.0 / (step + 1)
            s.step("train", step, {"w": (np.full(4, step, dtype=np.float32), "weights"), "loss": (loss, "losses")})
            if step % 5 == 4:
                s.step("eval", step // 5, {"val_loss": (0.5 / (step + 1), "losses")}, summary=True)
    return path


def _records(shard: Path) -> Iterator[tuple[int, dict[str, Any], int]]:
    """(offset, header, payload offset) of each record of ``shard``."""
    data = shard.read_bytes()
    pos = 0
    while pos < len(data):
        _, hlen, plen, _ = PREFIX.unpack_from(data, pos)
        yield pos, json.loads(data[pos + PREFIX.size: pos + PREFIX.size + hlen]), pos + PREFIX.size + hlen
        pos += PREFIX.size + hlen + plen


def _copy(run_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    dst = tmp_path / "copy"
    shutil.copytree(run_dir, dst)
    return dst, dst / "workers" / shard_name(0)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_the_doc_reader_reads_what_open_run_reads(run_dir: Path) -> None:
    records = list(_doc_reader()["read_shard"](str(run_dir / "workers" / shard_name(0))))
    run = open_run(run_dir)
    assert {(r["mode"], r["step"]) for r in records} == {("train", s) for s in range(20)} | {("eval", e) for e in range(4)}
    seen: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for r in records:
        for (tensor, red), value in r["scalars"].items():
            seen.setdefault((tensor, red, r["mode"]), []).append((r["step"], value))
        for (tensor, kind), array in r["arrays"].items():
            np.testing.assert_array_equal(array, run.array(tensor, r["step"], kind, r["mode"]))
    assert {k[:2] for k in seen} == {("loss", "raw"), ("w", "l2"), ("val_loss", "raw")}
    for (tensor, red, mode), pairs in seen.items():
        steps, values = run.series(tensor, red, mode)
        assert [s for s, _ in pairs] == steps.tolist()
        assert all(_same(v, w) for (_, v), w in zip(pairs, values.tolist())), (tensor, red, mode)
    assert math.isnan(next(r for r in records if r["step"] == 7 and r["mode"] == "train")["scalars"][("loss", "raw")])
    assert sum(1 for r in records if r["arrays"]) == len(run.array_steps("w"))


def _damage_cases(shard: Path) -> dict[str, tuple[int, str]]:
    """{what: (byte to flip, the error's text)} for damage followed by more data."""
    recs = list(_records(shard))
    mid = len(recs) // 2
    steps_rec = next((pos, h, start) for pos, h, start in recs[1:-1] if h["type"] == "steps")
    array_rec = next((pos, h, start) for pos, h, start in recs[1:-1] if h.get("arrays"))
    array = array_rec[1]["arrays"][0]
    return {
        "scalar block of a steps record": (steps_rec[2] + 3, f"scalar block at byte {steps_rec[0]} fails its checksum"),
        "scalar block of a step record": (array_rec[2] + 3, f"scalar block at byte {array_rec[0]} fails its checksum"),
        "header": (recs[mid][0] + PREFIX.size + 5, f"record header at byte {recs[mid][0]} fails its checksum"),
        "record marker": (recs[mid][0], f"bad record marker at byte {recs[mid][0]}"),
        "array": (array_rec[2] + array["offset"] + 1,
                  f"array at byte {array_rec[2] + array['offset']} fails its checksum"),
    }


@pytest.mark.parametrize("what", ["scalar block of a steps record", "scalar block of a step record", "header",
                                  "record marker", "array"])
def test_damage_followed_by_more_data_raises_as_tripwire_does(run_dir: Path, tmp_path: Path, what: str) -> None:
    # trial 27c: a flipped scalar bit came back as a value, a damaged header mid-shard as a shorter shard
    reader = _doc_reader()
    run, shard = _copy(run_dir, tmp_path)
    at, said = _damage_cases(shard)[what]
    _flip(shard, at)
    with pytest.raises(reader["CorruptShard"], match=re.escape(f"{shard}: {said}")):
        list(reader["read_shard"](str(shard)))
    with pytest.raises(CorruptRunError, match=re.escape(said)):  # the library, the same byte
        opened = open_run(run)
        for step in opened.array_steps("w"):
            opened.array("w", step)


def _last_record_damaged(shard: Path) -> None:
    pos, _, _ = list(_records(shard))[-1]
    _flip(shard, pos + PREFIX.size + 2)


def _last_scalars_damaged(shard: Path) -> None:
    _, _, start = list(_records(shard))[-1]
    _flip(shard, start + 1)


def _cut_short(shard: Path) -> None:
    data = shard.read_bytes()
    shard.write_bytes(data[:-7])


def _zeros_after(shard: Path) -> None:
    with open(shard, "ab") as f:
        f.write(b"\0" * 4096)


@pytest.mark.parametrize("damage", [_last_record_damaged, _last_scalars_damaged, _cut_short, _zeros_after])
def test_a_torn_tail_ends_the_shard_quietly_as_tripwire_reads_it(run_dir: Path, tmp_path: Path,
                                                                 damage: Callable[[Path], None]) -> None:
    reader = _doc_reader()
    _, shard = _copy(run_dir, tmp_path)
    whole = list(reader["read_shard"](str(shard)))
    last_steps = len(list(_records(shard))[-1][1].get("steps", [0]))
    damage(shard)
    records = list(reader["read_shard"](str(shard)))
    keep = len(whole) if damage is _zeros_after else len(whole) - last_steps
    assert [(r["mode"], r["step"]) for r in records] == [(r["mode"], r["step"]) for r in whole[:keep]]
    library = sorted({(m, s) for m in ("train", "eval") for s in open_run(shard.parents[1]).steps(m)})
    assert sorted({(r["mode"], r["step"]) for r in records}) == library


def test_format_md_says_what_the_reader_checks_and_where_the_finding_keys_are() -> None:
    doc = (DOCS / "format.md").read_text()
    assert "**What it checks.**" in doc
    link = re.search(r"\]\(cli\.md#([a-z-]+)\)", doc)
    assert link is not None, "docs/format.md links docs/cli.md's finding object"
    headings = [re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", (DOCS / "cli.md").read_text(), flags=re.M)]
    assert link.group(1) in headings
