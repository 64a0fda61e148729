"""Detection suite: fault programs and healthy controls, per-rule recall, false alarms and time to
detection after the fault shows (protocol: ../../../shared/evaluation.md §1; programs in
``programs.py`` (development set, with ``programs_mxnet.py``), ``programs_holdout.py`` (held-out) and
``programs_holdout2.py`` (second held-out set, written after the rules were changed with the first in view)).

    python benchmarks/detection/run.py [--set dev|holdout|holdout2|all] [--quick] [--seeds 3] [--programs NAME ...]

Every program runs with every built-in rule switched on (except ``similar_across_runs`` and
``stalled_training``, which need a second run or minutes of silence; tests cover them). Fault runs
stop once their expected rules fired (except those whose onset needs the whole run); healthy
controls run to the end. MXNet programs run in ``.venv-mxnet`` (``$TRIPWIRE_MXNET_PYTHON``
overrides) in a subprocess; without it they are reported as skipped. Prints a table per set, writes
JSON (default ``benchmarks/results/detection[_holdout][_quick].json``) and, for full runs, the
section between ``<!-- detection:start -->`` and ``<!-- detection:end -->`` of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

QUICK_PROGRAMS = ("exploding_unscaled_targets", "loss_flat_lr_tiny", "nan_lr_huge", "healthy_fast_convergence_plateau",
                  "mxnet_loss_lr_tiny")
#: Findings of severity ``info`` are signals, not alarms (``overtraining``: converged training).
INFO_RULES = ("overtraining",)
START, END = "<!-- detection:start -->", "<!-- detection:end -->"
SETS = ("dev", "holdout", "holdout2")


def mxnet_python() -> Path:
    return Path(os.environ.get("TRIPWIRE_MXNET_PYTHON", ROOT / ".venv-mxnet" / "bin" / "python"))


def _run_one(p: Any, seed: int) -> dict[str, Any]:
    import _harness

    # a fault run stops once its expected rules fired, unless its onset needs the whole history
    _harness.STOP_WHEN = (set(p.expected) or None) if p.onset not in _harness.FULL_RUN_ONSETS else None
    t = time.perf_counter()
    try:
        r = p.fn(seed)
        err = None
    except Exception as exc:  # a broken program is reported, not hidden
        r, err = None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    wall = time.perf_counter() - t
    run: dict[str, Any] = {"program": p.name, "framework": p.framework, "set": p.set, "seed": seed, "expected": list(p.expected),
                           "healthy": p.healthy, "onset_kind": None if p.healthy else p.onset, "wall_s": round(wall, 2), "error": err}
    if r is not None:
        step, sec = (None, None) if p.healthy else _harness.onset(p.onset, r)
        run.update({
            "planned_steps": r.planned_steps, "steps_run": r.steps_run,
            "fired": {k: {"step": v[0], "seconds": round(v[1], 3)} for k, v in r.first.items()},
            "rule_errors": r.errors, "onset_step": step, "onset_second": None if sec is None else round(sec, 3),
            "start_second": round(r.seconds_at(0), 3),
        })
        vals = [v for v in r.val_losses if v[1] == v[1]]
        if vals:  # the validation history, for reading false alarms of overfit-type rules
            best = min(vals, key=lambda v: v[1])
            run["val_loss"] = {"best": round(best[1], 4), "best_step": best[0], "last": round(vals[-1][1], 4), "last_step": vals[-1][0]}
    return run


def _print_run(run: dict[str, Any]) -> None:
    fired = ",".join(sorted(run.get("fired", {}))) or "-"
    err = run["error"]
    onset = "" if run["healthy"] else f"  onset {run.get('onset_step')}"
    print(f"  {run['program']:38s} seed {run['seed']}  {run['wall_s']:5.1f}s{onset}  fired: {fired}"
          f"{'  ERROR ' + err.splitlines()[0] if err else ''}", flush=True)


def run_mxnet(names: list[str], seeds: list[int], quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run MXNet programs in the MXNet environment (a subprocess); returns (runs, status)."""
    python = mxnet_python()
    if not names:
        return [], {"status": "none selected"}
    if not python.exists():
        reason = f"MXNet environment not found: {python} (create .venv-mxnet, see docs/mxnet.md, or set TRIPWIRE_MXNET_PYTHON)"
        print(f"  MXNet programs SKIPPED ({len(names)}): {reason}", flush=True)
        return [], {"status": "skipped", "reason": reason, "programs": names, "python": str(python)}
    with tempfile.TemporaryDirectory(prefix="tripwire-detect-mx-") as tmp:
        out = Path(tmp) / "runs.json"
        cmd = [str(python), str(HERE / "run.py"), "--mxnet-worker", str(out), "--seeds", str(len(seeds)), "--programs", *names]
        if quick:
            cmd.append("--quick")
        env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        for line in proc.stdout.splitlines():
            if line.startswith("  "):
                print(line, flush=True)
        if proc.returncode != 0 or not out.exists():
            reason = f"MXNet worker failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}"
            print(f"  MXNet programs FAILED: {reason}", flush=True)
            return [], {"status": "failed", "reason": reason, "programs": names, "python": str(python)}
        runs = json.loads(out.read_text())
    return runs, {"status": "ran", "programs": names, "python": str(python)}


def run_suite(names: list[str] | None, seeds: list[int], quick: bool, set_: str) -> dict[str, Any]:
    import programs

    if quick:
        programs.STEPS = 400
    chosen = [p for p in programs.PROGRAMS if (names is None and p.set == set_) or (names is not None and p.name in names)]
    runs = []
    for p in chosen:
        if p.framework == "mxnet":
            continue
        for seed in seeds:
            runs.append(_run_one(p, seed))
            _print_run(runs[-1])
    mx_runs, mx_status = run_mxnet([p.name for p in chosen if p.framework == "mxnet"], seeds, quick)
    runs += mx_runs
    return {"set": set_, "runs": runs, "mxnet": mx_status, "summary": summarize(runs)}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


#: Issue 3's bars: recall >= 90%, false alarms <= 2% of healthy runs, detection within 10% of the
#: planned training (read per rule: its median delay from the onset; and over all detections).
BARS = {"recall": 0.9, "false_alarm_rate": 0.02, "delay_fraction": 0.1}


def _timely(r: dict[str, Any], rule: str) -> bool:
    """Whether ``rule`` fired in fault run ``r`` within the bar's delay of the onset (of step 0
    where the fault never showed by its own definition)."""
    hit = (r.get("fired") or {}).get(rule)
    if hit is None or r["error"]:
        return False
    start = r["onset_step"] if r.get("onset_step") is not None else 0
    return max(0, hit["step"] - start) / max(1, r["planned_steps"]) <= BARS["delay_fraction"]


def goals(s: dict[str, Any]) -> list[str]:
    """One line per bar of issue 3, with the figure and whether it is met."""
    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    medians = {rule: d["median_delay_fraction"] for rule, d in s["rules"].items()
               if not d["info_only"] and d["median_delay_fraction"] is not None}
    slowest = max(medians, key=lambda k: medians[k]) if medians else None
    bar = BARS["delay_fraction"]
    lines = [
        f"recall >= {_pct(BARS['recall'])}: {_pct(s['recall'])} ({verdict((s['recall'] or 0) >= BARS['recall'])})",
        f"false alarms <= {_pct(BARS['false_alarm_rate'])} of healthy runs: {_pct(s['false_alarm_rate'])} "
        f"({verdict((s['false_alarm_rate'] or 0) <= BARS['false_alarm_rate'])})",
    ]
    if slowest is not None:
        lines.append(
            f"detection within {_pct(bar)} of the planned training after the onset: every rule's median delay "
            f"<= {_pct(bar)} ({verdict(medians[slowest] <= bar)}; the slowest, {slowest}: {100 * medians[slowest]:.1f}%); "
            f"{_pct(s['detections_within_10pct'])} of all detections; recall counting a later detection as a miss "
            f"{_pct(s.get('timely_recall'))} ({verdict((s.get('timely_recall') or 0) >= BARS['recall'])} against the "
            f"recall bar)")
    return lines


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per rule: recall, false alarms, and delays of its detections from the onset (the step where
    the fault shows) and from step 0, in steps, seconds and fractions of the planned training."""
    rules: dict[str, dict[str, Any]] = {}
    healthy = [r for r in runs if r["healthy"] and not r["error"]]
    faults = [r for r in runs if not r["healthy"]]

    def entry(rule: str) -> dict[str, Any]:
        keys = ("onset_steps", "onset_s", "onset_frac", "zero_steps", "zero_s", "zero_frac")
        return rules.setdefault(rule, {"fault_runs": 0, "detected": 0, "before_onset": 0, "no_onset": 0, **{k: [] for k in keys}})

    for r in faults:
        for rule in r["expected"]:
            d = entry(rule)
            d["fault_runs"] += 1
            hit = (r.get("fired") or {}).get(rule)
            if hit is None or r["error"]:
                continue
            d["detected"] += 1
            planned = max(1, r["planned_steps"])
            zero_s = max(0.0, hit["seconds"] - r.get("start_second", 0.0))
            d["zero_steps"].append(hit["step"])
            d["zero_s"].append(zero_s)
            d["zero_frac"].append(hit["step"] / planned)
            if r.get("onset_step") is None:  # the fault never showed by its own definition
                d["no_onset"] += 1
                continue
            if hit["step"] < r["onset_step"]:
                d["before_onset"] += 1  # fired before the fault showed: counted as delay 0
            steps = max(0, hit["step"] - r["onset_step"])
            d["onset_steps"].append(steps)
            d["onset_s"].append(max(0.0, hit["seconds"] - r["onset_second"]))
            d["onset_frac"].append(steps / planned)
    for r in healthy:
        for rule in (r.get("fired") or {}):
            d = entry(rule)
            d["false_alarm_runs"] = d.get("false_alarm_runs", 0) + 1
    table = {}
    for rule, d in sorted(rules.items()):
        of, zf = d["onset_frac"], d["zero_frac"]
        table[rule] = {
            "fault_runs": d["fault_runs"],
            "recall": (d["detected"] / d["fault_runs"]) if d["fault_runs"] else None,
            "false_alarms": d.get("false_alarm_runs", 0),
            "false_alarm_rate": d.get("false_alarm_runs", 0) / len(healthy) if healthy else 0.0,
            "median_delay_steps": _median(d["onset_steps"]),
            "median_delay_s": None if not d["onset_s"] else round(_median(d["onset_s"]), 3),
            "median_delay_fraction": None if not of else round(_median(of), 4),
            "max_delay_fraction": round(max(of), 4) if of else None,
            "within_10pct": (sum(f <= 0.1 for f in of) / len(of)) if of else None,
            "median_steps_from_0": _median(d["zero_steps"]),
            "median_s_from_0": None if not d["zero_s"] else round(_median(d["zero_s"]), 3),
            "median_fraction_from_0": None if not zf else round(_median(zf), 4),
            "max_fraction_from_0": round(max(zf), 4) if zf else None,
            "within_10pct_from_0": (sum(f <= 0.1 for f in zf) / len(zf)) if zf else None,
            "fired_before_onset": d["before_onset"],
            "onset_not_seen": d["no_onset"],
            "info_only": rule in INFO_RULES,
        }
    pairs = sum(d["fault_runs"] for d in rules.values())
    detected = sum(d["detected"] for d in rules.values())
    timely = sum(_timely(r, rule) for r in faults for rule in r["expected"])
    onset_fr = [f for d in rules.values() for f in d["onset_frac"]]
    zero_fr = [f for d in rules.values() for f in d["zero_frac"]]
    alarmed = [r for r in healthy if any(k not in INFO_RULES for k in (r.get("fired") or {}))]
    return {
        "rules": table,
        "fault_runs": len(faults),
        "healthy_runs": len(healthy),
        "programs": len({r["program"] for r in runs}),
        "fault_programs": len({r["program"] for r in faults}),
        "healthy_programs": len({r["program"] for r in runs if r["healthy"]}),
        "recall": detected / pairs if pairs else None,
        # recall that counts a detection later than the bar (10% of the planned training after the
        # onset) as a miss
        "timely_recall": timely / pairs if pairs else None,
        "missed": sorted({f"{r['program']} ({rule})" for r in faults for rule in r["expected"]
                          if rule not in (r.get("fired") or {}) or r["error"]}),
        "healthy_runs_with_false_alarm": len(alarmed),
        # a fault run in which any alarm (not info) fired: the user was warned, maybe by another rule
        "fault_runs_flagged": (sum(any(k not in INFO_RULES for k in (r.get("fired") or {})) for r in faults if not r["error"])
                               / max(1, sum(not r["error"] for r in faults))) if faults else None,
        "false_alarms_by_program": sorted({f"{r['program']} ({','.join(k for k in r['fired'] if k not in INFO_RULES)})" for r in alarmed}),
        "false_alarm_rate": len(alarmed) / len(healthy) if healthy else None,
        "false_alarm_rate_incl_info": (sum(bool(r.get("fired")) for r in healthy) / len(healthy)) if healthy else None,
        "detections_within_10pct": (sum(f <= 0.1 for f in onset_fr) / len(onset_fr)) if onset_fr else None,
        "detections_within_10pct_from_0": (sum(f <= 0.1 for f in zero_fr) / len(zero_fr)) if zero_fr else None,
        "late_detections": sorted({f"{r['program']} ({rule})" for r in faults for rule in r["expected"]
                                   if (r.get("fired") or {}).get(rule) and r.get("onset_step") is not None and not r["error"]
                                   and not _timely(r, rule)}),
        "program_errors": [f"{r['program']} seed {r['seed']}: {r['error'].splitlines()[0]}" for r in runs if r["error"]],
        "rule_errors": sorted({e for r in runs for e in r.get("rule_errors", [])}),
        "frameworks": sorted({r["framework"] for r in runs}),
    }


ABOUT = """Protocol (../shared/evaluation.md §1): fault programs (one planted fault each, labelled before any rule
ran with the rules expected to fire) and healthy controls (labelled with none), on CPU with data from
scikit-learn; programs in `benchmarks/detection/programs.py`, `programs_mxnet.py` (development set),
`programs_holdout.py` (held-out set) and `programs_holdout2.py` (second held-out set); `run.py --list` lists them with their onset. Every built-in
rule is on in every run, with its defaults (XGBoost: `overfit`/`overtraining` given the
`train-logloss`/`validation-logloss` names), saving every 10 steps and every validation record
(`save: {interval: 10, modes: {eval: {interval: 1}}}`), the training loss at every step (the losses
collection's `every_step`, on by default: kept between save steps, written with the next one);
`similar_across_runs` and `stalled_training`
are covered by tests instead. *torch* programs are hand-written loops feeding a Session what the
Lightning callback offers; *lightning*, *keras*, *xgboost* programs use the TripwireCallbacks, *mxnet*
programs `TripwireHook` (in `.venv-mxnet`, a subprocess of the runner).

- **Recall**: runs of a fault program in which its expected rule fired (at any time).
- **False alarms**: healthy runs in which a rule fired (`overtraining` has severity `info`: it fires by
  design once training has converged, an early-stopping signal, and is listed apart).
- **Onset** (the step where the fault shows), found by the harness from each run's own records, per
  program: ONSETS_LIST
- **Delay from onset**: `first finding's train step - onset step` (steps; eval-mode findings are placed
  at the last train step begun before them) and the wall-clock seconds between the two; a finding
  before the onset counts as 0 (column *before onset*). **Delay from step 0**: the finding's step and
  its seconds after the first step began. **Fraction**: steps / planned training steps (the program's
  full length: 2000 steps for torch and MXNet, epochs x batches for Lightning/Keras, rounds for
  XGBoost). **Bar**: the delay from onset <= 10% of the planned training.
- A fault run stops once its expected rules fired, except runs whose onset needs the whole history
  (`best_val`, `first_swing`), which go to their planned end; healthy controls always do.
- Planned length: every program tells its session the planned training length (Lightning's
  `estimated_stepping_batches` and Keras's epochs x steps through their callbacks; the torch loop
  and MXNet programs call `Session.set_planned_steps`; XGBoost leaves it unknown), and
  `loss_not_decreasing` waits `max(50, floor(10%) - save interval + 1)` steps of it (200 steps when unknown).
- Structural delays: rules judged per validation round (`overfit`, `class_imbalance`, `confusion`)
  need 2-3 rounds; `overfit`'s onset is the best validation value, so a slow climb from there is
  found only once it clears the tolerance and the validation noise (XGBoost overfitting rounds, seed
  0: best 0.531 at round 4, +4% by round 9, +10% only by round 16; label noise: the best is one lucky
  dip of a validation loss that wanders by about 0.05 between evaluations).
- *Fault runs flagged by any rule*: fault runs in which some alarm (not `info`) fired, whether or not
  it was the expected rule: whether the user was warned at all."""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def table(summary: dict[str, Any]) -> str:
    lines = [
        "| rule | fault runs | recall | false alarms (healthy runs) | delay from onset: median steps / s / fraction | "
        "max fraction | within 10% | before onset | from step 0: median steps / s | within 10% from step 0 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rule, d in summary["rules"].items():
        name = f"{rule} (info)" if d["info_only"] else rule
        lines.append(
            f"| {name} | {d['fault_runs']} | {_pct(d['recall'])} | {d['false_alarms']} ({_pct(d['false_alarm_rate'])}) | "
            f"{_num(d['median_delay_steps'])} / {_num(d['median_delay_s'])} / {_pct(d['median_delay_fraction'])} | "
            f"{_pct(d['max_delay_fraction'])} | {_pct(d['within_10pct'])} | {d['fired_before_onset']} | "
            f"{_num(d['median_steps_from_0'])} / {_num(d['median_s_from_0'])} | {_pct(d['within_10pct_from_0'])} |"
        )
    s = summary
    lines += [
        "",
        f"Overall: {s['fault_programs']} fault programs and {s['healthy_programs']} healthy controls "
        f"({', '.join(s['frameworks'])}), {s['fault_runs']} fault runs and {s['healthy_runs']} healthy runs. "
        f"Recall {_pct(s['recall'])} (expected rule fired); healthy runs with a false alarm "
        f"{s['healthy_runs_with_false_alarm']} of {s['healthy_runs']} ({_pct(s['false_alarm_rate'])}; "
        f"{_pct(s['false_alarm_rate_incl_info'])} counting the info-level overtraining signal); detections within 10% of "
        f"the planned training after the onset {_pct(s['detections_within_10pct'])} "
        f"(from step 0: {_pct(s['detections_within_10pct_from_0'])}); fault runs flagged by any rule (not only the "
        f"expected one) {_pct(s.get('fault_runs_flagged'))}.",
    ]
    lines.append("Bars (issue 3): " + "; ".join(goals(s)) + ".")
    if s.get("missed"):
        lines.append(f"Missed (program (rule), in at least one seed): {'; '.join(s['missed'])}.")
    if s.get("false_alarms_by_program"):
        lines.append(f"False alarms (program (rules)): {'; '.join(s['false_alarms_by_program'])}.")
    if s.get("late_detections"):
        lines.append(f"Detections later than 10% after the onset (program (rule), in at least one seed): {'; '.join(s['late_detections'])}.")
    if s["program_errors"]:
        lines.append(f"Program errors: {'; '.join(s['program_errors'])}")
    if s["rule_errors"]:
        lines.append(f"Rule errors: {'; '.join(s['rule_errors'][:5])}")
    return "\n".join(lines)


def _mxnet_line(result: dict[str, Any]) -> str:
    mx = result.get("mxnet") or {}
    if mx.get("status") == "ran":
        return f"MXNet programs: ran in `{mx.get('python')}` ({len(mx.get('programs', []))} programs)."
    if mx.get("status") in ("skipped", "failed"):
        return f"MXNet programs: **{mx['status']}**: {mx.get('reason')}"
    return "MXNet programs: none in this set."


def json_path(set_: str, quick: bool) -> Path:
    return ROOT / "benchmarks" / "results" / f"detection{'' if set_ == 'dev' else '_' + set_}{'_quick' if quick else ''}.json"


def _command(result: dict[str, Any]) -> str:
    seeds = len(result.get("seeds", [0, 1, 2]))
    return f"python benchmarks/detection/run.py --set {result.get('set', 'dev')}" + ("" if seeds == 3 else f" --seeds {seeds}")


def write_docs() -> Path:
    """The detection section of docs/benchmarks.md, from the saved full results of both sets."""
    import _harness

    parts = []
    titles = {"dev": "Development set (the thresholds were calibrated on it)",
              "holdout": "Held-out set (written after the first calibration; the rules were revised later with it in view)",
              "holdout2": "Second held-out set (written after the calibration; the save-interval revision of "
                          "loss_not_decreasing, overfit and the class rules was made with its first results in view)"}
    for set_ in SETS:
        path = json_path(set_, False)
        if not path.exists():
            parts.append(f"### {titles[set_]}\n\nNot run yet (`python benchmarks/detection/run.py --set {set_}`).")
            continue
        result = json.loads(path.read_text())
        seeds = len(result.get("seeds", []))
        updated = "".join(f" Re-run later with `--update {path.relative_to(ROOT)} --seeds {seeds} --programs "
                          f"{' '.join(u['programs'])}` ({u['date']})." for u in result.get("updated", []))
        parts.append(f"### {titles[set_]}\n\nCommand: `{_command(result)}` ({result.get('date', '?')}, {seeds} seeds, "
                     f"{result.get('wall_s', '?')} s).{updated}\n\n{table(summarize(result['runs']))}\n\n{_mxnet_line(result)}")
    onsets = "".join(f"\n  - `{k}`: {v};" for k, v in _harness.ONSETS.items()).rstrip(";") + "."
    body = (f"{START}\n## Detection quality\n\n{ABOUT.replace('ONSETS_LIST', onsets)}\n\n" + "\n\n".join(parts) + f"\n{END}")
    path = ROOT / "docs" / "benchmarks.md"
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if START in old and END in old:
        new = old[: old.index(START)] + body + old[old.index(END) + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    path.write_text(new, encoding="utf-8")
    return path


def _worker(out: Path, names: list[str], seeds: list[int], quick: bool) -> int:
    """Run the named (MXNet) programs here and write their runs as JSON (called by run_mxnet)."""
    import programs
    import programs_mxnet

    if quick:
        programs.STEPS = programs_mxnet.STEPS = 400
    runs = []
    for p in (p for p in programs.PROGRAMS if p.name in names):
        for seed in seeds:
            runs.append(_run_one(p, seed))
            _print_run(runs[-1])
    out.write_text(json.dumps(runs))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=(*SETS, "all"), default="dev", help="which set to run (default dev)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke check: {', '.join(QUICK_PROGRAMS)}, one seed, short runs")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per program (default 3; 1 with --quick)")
    parser.add_argument("--programs", nargs="*", default=None, help="run only these programs (of any set)")
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON results (one set)")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    parser.add_argument("--from-json", type=Path, nargs="*", default=None,
                        help="re-render the tables of saved JSON results (and the docs from the saved full results)")
    parser.add_argument("--update", type=Path, default=None,
                        help="re-run --programs and replace their runs in this saved full result (e.g. after a program error)")
    parser.add_argument("--mxnet-worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.getLogger("tripwire").setLevel(logging.ERROR)
    import programs

    seeds = list(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))
    if args.mxnet_worker is not None:
        return _worker(args.mxnet_worker, args.programs or [], seeds, args.quick)
    if args.list:
        for p in programs.PROGRAMS:
            label = ",".join(p.expected) or "healthy"
            print(f"{p.set:8s} {p.name:38s} {p.framework:9s} {label:52s} {'' if p.healthy else p.onset:12s} {p.about}")
        return 0
    if args.from_json is not None:
        for path in args.from_json:
            saved = json.loads(path.read_text())
            print(f"== {path} ({saved.get('set', 'dev')})")
            print(table(summarize(saved["runs"])))
        if not args.no_docs:
            print(f"wrote {write_docs()}")
        return 0
    names = list(QUICK_PROGRAMS) if args.quick and args.programs is None else args.programs
    known = {p.name for p in programs.PROGRAMS}
    for n in names or []:
        if n not in known:
            parser.error(f"--programs: unknown program {n!r}; see --list")
    if args.update is not None:
        if not names:
            parser.error("--update: needs --programs")
        saved = json.loads(args.update.read_text())
        if len(seeds) != len(saved["seeds"]):
            parser.error(f"--update: the saved result has {len(saved['seeds'])} seeds; pass --seeds {len(saved['seeds'])}")
        fresh = run_suite(names, seeds, False, saved["set"])
        saved["runs"] = [r for r in saved["runs"] if r["program"] not in names] + fresh["runs"]
        saved["summary"] = summarize(saved["runs"])
        saved.setdefault("updated", []).append({"programs": names, "date": time.strftime("%Y-%m-%d %H:%M")})
        args.update.write_text(json.dumps(saved, indent=2))
        print(table(saved["summary"]))
        print(f"wrote {args.update}")
        if not args.no_docs:
            print(f"wrote {write_docs()}")
        return 0
    sets = list(SETS) if args.set == "all" else [args.set]
    if names is not None or args.quick:
        sets = sets[:1]
    if args.json is not None and len(sets) > 1:
        parser.error("--json: names one file; run one --set at a time")
    full = not args.quick and args.programs is None
    for set_ in sets:
        print(f"== {set_} set", flush=True)
        t = time.perf_counter()
        result = run_suite(names, seeds, args.quick, set_)
        result.update({"quick": args.quick, "seeds": seeds, "wall_s": round(time.perf_counter() - t, 1),
                       "date": time.strftime("%Y-%m-%d")})
        print()
        print(table(result["summary"]))
        print(_mxnet_line(result))
        out = args.json or json_path(set_, args.quick or not full)
        if not full and args.json is None:
            out = out.with_name(out.stem.replace("_quick", "") + "_partial.json") if not args.quick else out
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        print(f"wrote {out}", flush=True)
    if full and not args.no_docs and args.json is None:
        print(f"wrote {write_docs()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
