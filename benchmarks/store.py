"""Run store benchmark: writer throughput against `dd` on the same disk, and the time to load
10^6 scalar records into pandas (200 tensors x 5 reductions x 1,000 steps, and 10^6 steps of one
every-step loss each).

    python benchmarks/store.py [--quick] [--dir DIR] [--json PATH]

Goals (../shared/evaluation.md §2): writer throughput close to the disk's own sequential write
speed; 10^6 scalar records into a pandas DataFrame in under 2 s. Prints the figures, writes JSON
(default benchmarks/results/store.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tripwire  # noqa: E402
from tripwire import RunWriter, StepRecord  # noqa: E402
from tripwire._format import shard_name  # noqa: E402


def dd_throughput(directory: Path, total_mb: int, block_mb: int, fsync: bool) -> float:
    target = directory / "dd.bin"
    cmd = ["dd", "if=/dev/zero", f"of={target}", f"bs={block_mb}M", f"count={total_mb // block_mb}"]
    if fsync:
        cmd.append("conv=fsync")
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    elapsed = time.perf_counter() - t0
    target.unlink()
    return total_mb / elapsed


def writer_throughput(directory: Path, total_mb: int, block_mb: int, fsync: bool) -> float:
    run_dir = directory / "writer-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    n_blocks = total_mb // block_mb
    tensor = np.random.default_rng(0).standard_normal(block_mb * (1 << 20) // 4).astype(np.float32)
    writer = RunWriter(run_dir, queue_size=8)
    t0 = time.perf_counter()
    for step in range(n_blocks):
        writer.write(StepRecord("train", step, step, time.time(), 0, [], [(f"w{step % 4}", "raw", tensor)]))
    writer.close()
    if fsync:
        fd = os.open(run_dir / "workers" / shard_name(0), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    elapsed = time.perf_counter() - t0
    shutil.rmtree(run_dir)
    return total_mb / elapsed


def make_scalar_run(directory: Path, steps: int, tensors: int, reductions: tuple[str, ...]) -> Path:
    run_dir = directory / "scalar-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    names = [f"layer{i}.weight" for i in range(tensors)]
    rng = np.random.default_rng(0)
    writer = RunWriter(run_dir, queue_size=64)
    for step in range(steps):
        values = rng.standard_normal((tensors, len(reductions)))
        scalars = [(n, reductions, values[i]) for i, n in enumerate(names)]
        declare = {n: ["weights"] for n in names} if step == 0 else {}
        writer.write(StepRecord("train", step, step, time.time(), 0, scalars, [], declare))
    writer.close()
    return run_dir


def make_loss_run(directory: Path, steps: int) -> Path:
    """A long run's most common shape: one loss value a step (the every-step training loss), which
    the writer stores as ``steps`` records of many steps each."""
    run_dir = directory / "loss-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    writer = RunWriter(run_dir, queue_size=64)
    values = 1.0 / np.arange(1, steps + 1)
    for step in range(steps):
        declare = {"loss": ["losses"]} if step == 0 else {}
        writer.write(StepRecord("train", step, step, time.time(), 0, [("loss", ("raw",), values[step:step + 1])], [],
                                declare))
    writer.close()
    return run_dir


def load_time(run_dir: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    df = tripwire.open_run(run_dir).dataframe()
    return time.perf_counter() - t0, len(df)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke check used by the tests)")
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to measure (default: a temp dir)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.dir is not None and not args.dir.is_dir():  # (trial 36o: a FileNotFoundError traceback)
        parser.error(f"--dir: {str(args.dir)!r} is not a directory; accepted: an existing directory on the disk "
                     f"to measure")
    repeats = args.repeats or (1 if args.quick else 3)
    total_mb, block_mb = (32, 4) if args.quick else (1024, 4)
    steps, tensors, reds = (50, 40, ("l2", "mean", "std", "min", "max")) if args.quick else (1000, 200, ("l2", "mean", "std", "min", "max"))
    base = Path(tempfile.mkdtemp(prefix="tripwire-store-", dir=args.dir))
    try:
        results: dict[str, object] = {"total_mb": total_mb, "block_mb": block_mb, "repeats": repeats}
        for fsync in (False, True):
            label = "fsync" if fsync else "page_cache"
            dd = [dd_throughput(base, total_mb, block_mb, fsync) for _ in range(repeats)]
            ours = [writer_throughput(base, total_mb, block_mb, fsync) for _ in range(repeats)]
            results[label] = {
                "dd_mb_s": statistics.median(dd), "dd_all": dd,
                "writer_mb_s": statistics.median(ours), "writer_all": ours,
                "ratio": statistics.median(ours) / statistics.median(dd),
            }
            print(f"write {total_mb} MB in {block_mb} MB tensors ({label}): tripwire writer "
                  f"{statistics.median(ours):8.1f} MB/s   dd {statistics.median(dd):8.1f} MB/s   "
                  f"ratio {statistics.median(ours) / statistics.median(dd):.2f}   (median of {repeats})")
        run_dir = make_scalar_run(base, steps, tensors, reds)
        times = []
        for _ in range(repeats):
            elapsed, rows = load_time(run_dir)
            times.append(elapsed)
        size_mb = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file()) / (1 << 20)
        results["load"] = {"records": rows, "seconds": statistics.median(times), "all": times, "run_mb": size_mb, "goal_seconds": 2.0}
        print(f"load {rows:,} scalar records ({size_mb:.1f} MB run) into pandas: {statistics.median(times):.3f} s "
              f"(goal < 2 s; median of {repeats})")
        loss_dir = make_loss_run(base, 5_000 if args.quick else 1_000_000)
        times = [load_time(loss_dir)[0] for _ in range(repeats)]
        rows = load_time(loss_dir)[1]
        size_mb = sum(p.stat().st_size for p in loss_dir.rglob("*") if p.is_file()) / (1 << 20)
        results["load_every_step_loss"] = {"records": rows, "seconds": statistics.median(times), "all": times,
                                           "run_mb": size_mb, "goal_seconds": 2.0}
        print(f"load {rows:,} every-step losses, one record a step ({size_mb:.1f} MB run) into pandas: "
              f"{statistics.median(times):.3f} s (goal < 2 s; median of {repeats})")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = args.json or Path(__file__).resolve().parent / "results" / f"store{'_quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
