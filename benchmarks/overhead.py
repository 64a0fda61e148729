"""Capture overhead: step-time ratio of training with tripwire against training without it.

    python benchmarks/overhead.py --framework lightning [--quick] [--repeats 5] [--json PATH]
                                  [--device cpu|cuda] [--pairs 16]

Each framework's measurement lives in ``benchmarks/overhead_<framework>.py`` and exposes
``run(quick: bool, repeats: int) -> dict`` (Lightning and Keras also take ``device=`` and
``pairs=``); this script prints the ratios and writes JSON (default
``benchmarks/results/overhead_<framework>[_cuda].json``). Protocol: ../shared/evaluation.md §2 —
same model, data and seed in one process; the median of several repeats, with the spread.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

FRAMEWORKS = ("lightning", "keras", "xgboost", "mxnet")
#: Frameworks whose benchmark runs on a chosen torch device and takes a number of paired fits.
DEVICE_FRAMEWORKS = ("lightning", "keras")
HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--quick", action="store_true", help="a few steps only (smoke check used by the tests)")
    parser.add_argument("--repeats", type=int, default=None, help="repeats per configuration (median reported)")
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON results")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model trains (lightning and keras only; default cpu)")
    parser.add_argument("--pairs", type=int, default=None,
                        help="alternating pairs of fits for the default config's paired figure "
                             "(lightning and keras only; default 16, 2 with --quick)")
    args = parser.parse_args(argv)
    extra: dict[str, object] = {}
    if args.framework in DEVICE_FRAMEWORKS:
        extra = {"device": args.device, "pairs": args.pairs}
    elif args.device != "cpu" or args.pairs is not None:
        parser.error(f"--device and --pairs apply to {' and '.join(DEVICE_FRAMEWORKS)} only, not {args.framework}")
    if args.pairs is not None and args.pairs < 2:
        parser.error(f"--pairs: got {args.pairs}; accepted: an integer >= 2")
    sys.path.insert(0, str(HERE))
    module = importlib.import_module(f"overhead_{args.framework}")
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    result = module.run(quick=args.quick, repeats=repeats, **extra)
    result = {"framework": args.framework, "quick": args.quick, "repeats": repeats, **result}
    suffix = ("_cuda" if args.device == "cuda" else "") + ("_quick" if args.quick else "")
    out = args.json or HERE / "results" / f"overhead_{args.framework}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
