"""Long-run benchmark: does a step cost more, or the session hold more, the longer a run is?

    python benchmarks/long_run.py [--quick] [--steps N] [--json PATH]

A hand-written loop feeds a Session with the default rules (a loss every step, three 64x32
gradients at save steps) for ``--steps`` steps, with save intervals 1 and 10. Printed per interval:

- the cost of a step (us, median of blocks of 1,000 steps) in a session ``--steps`` steps in and in
  a fresh one, their blocks interleaved so that machine noise hits both (trial 24e measured 1.33x at
  15k steps and 1.89x at 40k before the history's series became growing columns);
- the memory the session holds per step (the slope of tracemalloc's reading over the second half);
- ``tripwire watch RUN --once`` over the run written, in ms per record, for the whole run and for
  its first tenth (a replay whose cost per record grows with the run shows as a ratio above 1).

Goal: ratios near 1 (a step's cost and a record's replay do not grow with the run). Prints the
figures and writes JSON (default ``benchmarks/results/long_run.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tripwire  # noqa: E402
from tripwire._watch import Watcher  # noqa: E402

RNG = np.random.default_rng(0)
GRADIENTS = {f"gradients/l{i}.weight": RNG.normal(size=(64, 32)).astype(np.float32) for i in range(3)}


class Loop:
    """One session of the default rules, fed step by step."""

    def __init__(self, out_dir: str, interval: int) -> None:
        self.session = tripwire.Session(out_dir=out_dir, rules=["default"], save_interval=interval)
        self.session.set_planned_steps(10**8)  # (a long training: no rule's window ends in it)
        self.step = 0

    def run(self, n: int) -> float:
        """Run ``n`` steps; us per step."""
        s, t0 = self.session, time.perf_counter()
        for _ in range(n):
            step = self.step
            plan = s.begin_step("train", step)
            plan.add("loss", np.float32(1.0 / (1.0 + step * 1e-3) + 0.01 * RNG.random()), "losses")
            if plan.wants("gradients"):
                for name, g in GRADIENTS.items():
                    plan.add(name, g, "gradients")
            s.end_step()
            self.step += 1
        return (time.perf_counter() - t0) / n * 1e6


def replay_ms(run_dir: str, upto: int | None) -> float:
    """``watch --once`` over the run (or over a copy of its first ``upto`` steps), ms per record."""
    if upto is not None:
        short = tempfile.mkdtemp(prefix="tripwire-long-short-")
        loop = Loop(short, 10)
        loop.run(upto)
        loop.session.close()
        run_dir = short
    watcher = Watcher(run_dir, {"rules": ["default"]}, echo=lambda f: None)
    t0 = time.perf_counter()
    watcher.watch(once=True)
    records = len(tripwire.open_run(run_dir).steps("train"))
    return (time.perf_counter() - t0) / max(records, 1) * 1e3


def measure(interval: int, steps: int, blocks: int) -> dict[str, Any]:
    base = tempfile.mkdtemp(prefix="tripwire-long-")
    old, fresh = Loop(f"{base}/old", interval), Loop(f"{base}/fresh", interval)
    old.run(steps // 2)
    # memory held: the slope of the traced memory over the second half, read 20 times (a column's
    # buffer doubles now and then: one difference of two readings may hold a fresh doubling)
    tracemalloc.start()
    done, points = 0, []
    chunk = max(1, (steps - steps // 2) // 20)
    while done < steps - steps // 2:
        n = min(chunk, steps - steps // 2 - done)
        old.run(n)
        done += n
        points.append((done, tracemalloc.get_traced_memory()[0]))
    tracemalloc.stop()
    held_per_step = float(np.polyfit(*zip(*points), 1)[0]) if len(points) > 2 else float("nan")
    a, b = [], []
    for _ in range(blocks):
        a.append(old.run(1000))
        b.append(fresh.run(1000))
    old.session.close()
    fresh.session.close()
    out: dict[str, Any] = {
        "interval": interval, "steps": steps,
        "us_per_step_old": statistics.median(a), "us_per_step_fresh": statistics.median(b),
        "bytes_per_step": held_per_step,
    }
    out["step_ratio"] = out["us_per_step_old"] / out["us_per_step_fresh"]
    if interval == 10:
        out["watch_ms_per_record"] = replay_ms(f"{base}/old", None)
        out["watch_ms_per_record_first_tenth"] = replay_ms(f"{base}/old", max(1000, old.step // 10))
        out["watch_ratio"] = out["watch_ms_per_record"] / out["watch_ms_per_record_first_tenth"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke check used by the tests)")
    parser.add_argument("--steps", type=int, default=40_000, help="steps the old session runs (default 40000)")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "long_run.json"))
    args = parser.parse_args(argv)
    steps, blocks = (3000, 2) if args.quick else (args.steps, 6)
    results = [measure(interval, steps, blocks) for interval in (1, 10)]
    for r in results:
        line = (f"save_interval {r['interval']}: {r['us_per_step_old']:.0f} us/step after {r['steps']} steps, "
                f"{r['us_per_step_fresh']:.0f} fresh (ratio {r['step_ratio']:.2f}); session holds "
                f"{r['bytes_per_step']:.0f} bytes/step")
        if "watch_ratio" in r:
            line += (f"; watch --once {r['watch_ms_per_record']:.3f} ms/record over the run, "
                     f"{r['watch_ms_per_record_first_tenth']:.3f} over its first tenth (ratio {r['watch_ratio']:.2f})")
        print(line)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"quick": args.quick, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
