"""Detection suite: fault programs and healthy controls, per-rule recall, false alarms and time to
detection (protocol: ../../../shared/evaluation.md §1; programs in ``programs.py``).

    python benchmarks/detection/run.py [--quick] [--seeds 3] [--programs NAME ...] [--json PATH]

Every program runs with every built-in rule switched on (except ``similar_across_runs`` and
``stalled_training``, which need a second run or minutes of silence; tests cover them). Fault runs
stop once their expected rules fired; healthy controls run to the end. Prints a table, writes JSON
(default ``benchmarks/results/detection[_quick].json``) and, for full runs, the section between
``<!-- detection:start -->`` and ``<!-- detection:end -->`` of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

QUICK_PROGRAMS = ("exploding_unscaled_targets", "loss_flat_lr_tiny", "healthy_fast_convergence_plateau")
#: Findings of severity ``info`` are signals, not alarms (``overtraining``: converged training).
INFO_RULES = ("overtraining",)
START, END = "<!-- detection:start -->", "<!-- detection:end -->"


def run_suite(names: list[str] | None, seeds: list[int], quick: bool) -> dict[str, Any]:
    import _harness
    import programs

    if quick:
        programs.STEPS = 400
    chosen = [p for p in programs.PROGRAMS if (names is None or p.name in names)]
    runs = []
    for p in chosen:
        for seed in seeds:
            _harness.STOP_WHEN = set(p.expected) or None
            t = time.perf_counter()
            try:
                r = p.fn(seed)
                err = None
            except Exception as exc:  # a broken program is reported, not hidden
                r, err = None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            wall = time.perf_counter() - t
            run: dict[str, Any] = {"program": p.name, "framework": p.framework, "seed": seed, "expected": list(p.expected),
                                   "healthy": p.healthy, "wall_s": round(wall, 2), "error": err}
            if r is not None:
                run.update({
                    "planned_steps": r.planned_steps, "steps_run": r.steps_run, "fault_step": r.fault_step,
                    "fired": {k: {"step": v[0], "seconds": round(v[1], 3)} for k, v in r.first.items()},
                    "rule_errors": r.errors, "fault_second": round(r.fault_second, 3),
                })
            runs.append(run)
            fired = ",".join(sorted(run.get("fired", {}))) or "-"
            print(f"  {p.name:36s} seed {seed}  {wall:5.1f}s  fired: {fired}{'  ERROR ' + err.splitlines()[0] if err else ''}", flush=True)
    return {"runs": runs, "summary": summarize(runs)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rules: dict[str, dict[str, Any]] = {}
    healthy = [r for r in runs if r["healthy"] and not r["error"]]
    faults = [r for r in runs if not r["healthy"]]
    for r in faults:
        for rule in r["expected"]:
            d = rules.setdefault(rule, {"fault_runs": 0, "detected": 0, "delays_steps": [], "delays_s": [], "fractions": []})
            d["fault_runs"] += 1
            hit = (r.get("fired") or {}).get(rule)
            if hit is None or r["error"]:
                continue
            d["detected"] += 1
            steps = max(0, hit["step"] - r["fault_step"])
            d["delays_steps"].append(steps)
            d["delays_s"].append(max(0.0, hit["seconds"] - r.get("fault_second", 0.0)))
            d["fractions"].append(steps / max(1, r["planned_steps"]))
    for r in healthy:
        for rule in (r.get("fired") or {}):
            rules.setdefault(rule, {"fault_runs": 0, "detected": 0, "delays_steps": [], "delays_s": [], "fractions": []})
            rules[rule].setdefault("false_alarm_runs", 0)
            rules[rule]["false_alarm_runs"] += 1
    table = {}
    for rule, d in sorted(rules.items()):
        fr = d["fractions"]
        table[rule] = {
            "fault_runs": d["fault_runs"],
            "recall": (d["detected"] / d["fault_runs"]) if d["fault_runs"] else None,
            "false_alarms": d.get("false_alarm_runs", 0),
            "false_alarm_rate": d.get("false_alarm_runs", 0) / len(healthy) if healthy else 0.0,
            "median_delay_steps": statistics.median(d["delays_steps"]) if d["delays_steps"] else None,
            "median_delay_s": round(statistics.median(d["delays_s"]), 3) if d["delays_s"] else None,
            "max_delay_fraction": round(max(fr), 4) if fr else None,
            "within_10pct": (sum(f <= 0.1 for f in fr) / len(fr)) if fr else None,
            "info_only": rule in INFO_RULES,
        }
    pairs = sum(d["fault_runs"] for d in rules.values())
    detected = sum(d["detected"] for d in rules.values())
    fractions = [f for d in rules.values() for f in d["fractions"]]
    alarmed = [r for r in healthy if any(k not in INFO_RULES for k in (r.get("fired") or {}))]
    return {
        "rules": table,
        "fault_runs": len(faults),
        "healthy_runs": len(healthy),
        "programs": len({r["program"] for r in runs}),
        "fault_programs": len({r["program"] for r in faults}),
        "healthy_programs": len({r["program"] for r in runs if r["healthy"]}),
        "recall": detected / pairs if pairs else None,
        "healthy_runs_with_false_alarm": len(alarmed),
        "false_alarm_rate": len(alarmed) / len(healthy) if healthy else None,
        "false_alarm_rate_incl_info": (sum(bool(r.get("fired")) for r in healthy) / len(healthy)) if healthy else None,
        "detections_within_10pct": (sum(f <= 0.1 for f in fractions) / len(fractions)) if fractions else None,
        "program_errors": [f"{r['program']} seed {r['seed']}: {r['error'].splitlines()[0]}" for r in runs if r["error"]],
        "rule_errors": sorted({e for r in runs for e in r.get("rule_errors", [])}),
        "frameworks": sorted({r["framework"] for r in runs}),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def table(summary: dict[str, Any]) -> str:
    lines = [
        "| rule | fault runs | recall | false alarms (healthy runs) | median delay (steps) | median delay (s) | detections within 10% of planned steps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rule, d in summary["rules"].items():
        name = f"{rule} (info)" if d["info_only"] else rule
        lines.append(
            f"| {name} | {d['fault_runs']} | {_pct(d['recall'])} | {d['false_alarms']} ({_pct(d['false_alarm_rate'])}) | "
            f"{'-' if d['median_delay_steps'] is None else d['median_delay_steps']} | "
            f"{'-' if d['median_delay_s'] is None else d['median_delay_s']} | {_pct(d['within_10pct'])} |"
        )
    s = summary
    lines += [
        "",
        f"Overall: {s['fault_programs']} fault programs and {s['healthy_programs']} healthy controls "
        f"({', '.join(s['frameworks'])}), {s['fault_runs']} fault runs and {s['healthy_runs']} healthy runs. "
        f"Recall {_pct(s['recall'])} (expected rule fired); healthy runs with a false alarm "
        f"{s['healthy_runs_with_false_alarm']} of {s['healthy_runs']} ({_pct(s['false_alarm_rate'])}; "
        f"{_pct(s['false_alarm_rate_incl_info'])} counting the info-level overtraining signal); detections within 10% of "
        f"the planned training {_pct(s['detections_within_10pct'])}.",
    ]
    if s["program_errors"]:
        lines.append(f"Program errors: {'; '.join(s['program_errors'])}")
    if s["rule_errors"]:
        lines.append(f"Rule errors: {'; '.join(s['rule_errors'][:5])}")
    return "\n".join(lines)


def write_docs(text: str, command: str) -> Path:
    path = ROOT / "docs" / "benchmarks.md"
    body = f"{START}\n## Detection quality\n\nCommand: `{command}` ({time.strftime('%Y-%m-%d')}).\n\n{text}\n{END}"
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if START in old and END in old:
        new = old[: old.index(START)] + body + old[old.index(END) + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    path.write_text(new, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"a smoke check: {', '.join(QUICK_PROGRAMS)}, one seed, short runs")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per program (default 3; 1 with --quick)")
    parser.add_argument("--programs", nargs="*", default=None, help="run only these programs")
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON results")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    args = parser.parse_args(argv)
    logging.getLogger("tripwire").setLevel(logging.ERROR)
    import programs

    if args.list:
        for p in programs.PROGRAMS:
            print(f"{p.name:36s} {p.framework:9s} {','.join(p.expected) or 'healthy':50s} {p.about}")
        return 0
    names = list(QUICK_PROGRAMS) if args.quick and args.programs is None else args.programs
    known = {p.name for p in programs.PROGRAMS}
    for n in names or []:
        if n not in known:
            parser.error(f"--programs: unknown program {n!r}; see --list")
    seeds = list(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))
    t = time.perf_counter()
    result = run_suite(names, seeds, args.quick)
    result.update({"quick": args.quick, "seeds": seeds, "wall_s": round(time.perf_counter() - t, 1)})
    text = table(result["summary"])
    print()
    print(text)
    out = args.json or ROOT / "benchmarks" / "results" / f"detection{'_quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    if not args.quick and not args.no_docs and args.programs is None:
        command = "python benchmarks/detection/run.py" + (f" --seeds {args.seeds}" if args.seeds is not None else "")
        print(f"wrote {write_docs(text, command)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
