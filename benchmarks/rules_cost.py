"""Cost of the rules: training-thread time a save step adds with ``rules=["default"]``, and each
default rule alone, against the same capture with no rule, as the number of captured tensors grows.

    python benchmarks/rules_cost.py [--quick] [--json PATH]

A hand-written loop (no framework: what is timed is tripwire's own work) saves ``N`` weights and
``N`` gradients (16 x 16 each, torch tensors on the CPU, the default reductions) and the loss at
every step through :class:`tripwire.Session`, with ``save_interval=1`` so that every step is a save
step the rules judge. The figure is the median of ``time.thread_time`` around ``begin_step`` ..
``end_step`` over the steps after a warm-up, for each configuration in turn; the rules' cost is its
difference to the configuration with no rule, per save step and per weight+gradient pair. The
weights move a little each step and the loss falls, so no rule fires.

Prints a table and writes JSON (default ``benchmarks/results/rules_cost.json``). ``--quick``: one
small model and few steps (the smoke check the tests run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import tripwire  # noqa: E402
from tripwire.rules import RULE_SETS  # noqa: E402

WARM_UP = 20


def time_config(rules: list[str] | None, pairs: int, steps: int, out_dir: Path) -> float:
    """Median training-thread milliseconds of one save step of the hand loop."""
    import torch

    session = tripwire.Session(rules=rules, out_dir=out_dir, save_interval=1,
                               collections={"weights": None, "gradients": None, "losses": None})
    session.set_planned_steps(steps)
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(16, 16, generator=gen) * 0.1 for _ in range(pairs)]
    grads = [[torch.randn(16, 16, generator=gen) * 0.01 for _ in range(pairs)] for _ in range(4)]
    times = []
    for step in range(steps):
        loss = torch.tensor(2.0 * float(np.exp(-step / 100)) + 0.01 * (step % 7))
        g = grads[step % 4]
        t0 = time.thread_time()
        plan = session.begin_step("train", step)
        plan.add("loss", loss, "losses")
        if plan.wants("weights"):
            for i, w in enumerate(weights):
                plan.add(f"layer{i}.weight", w, "weights")
        if plan.wants("gradients"):
            for i, gr in enumerate(g):
                plan.add(f"gradients/layer{i}.weight", gr, "gradients")
        session.end_step()
        times.append(time.thread_time() - t0)
        for w, gr in zip(weights, g):  # (after the step, as an optimizer would)
            w.sub_(0.1 * gr)
    session.close()
    fired = [f.rule for f in session.findings]
    if fired:
        raise RuntimeError(f"a rule fired on the benchmark's healthy loop: {fired}; the figures would time its message")
    return 1e3 * statistics.median(times[WARM_UP:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small model, few steps (a smoke check)")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "results" / "rules_cost.json",
                        help="where to write the JSON results")
    args = parser.parse_args(argv)
    sizes = [10] if args.quick else [50, 150, 300]
    steps = 40 if args.quick else 300
    singles = [] if args.quick else list(RULE_SETS["default"])
    results: dict[str, object] = {"steps": steps, "warm_up": WARM_UP, "tensor": "16x16 float32, torch CPU", "sizes": {}}
    print(f"rules' training-thread time per save step ({steps} steps, every step saved; median after {WARM_UP})")
    print(f"{'pairs':>5}  {'config':<22} {'ms/step':>8} {'rules ms':>9} {'us/pair':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for pairs in sizes:
            row: dict[str, dict[str, float]] = {}
            none = time_config(None, pairs, steps, Path(tmp) / f"none{pairs}")
            row["none"] = {"ms_per_step": none}
            print(f"{pairs:>5}  {'no rule':<22} {none:8.3f}")
            for name in ["default", *singles]:
                ms = time_config([name], pairs, steps, Path(tmp) / f"{name}{pairs}")
                extra = ms - none
                row[name] = {"ms_per_step": ms, "rules_ms": extra, "us_per_pair": 1e3 * extra / pairs}
                print(f"{pairs:>5}  {name:<22} {ms:8.3f} {extra:9.3f} {1e3 * extra / pairs:8.1f}")
            results["sizes"][str(pairs)] = row  # type: ignore[index]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
