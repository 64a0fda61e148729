"""On-disk format of a run (see docs/format.md). Pure encode/decode, no threads, no pickle.

A shard is a stream of records. Each record::

    prefix  : magic b"TWR1" | header_len uint32 LE | payload_len uint64 LE | header_crc uint32 LE
    header  : UTF-8 JSON, header_len bytes, crc32 = header_crc
    payload : payload_len bytes: the float64 scalar block, then each array, 8-byte aligned

A record holds one step (``"type": "step"``) or, written by the writer thread when several
scalar-only records with the same scalar layout and mode wait together, a run of steps
(``"type": "steps"``: one header and one scalar block for all of them; see docs/format.md).

A writer names each scalar layout (the list of ``(tensor, reductions)``) once per shard: the first
record of a layout holds it under ``"scalars"`` with its number under ``"layout"``, and the later
records of that layout hold the number alone (format version 3; trial 36p: the layout repeated in
every record was 63% of a shard's bytes at 673 tensors). A reader keeps the layouts of a shard as it
reads it (:func:`iter_records`), a later definition of a number replacing the one before (a writer
that appends to a shard after a crash numbers its layouts anew).

A record is visible only when its prefix, header and payload are all in the file and the header's
CRC matches: a writer killed mid-record leaves a tail that readers ignore and the next writer of
that shard truncates.
"""

from __future__ import annotations

import functools
import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ._errors import CorruptRunError

MAGIC = b"TWR1"
PREFIX = struct.Struct("<4sIQI")
FORMAT_VERSION = 3  # 2: adds "steps" records; 3: layouts named once a shard (earlier shards are read as they are)
RUN_FILE = "run.json"
WORKERS_DIR = "workers"
FINDINGS_DIR = "findings"
CONTROL_DIR = "control"


def shard_name(rank: int) -> str:
    return f"worker-{rank:05d}.twr"


def end_marker_name(rank: int) -> str:
    return f"worker-{rank:05d}.end.json"


def worker_meta_name(rank: int) -> str:
    return f"worker-{rank:05d}.json"


@dataclass
class StepRecord:
    """Everything captured by one worker at one step of one mode."""

    mode: str
    step: int
    global_step: int
    wall_time: float
    worker: int = 0
    # (tensor, reductions, values float64[len(reductions)])
    scalars: list[tuple[str, tuple[str, ...], np.ndarray]] = field(default_factory=list)
    # (tensor, kind, array) with kind in {"raw", "hist_counts", "hist_edges"}
    arrays: list[tuple[str, str, np.ndarray]] = field(default_factory=list)
    # tensor -> collections, for tensors this shard has not declared before
    declare: dict[str, list[str]] = field(default_factory=dict)


def _align(n: int) -> int:
    return (n + 7) & ~7


@functools.lru_cache(maxsize=64)
def _scalars_json(layout: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    return json.dumps([[t, list(r)] for t, r in layout], separators=(",", ":"))


def scalar_layout(record: StepRecord) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The record's ``(tensor, reductions)`` list, the key under which records are batched."""
    return tuple((t, tuple(r)) for t, r, _ in record.scalars)


#: A writer's scalar layouts by their number in its shard (see the module docstring): what
#: :func:`encode` and :func:`encode_steps` add to and read.
Layouts = dict[tuple[tuple[str, tuple[str, ...]], ...], int]


def encode(record: StepRecord, layouts: Layouts | None = None) -> list[bytes | memoryview]:
    """Return the record as a list of buffers to write in order (no copy of large arrays).
    ``layouts``: the writer's layouts so far, for this shard (None: the layout written out in full,
    as format version 2 writes it)."""
    if record.scalars:
        values = np.concatenate([np.asarray(v, dtype="<f8").ravel() for _, _, v in record.scalars])
    else:
        values = np.zeros(0, dtype="<f8")
    scalar_bytes = values.tobytes()
    buffers: list[bytes | memoryview] = [scalar_bytes]
    offset = len(scalar_bytes)
    arrays_meta = []
    for tensor, kind, arr in record.arrays:
        arr = np.ascontiguousarray(arr)
        if arr.dtype.hasobject or arr.dtype.kind not in "biufcS?":
            raise TypeError(f"tensor {tensor!r}: cannot store dtype {arr.dtype} (numeric arrays only)")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        pad = _align(offset) - offset
        if pad:
            buffers.append(b"\0" * pad)
            offset += pad
        mv = memoryview(arr).cast("B") if arr.size else memoryview(b"")
        arrays_meta.append(
            {
                "tensor": tensor,
                "kind": kind,
                "dtype": arr.dtype.str,
                "shape": list(arr.shape),
                "offset": offset,
                "nbytes": arr.nbytes,
                "crc": zlib.crc32(mv),
            }
        )
        buffers.append(mv)
        offset += arr.nbytes
    header: dict[str, Any] = {
        "type": "step",
        "mode": record.mode,
        "step": int(record.step),
        "global_step": int(record.global_step),
        "wall_time": float(record.wall_time),
        "scalar_crc": zlib.crc32(scalar_bytes),
        "arrays": arrays_meta,
    }
    if record.declare:
        header["declare"] = record.declare
    return [_framed_header(header, scalar_layout(record), offset, layouts), *buffers]


def _framed_header(header: dict[str, Any], layout: tuple[tuple[str, tuple[str, ...]], ...], payload_len: int,
                   layouts: Layouts | None = None) -> bytes:
    """The record prefix and the header JSON with the record's scalar layout appended (the list of
    (tensor, reductions) is the same at most steps: its JSON is made once); with ``layouts``, the
    layout's number, and the layout itself only where ``layouts`` did not hold it yet (noted there)."""
    text = json.dumps(header, separators=(",", ":"), allow_nan=True)
    if layouts is None or not layout:
        tail = f'"scalars":{_scalars_json(layout)}'
    else:
        number = layouts.get(layout)
        if number is None:
            number = layouts[layout] = len(layouts)
            tail = f'"layout":{number},"scalars":{_scalars_json(layout)}'
        else:
            tail = f'"layout":{number}'
    hbytes = f'{text[:-1]},{tail}}}'.encode("utf-8")
    return PREFIX.pack(MAGIC, len(hbytes), payload_len, zlib.crc32(hbytes)) + hbytes


def batchable(record: StepRecord) -> bool:
    """Whether a record may join a ``steps`` record: scalars only, nothing declared."""
    return bool(record.scalars) and not record.arrays and not record.declare


@dataclass(frozen=True)
class StepsBlock:
    """The steps of one ``steps`` record: consecutive :func:`batchable` records of one mode and one
    scalar layout, as columns (``values``: a row a step, its scalars' values in turn, as a ``step``
    record's scalar block holds them)."""

    mode: str
    steps: list[int]
    global_steps: list[int]
    wall_times: list[float]
    layout: tuple[tuple[str, tuple[str, ...]], ...]
    values: np.ndarray

    @classmethod
    def of(cls, records: list[StepRecord], values: np.ndarray | None = None) -> StepsBlock:
        """The block of ``records`` (``values``: their rows, where the caller has them)."""
        if values is None:
            values = np.stack([np.concatenate([np.asarray(v, dtype=np.float64).ravel() for _, _, v in r.scalars])
                               for r in records])
        return cls(records[0].mode, [int(r.step) for r in records], [int(r.global_step) for r in records],
                   [float(r.wall_time) for r in records], scalar_layout(records[0]), values)


def encode_steps(block: StepsBlock, layouts: Layouts | None = None) -> list[bytes | memoryview]:
    """The :class:`StepsBlock` of several :func:`batchable` records of one mode and one scalar layout
    as one ``steps`` record: the header lists each step's ``step``, ``global_step`` and
    ``wall_time``; the scalar block holds each step's values in turn (row ``i`` is step ``i``'s block
    of a ``step`` record). ``layouts``: as :func:`encode`'s."""
    scalar_bytes = np.ascontiguousarray(block.values, dtype="<f8").tobytes()
    header = {
        "type": "steps",
        "mode": block.mode,
        "steps": block.steps,
        "global_steps": block.global_steps,
        "wall_times": block.wall_times,
        "scalar_crc": zlib.crc32(scalar_bytes),
    }
    return [_framed_header(header, block.layout, len(scalar_bytes), layouts), scalar_bytes]


def record_steps(header: dict[str, Any]) -> int:
    """How many steps a record's header describes (``steps`` records: several)."""
    return len(header["steps"]) if header.get("type") == "steps" else 1


@dataclass(frozen=True)
class ArrayRef:
    """Where an array lives in a shard; read lazily with :func:`read_array`."""

    path: str
    offset: int
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    crc: int


def read_array(ref: ArrayRef) -> np.ndarray:
    with open(ref.path, "rb") as f:
        f.seek(ref.offset)
        data = f.read(ref.nbytes)
    if len(data) != ref.nbytes or zlib.crc32(data) != ref.crc:
        raise CorruptRunError(f"{ref.path}: array at byte {ref.offset} fails its checksum")
    return np.frombuffer(data, dtype=np.dtype(ref.dtype)).reshape(ref.shape)


@dataclass
class DecodedRecord:
    header: dict[str, Any]
    scalars: np.ndarray
    payload_offset: int
    end_offset: int


def _zeros_to(f: BinaryIO, pos: int, size: int) -> bool:
    """Whether bytes ``pos`` to ``size`` of ``f`` are all zero: the tail a filesystem leaves where
    a crash came after the file grew and before its data reached the disk."""
    f.seek(pos)
    left = size - pos
    while left > 0:
        chunk = f.read(min(left, 1 << 20))
        if not chunk or chunk.count(0) != len(chunk):
            return False
        left -= len(chunk)
    return True


def iter_records(f: BinaryIO, path: str, start: int, size: int,
                 layouts: dict[int, list[Any]] | None = None) -> Iterator[DecodedRecord]:
    """Yield complete records from byte ``start`` up to ``size``; stop quietly at a partial tail
    (a record cut short, or zero bytes to the end of the file where a record should start).
    Each record's header holds its ``scalars`` (a record that names its layout by number only gets
    it from ``layouts``: the layouts of the shard read so far, by number, kept up here; None: from
    this call's records alone, ``start`` 0).

    A damaged record that is *followed by* more data is corruption, not a crash tail, and raises.
    """
    if layouts is None:
        layouts = {}
    pos = start
    f.seek(pos)
    while pos + PREFIX.size <= size:
        prefix = f.read(PREFIX.size)
        magic, hlen, plen, hcrc = PREFIX.unpack(prefix)
        end = pos + PREFIX.size + hlen + plen
        if magic != MAGIC:
            if _zeros_to(f, pos, size):  # (trial 23j: a crash or power loss left zero-filled blocks)
                return  # torn tail
            raise CorruptRunError(f"{path}: bad record marker at byte {pos}")
        if end > size:
            return  # partial tail: still being written, or the writer died here
        hbytes = f.read(hlen)
        if zlib.crc32(hbytes) != hcrc:
            if end == size:
                return  # torn tail
            raise CorruptRunError(f"{path}: record header at byte {pos} fails its checksum")
        header = json.loads(hbytes)
        number = header.get("layout")
        if number is not None and "scalars" not in header:
            if number not in layouts:
                raise CorruptRunError(f"{path}: the record at byte {pos} names scalar layout {number}, which no record "
                                      f"before it in the shard holds")
            header["scalars"] = layouts[number]
        n_scalars = sum(len(r) for _, r in header.get("scalars", ())) * record_steps(header)
        sbytes = f.read(8 * n_scalars)
        if zlib.crc32(sbytes) != header.get("scalar_crc", 0):
            if end == size:
                return
            raise CorruptRunError(f"{path}: scalar block at byte {pos} fails its checksum")
        if number is not None:
            layouts[number] = header["scalars"]
        payload_offset = pos + PREFIX.size + hlen
        yield DecodedRecord(header, np.frombuffer(sbytes, dtype="<f8"), payload_offset, end)
        pos = end
        f.seek(pos)


def decoded_steps(rec: DecodedRecord, path: str) -> Iterator[tuple[str, int, float, list[tuple[str, tuple[str, ...]]],
                                                                  np.ndarray, list[tuple[str, str, ArrayRef]],
                                                                  dict[str, list[str]] | None]]:
    """The steps a record of shard ``path`` holds, each as the arguments of
    :meth:`tripwire.History.add_step` but the worker: ``(mode, step, wall_time, scalar layout,
    values, arrays (lazy references), declared collections)``; a ``steps`` record holds several
    (one shared layout, no arrays)."""
    h = rec.header
    if h.get("type") == "steps":
        layout = [(t, tuple(r)) for t, r in h["scalars"]]
        rows = rec.scalars.reshape(len(h["steps"]), -1)
        for step, wall, row in zip(h["steps"], h["wall_times"], rows):
            yield h["mode"], step, wall, layout, row, [], None
        return
    arrays = [(a["tensor"], a["kind"], ArrayRef(path, rec.payload_offset + a["offset"], a["dtype"], tuple(a["shape"]),
                                                a["nbytes"], a["crc"]))
              for a in h.get("arrays", ())]
    yield (h["mode"], h["step"], h.get("wall_time", 0.0), [(t, tuple(r)) for t, r in h.get("scalars", ())],
           rec.scalars, arrays, h.get("declare"))


def torn_tail_text(path: str, start: int, size: int) -> str:
    """What the bytes ``start`` to ``size`` of shard ``path`` are, where :func:`valid_prefix` ends
    before the file does (a torn tail: a record cut short, its writer killed while writing it, or
    blocks a crash left zero-filled): ``an eval step 0 record cut short`` where the record's prefix
    and header are whole (a ``steps`` record: its steps), else ``a record cut short`` (or ``zero
    bytes``); for the log line of a writer that removes it (trial 31c #6: a resume dropped the torn
    record, an eval step's, without a word)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            prefix = f.read(PREFIX.size)
            if len(prefix) == PREFIX.size:
                magic, hlen, _, hcrc = PREFIX.unpack(prefix)
                if magic != MAGIC:
                    return "zero bytes" if _zeros_to(f, start, size) else "a record cut short"
                hbytes = f.read(hlen)
                if len(hbytes) == hlen and zlib.crc32(hbytes) == hcrc:
                    header = json.loads(hbytes)
                    steps = header["steps"] if header.get("type") == "steps" else [header["step"]]
                    said = (f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]} to {steps[-1]}")
                    mode = str(header["mode"])
                    return f"{'an' if mode[:1] in 'aeiou' else 'a'} {mode} {said} record cut short"
            elif not prefix.strip(b"\0"):
                return "zero bytes"
    except (OSError, ValueError, KeyError, TypeError, IndexError):  # (what cannot be read: said as cut short)
        pass
    return "a record cut short"


def valid_length(path: str) -> int:
    """Length of the shard's prefix made of complete records (where a new writer appends)."""
    return valid_prefix(path)[0]


def valid_prefix(path: str) -> tuple[int, int]:
    """``(length, step records)`` of the shard's prefix made of complete records: where a new writer
    appends, and how many step records are there (a ``steps`` record counting as its steps, as the
    reader and the end marker count them)."""
    import os

    size = os.path.getsize(path)
    last = count = 0
    with open(path, "rb") as f:
        for rec in iter_records(f, path, 0, size):  # corruption (not a torn tail) raises: never truncate data
            last = rec.end_offset
            count += len(rec.header["steps"]) if rec.header.get("type") == "steps" else 1
    return last, count
