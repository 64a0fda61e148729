"""``tripwire tune`` and ``tripwire tune-report`` subcommands.

``tripwire tune tune.yaml [--resume | --resume-if-exists] [--no-progress]`` runs the job a YAML file
describes (format in ``docs/tune.md``) with a live ``rich`` view (``--resume-if-exists``: continue the
journal's job where it holds one that started, else start it: one command for a scheduled job);
``tripwire tune-report JOURNAL [--top N] [--full-only] [--errors] [--json | --csv]``
prints a job's summary, its best trials and (``--errors``) the failed trials' tracebacks (``--json``:
one JSON object, the summary and every trial, :func:`report_data`; ``--csv``: one row per trial, the
columns of ``TuningResult.dataframe()``, :func:`write_csv`). Exit
codes: 0 done, 1 the job failed (journal locked, executor error) or ended with no objective: every
finished trial failed, or it ended on a completion criterion before any trial started
(``tune-report`` too), 2 bad input, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import yaml

from tripwire._config import load_yaml, read_config_text
from tripwire._errors import TripwireError
from tripwire._validate import did_you_mean

from ._errors import ConfigError, JournalLockedError
from ._format import format_value
from ._journal import Journal, held_by_another, is_new_journal
from ._result import TrialRecord, TuningResult, ended_before_any_trial, journal_url_problem
from ._space import Space
from ._strategy import strategy_from_dict
from ._tuner import SUMMARY_RECORD, Tuner, executor_from_spec, import_ref
from ._view import LiveView

__all__ = ["holds_started_job", "load_job_config", "register", "report_data", "write_csv"]

KEYS = ("train", "setup", "objective", "mode", "space", "strategy", "max_jobs", "max_parallel_jobs", "seed",
        "journal", "executor", "trial_timeout", "target_value", "max_no_improvement", "max_wall_time",
        "max_total_resource", "warm_start", "fail_fast")
REQUIRED = ("train", "space", "journal")
_ACCEPTED_CONFIG = "the path of a tuning job's YAML file (see docs/tune.md)"
_ACCEPTED_JOURNAL = "a tuning job's SQLite journal (the journal: path of its YAML)"


def load_job_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a tuning YAML file; returns its mapping (keys in :data:`KEYS`)."""
    if isinstance(path, str) and not path:  # (trial 33i F3: Path('') is '.', said to be "a directory")
        raise ConfigError(f"tuning config: got '' (an empty path, not read as the current directory); "
                          f"accepted: {_ACCEPTED_CONFIG}")
    p = Path(path)
    if p.is_dir():  # (trial 22k: a directory "does not exist")
        raise ConfigError(f"tuning config {str(p)!r} is a directory; accepted: {_ACCEPTED_CONFIG}")
    if not p.is_file():
        raise ConfigError(f"tuning config {str(p)!r} does not exist; accepted: {_ACCEPTED_CONFIG}")
    try:
        data = load_yaml(read_config_text(p), str(p))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{str(p)!r} is not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{str(p)!r} must hold a mapping with the keys {', '.join(KEYS)}")
    for key in sorted(set(data) - set(KEYS), key=str):
        raise ConfigError(f"{str(p)!r}: unknown key {key!r}{did_you_mean(str(key), KEYS)}; accepted: {', '.join(KEYS)}")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        # (trial 40a F3: the docs listed the optional keys only, and the message named no fix)
        raise ConfigError(f"{str(p)!r}: missing key(s) {missing}; required: train (the training entry point, "
                          f"module:function), space (the search space) and journal (the job's SQLite journal, a path "
                          f"relative to the YAML's folder); the others are optional (docs/tune.md)")
    out = dict(data)
    here = p.resolve().parent
    # a URL is refused as it is written: made "beside the YAML" it was a local path ('/dir/s3:/runs/x.db', trial 28f)
    ws = out.get("warm_start")
    for key, value in [("journal", out.get("journal")), *(("warm_start", v) for v in
                                                           (ws if isinstance(ws, list) else [ws]))]:
        problem = journal_url_problem(value, f"{str(p)!r}: {key}") if isinstance(value, str) else None
        if problem is not None:
            raise ConfigError(problem)

    def beside(value: Any) -> Any:  # a relative path is next to the YAML, wherever it is run from
        return str(here / value) if isinstance(value, str) and value and not Path(value).is_absolute() else value

    out["journal"] = beside(out.get("journal"))
    ws = out.get("warm_start")
    if ws is not None:
        out["warm_start"] = [beside(v) for v in ws] if isinstance(ws, list) else beside(ws)
    return out


#: The YAML keys a resumed job takes from its journal: ``--resume`` refuses a YAML that changes them.
JOB_KEYS = ("objective", "mode", "space", "strategy", "seed")


def _job_time(journal: str, session: float) -> str:
    """This session's seconds, and the job's in all where earlier sessions ran it (trial 23c: a
    resumed finished job said "(0.0 s)")."""
    try:
        with Journal(journal, readonly=True) as j:
            total = float(j.get_meta("wall_seconds", 0.0))
    except (TripwireError, OSError, ValueError, TypeError):  # (the time is not worth an error)
        total = session
    if total > session + 0.05:
        return f"{session:.1f} s; the job {total:.1f} s in all"
    return f"{session:.1f} s"


def check_resume_config(cfg: Mapping[str, Any], job: Mapping[str, Any], config: str, flag: str = "--resume") -> None:
    """``tripwire tune --resume``: the YAML's objective, mode, space, strategy and seed (when set)
    must be the journaled job's; raises :class:`ConfigError` naming the keys that differ, in the name
    of ``flag`` (the one given: ``--resume-if-exists`` continues a job the same way)."""
    mine: dict[str, Any] = {"objective": cfg.get("objective", "objective"), "mode": cfg.get("mode", "max"),
                            "space": Space.from_dict(cfg["space"]).to_dict(),
                            "strategy": strategy_from_dict(cfg.get("strategy", {"type": "random"})).to_dict()}
    if cfg.get("seed") is not None:  # no seed in the YAML: the job drew one, journaled
        mine["seed"] = cfg["seed"]
    journaled = dict(job)
    strategy = dict(journaled.get("strategy") or {})
    if strategy.get("type") == "grid" and "integer_grid" not in strategy:
        strategy["integer_grid"] = "all"  # as Tuner.resume reads a job journaled before the option
    journaled["strategy"] = strategy_from_dict(strategy).to_dict() if strategy else strategy
    differ = [k for k in JOB_KEYS if k in mine and mine[k] != journaled.get(k)]
    if differ:
        shown = "; ".join(_difference(k, mine[k], journaled.get(k)) for k in differ)
        raise ConfigError(f"{flag}: {config!r} differs from the job journaled in {cfg['journal']!r} in {differ} "
                          f"({shown}); a resumed job keeps its journaled {', '.join(JOB_KEYS)}: restore "
                          "those keys in the YAML, or start a new job with another journal path")


def _difference(key: str, mine: Any, journaled: Any, *, depth: int = 0) -> str:
    """Where the YAML's value of ``key`` differs from the journaled one: the nested keys that differ
    (``space.max_depth.high: 12 in the YAML, 10 in the journal``), not two whole spaces."""
    if isinstance(mine, dict) and isinstance(journaled, dict) and depth < 3:
        parts = [_difference(f"{key}.{k}", mine.get(k, "<absent>"), journaled.get(k, "<absent>"), depth=depth + 1)
                 for k in list(mine) + [k for k in journaled if k not in mine] if mine.get(k, "<absent>") != journaled.get(k, "<absent>")]
        if parts:
            return "; ".join(parts)
    return f"{key}: {mine!r} in the YAML, {journaled!r} in the journal"


def _executor(spec: Any) -> Any:
    """The YAML ``executor:`` value: ``None`` where the key is absent or null (the default: ``local``;
    with ``--resume``, the journaled executor), else the executor :func:`executor_from_spec` builds
    (``Tuner(executor=...)`` takes the same forms through the same function): ``executor: local``
    too, so that ``--resume`` runs (and journals) the YAML's executor, as the docs say (trial 28b)."""
    if spec is None:
        return None
    return executor_from_spec(spec)


def build_tuner(cfg: Mapping[str, Any], resume: bool, config: str = "the YAML", flag: str = "--resume") -> Tuner:
    """The :class:`Tuner` a loaded YAML describes; ``resume``: the one that continues its journal's
    job (refused when the YAML changes the job's objective, mode, space, strategy or seed, in the
    name of ``flag``, the one given)."""
    limits = {k: cfg[k] for k in ("max_jobs", "max_parallel_jobs", "trial_timeout", "target_value",
                                  "max_no_improvement", "max_wall_time", "max_total_resource", "fail_fast") if k in cfg}
    train = import_ref(cfg["train"], "train")
    setup = import_ref(cfg["setup"], "setup") if cfg.get("setup") else None
    executor = _executor(cfg.get("executor"))
    if resume:
        if not Path(cfg["journal"]).exists():
            raise ConfigError(f"--resume: journal {cfg['journal']!r} does not exist: no job to continue; start it "
                              f"with tripwire tune {config}, or run tripwire tune --resume-if-exists {config}, which "
                              "continues the job where its journal holds one and starts it otherwise")
        with Journal(cfg["journal"], readonly=True) as j:
            job = j.job
        if job is not None:
            check_resume_config(cfg, job, config, flag)
        return Tuner.resume(cfg["journal"], train=train, setup=setup, executor=executor, **limits)
    # the YAML's own job first: a mistyped key is its error, before whether the journal holds a job
    # (trial 37e: a misspelled strategy key was named only by the --resume the refusal advised)
    space = Space.from_dict(cfg["space"])
    strategy = strategy_from_dict(cfg.get("strategy", {"type": "random"}))
    if not is_new_journal(cfg["journal"]):
        with Journal(cfg["journal"], readonly=True) as j:
            if j.job is not None and j.trials():  # (bad input, exit 2, as a wrong journal path: not a failed job)
                raise ConfigError(f"journal {cfg['journal']!r} already holds a tuning job; continue it with "
                                  f"tripwire tune --resume {config} (or tripwire tune --resume-if-exists {config}, "
                                  "which starts the job where its journal holds none: one command for a scheduled "
                                  "run), or give the YAML another journal path")
    return Tuner(train, space, objective=cfg.get("objective", "objective"),
                 mode=cfg.get("mode", "max"), strategy=strategy,
                 seed=cfg.get("seed"), journal=cfg["journal"], executor=executor, setup=setup,
                 warm_start=cfg.get("warm_start"), **limits)


def holds_started_job(journal: str) -> bool:
    """Whether ``journal`` holds a tuning job that started a trial: the journal a plain ``tripwire
    tune`` refuses, and the one ``--resume-if-exists`` continues (a missing or empty file, or a job
    that never started a trial, is started afresh). A file that is not a tripwire journal raises
    :class:`~tripwire.tune.JournalError`."""
    p = Path(journal)
    if is_new_journal(p):
        return False
    with Journal(p, readonly=True) as j:
        return j.job is not None and bool(j.trials())


def _refuse_if_held(journal: str) -> None:
    """Raise :class:`~tripwire.tune.JournalLockedError` (``fit()``'s, word for word) where another live
    tuner holds ``journal``: ``tripwire tune`` checks it before it says or draws anything (trial 33d F3:
    a refused ``--resume`` printed an empty "0 trials" view on stdout, ``--resume-if-exists`` its
    "continuing the job" line, above the refusal). A missing or empty file is held by none; ``fit()``
    still takes the lock itself (a tuner that starts in between is refused there, and the view
    leaves nothing)."""
    p = Path(journal)
    if is_new_journal(p):
        return
    with Journal(p, readonly=True) as j:
        holder = j.holder()
    if holder is not None and holder["alive"]:
        raise held_by_another(p, holder["pid"], holder["host"])


def _tune(args: argparse.Namespace) -> int:
    try:
        cfg = load_job_config(args.config)
        sys.path.insert(0, str(Path(args.config).resolve().parent))
        resume, flag, doing = args.resume, "--resume", None
        if getattr(args, "resume_if_exists", False):
            resume, flag = holds_started_job(cfg["journal"]), "--resume-if-exists"
            doing = "continuing the job in" if resume else "starting a new job in"
        tuner = build_tuner(cfg, resume, args.config, flag)
        _refuse_if_held(cfg["journal"])
        if doing is not None:  # (said once the job is known to go on: trial 27i, a refused YAML said it too)
            print(f"tripwire tune: --resume-if-exists: {doing} {cfg['journal']!r}", file=sys.stderr)
    except JournalLockedError as exc:  # (not bad input: the same command runs once that tuner has ended)
        print(f"tripwire tune: error: {exc}", file=sys.stderr)
        return 1
    except (ConfigError, TripwireError) as exc:
        print(f"tripwire tune: error: {exc}", file=sys.stderr)
        return 2
    resume_cmd = f"tripwire tune --resume {args.config}"
    tuner.resume_hint = resume_cmd
    t0 = time.monotonic()
    tune_logger = logging.getLogger("tripwire.tune")
    tune_logger.addFilter(_no_summary)  # the summary printed below says it
    try:
        if args.no_progress:
            result = tuner.fit()
        else:
            with LiveView(f"tripwire tune {args.config}") as view:
                result = tuner.fit(progress=view)
    except ConfigError as exc:
        print(f"tripwire tune: error: {exc}", file=sys.stderr)
        return 2
    except TripwireError as exc:
        print(f"tripwire tune: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"tripwire tune: interrupted; the trials that were running are pending in {cfg['journal']!r}: "
              f"continue the job with {resume_cmd}", file=sys.stderr)
        return 130
    finally:
        tune_logger.removeFilter(_no_summary)
    print(result.summary())
    print(f"journal: {cfg['journal']}  ({_job_time(cfg['journal'], time.monotonic() - t0)})")
    if ended_before_any_trial(result):  # (trial 25f: exited 0)
        print(f"tripwire tune: error: no trial returned an objective: the job ended ({result.halt}) before any "
              "trial started", file=sys.stderr)
        return 1
    if _every_trial_failed(result):
        print(f"tripwire tune: error: every finished trial failed; their tracebacks: tripwire tune-report --errors "
              f"{cfg['journal']}", file=sys.stderr)
        return 1
    return 0


def _every_trial_failed(result: TuningResult) -> bool:
    """The job ended (no trial running or pending) with no best trial and failed trials: ``tripwire
    tune``, ``tune-report`` and ``report`` exit 1 for it (trial 22k: the reports exited 0 where tune
    exited 1, so a CI step checking a journal passed a job whose every trial failed)."""
    counts = result.counts()
    return result.best is None and bool(counts.get("failed")) and not counts.get("running") and not counts.get("pending")


def _no_summary(record: logging.LogRecord) -> bool:
    return not getattr(record, SUMMARY_RECORD, False)


def _ranked(result: TuningResult, full_only: bool = False) -> list[TrialRecord]:
    """The candidates of ``result.best``, best first (ties: the lower trial number): completed or
    stopped trials with an objective, not stopped by a tripwire rule (``tune-report --top``'s list);
    ``full_only`` (``--full-only``): those completed at ``max_resource`` only
    (:meth:`TuningResult.ranked`)."""
    return result.ranked(full_only=full_only)


def _full_line(result: TuningResult) -> str:
    """``tune-report --full-only``'s line under the summary: the best trial that ran its full budget."""
    budget = ("completed at max_resource=" + str(result.max_resource) if result.max_resource is not None else
              "completed (the strategy has no max_resource)")
    b = result.best_full
    if b is not None:
        return (f"best at full budget ({budget}): trial {b.number} {result.objective}={format_value(b.value)} "
                f"params={b.params}")
    early = sum(1 for t in result.trials if t.rankable)
    return (f"best at full budget ({budget}): none: no trial ran its full budget"
            + (f" ({early} completed or stopped below it)" if early else ""))


def _no_objective(result: TuningResult) -> str | None:
    """Why the job ended with no trial's objective (``tune-report`` exits 1 for it: the job ended on a
    limit before any trial started, or every finished trial failed), else None."""
    if ended_before_any_trial(result):  # (trial 25f: exited 0, as for a job just started)
        return f"the job ended ({result.halt}) before any trial started (no objective)"
    if _every_trial_failed(result):
        return "the job ended and every finished trial failed (no objective)"
    return None


def _trial_data(t: TrialRecord) -> dict[str, Any]:
    """One trial of ``tune-report --json`` (the columns of ``TuningResult.dataframe()``: the
    hyperparameters and the metrics as objects of their own; times in seconds since the epoch)."""
    return {"number": t.number, "params": dict(t.params), "status": t.status, "objective": t.value,
            "metrics": dict(t.metrics or {}), "resource": t.resource, "bracket": t.bracket, "rung": t.rung,
            "start": t.started, "end": t.ended, "elapsed_s": t.elapsed, "reason": t.reason, "error": t.error,
            "attempt": t.attempt, "rule": t.rule}


def report_data(result: TuningResult, journal: str, top: int, full_only: bool = False) -> dict[str, Any]:
    """``tripwire tune-report JOURNAL --json``'s object (every key in docs/cli.md): the job's summary
    and one object per trial, values at full precision (the CLI writes a float that is not finite
    as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``). ``top``: how many of the ranked
    trials ``top`` lists (``--top``); ``full_only`` (``--full-only``): ``top`` ranks only the trials
    completed at ``max_resource``."""
    best = result.best
    return {
        "journal": journal,
        "job": dict(result.job) or None,
        "objective": result.objective,
        "mode": result.mode,
        "max_resource": result.max_resource,
        "counts": result.counts(),
        "halt": result.halt,
        "best": None if best is None else {"number": best.number, "objective": best.value, "params": dict(best.params)},
        "top": [t.number for t in _ranked(result, full_only)[:top]],
        "resource_used": result.resource_used,
        "resource_without_early_stopping": result.resource_without_early_stopping,
        "resource_lost": result.resource_lost,
        "tuner": None if result.holder is None else dict(result.holder),
        "no_objective": _no_objective(result),
        "trials": [_trial_data(t) for t in result.trials],
    }


def write_csv(result: TuningResult, out: Any) -> None:
    """``tripwire tune-report JOURNAL --csv``: every trial as a CSV row on ``out`` (a text stream), with
    the columns of :meth:`TuningResult.dataframe` in its order (``number``, the hyperparameters,
    ``status``, ``objective``, ``resource``, ``bracket``, ``rung``, ``start``, ``end``, ``elapsed_s``,
    ``reason``, ``error``, ``attempt``, ``rule``, then ``metric:<key>``), a header line first; a
    missing value is an empty field, times are UTC (``2026-01-02 03:04:05.678901+00:00``), floats at
    full precision (trial 30e: only ``--json`` was there). Needs pandas (``tripwire[pandas]``)."""
    result.dataframe().to_csv(out, index=False, lineterminator="\n")


def _report(args: argparse.Namespace) -> int:
    command = getattr(args, "command", None) or "tune-report"
    json_out = bool(getattr(args, "json", False))
    csv_out = bool(getattr(args, "csv", False))
    full_only = bool(getattr(args, "full_only", False))
    if json_out and args.errors:  # (nothing would change: refused rather than ignored)
        print(f"tripwire {command}: error: --errors: with --json every failed trial's traceback is its 'error' "
              f"already; accepted with --json: --top", file=sys.stderr)
        return 2
    if csv_out and (json_out or args.errors or full_only):
        given = [flag for flag, on in (("--json", json_out), ("--errors", args.errors), ("--full-only", full_only))
                 if on]
        print(f"tripwire {command}: error: --csv with {', '.join(given)}: --csv prints one row per trial, every "
              "trial (each failed trial's traceback is its 'error' column, and the 'status' and 'resource' columns "
              "tell the trials that ran their full budget); accepted with --csv: nothing else", file=sys.stderr)
        return 2
    remote = journal_url_problem(args.journal, "journal")
    if remote is not None:  # (trial 28f: an s3:// journal read a local file ./s3:/...)
        print(f"tripwire {command}: error: {remote}", file=sys.stderr)
        return 2
    try:
        result = TuningResult.from_journal(args.journal)
    except TripwireError as exc:
        text = str(exc)
        if "accepted" not in text:  # (trial 22k: "'fake.db' is not a tripwire journal: file is not a database")
            text += f"; accepted: {_ACCEPTED_JOURNAL}"
        print(f"tripwire {command}: error: {text}", file=sys.stderr)
        return 2
    if json_out or csv_out:
        if json_out:  # (trial 27c: no machine-readable output; the text rounds the objectives)
            from tripwire._cli import print_json

            print_json(report_data(result, str(args.journal), args.top, full_only))
        else:
            try:
                write_csv(result, sys.stdout)
            except ImportError as exc:  # (pandas missing: the error names the extra)
                print(f"tripwire {command}: error: --csv: {exc}", file=sys.stderr)
                return 1
        why = _no_objective(result)
        if why is not None:
            print(f"tripwire {command}: error: {why}", file=sys.stderr)
            return 1
        return 0
    print(result.summary())
    if full_only:
        print(_full_line(result))
    if args.top:
        # the candidates of result.best: completed or stopped, with an objective, not stopped by a rule
        # (--full-only: those completed at max_resource)
        ranked = _ranked(result, full_only)
        for t in ranked[: args.top]:
            print(f"  trial {t.number:>5} {t.status:<9} {result.objective}={format_value(t.value)} "
                  f"resource={t.resource} bracket={t.bracket} rung={t.rung} params={t.params}")
        ruled = [t.number for t in result.trials if t.rule is not None]
        if ruled:
            print(f"  ({len(ruled)} trial(s) stopped by a tripwire rule are not ranked: broken runs, never the best; "
                  f"trials {ruled[:10]}{' ...' if len(ruled) > 10 else ''})")
    if args.errors:
        failed = [t for t in result.trials if t.status == "failed"]
        print(f"failed trials: {len(failed)}")
        for t in failed:
            print(f"--- trial {t.number} (attempt {t.attempt}) {t.reason or 'failed'} params={t.params}")
            print((t.error or "(no traceback)").rstrip())
    if ended_before_any_trial(result):  # (trial 25f: exited 0, as for a job just started)
        print(f"tripwire {command}: error: the job ended ({result.halt}) before any trial started (no objective)",
              file=sys.stderr)
        return 1
    if _every_trial_failed(result):
        hint = "" if args.errors else f"; their tracebacks: tripwire tune-report --errors {args.journal}"
        print(f"tripwire {command}: error: the job ended and every finished trial failed (no objective){hint}",
              file=sys.stderr)
        return 1
    return 0


def _count(text: str) -> int:
    """``--top``'s value: an integer >= 0 (trial 19c: -3 listed every trial but the last 3)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"got {text!r}; accepted: an integer >= 0 (0: no list)")
    return value


def register(subparsers: Any) -> None:
    """Add ``tune`` and ``tune-report`` to an ``argparse`` subparsers object."""
    from tripwire._cli import EXIT_BAD_INPUT, exit_codes

    p = subparsers.add_parser("tune", help="run a tuning job described by a YAML file",
                              description="Run the tuning job a YAML file describes (see docs/tune.md).",
                              epilog=exit_codes("0 done", "1 the job failed (a locked journal, an executor error) or "
                                                "no trial returned an objective (every finished trial failed, "
                                                "or the job ended on a limit before any trial started)",
                                                f"{EXIT_BAD_INPUT}: a bad key or value, a journal path that cannot "
                                                "hold a journal, a journal holding a job already (without "
                                                "--resume or --resume-if-exists), a --resume YAML that changes the "
                                                "job, --resume on a journal that does not exist",
                                                "130 Ctrl-C (SIGTERM: ends by SIGTERM), with the --resume command"))
    p.add_argument("config", help="tune.yaml")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--resume", action="store_true", help="continue the job in the config's journal")
    how.add_argument("--resume-if-exists", action="store_true",
                     help="continue the job in the config's journal where it holds one that started a trial, else "
                          "start the job (one command for a scheduled run: a finished job is not rerun)")
    p.add_argument("--no-progress", action="store_true", help="no live view; print the summary at the end")
    p.set_defaults(func=_tune)
    r = subparsers.add_parser("tune-report", help="print the summary of a tuning journal",
                              epilog=exit_codes("0 reported (a job running or pending too)", "1 the job ended and no "
                                                "trial returned an objective (every finished trial failed, or "
                                                "none started), as tripwire tune exits",
                                                f"{EXIT_BAD_INPUT}: not a tuning journal"))
    r.add_argument("journal", help="the SQLite journal of a tuning job")
    r.add_argument("--top", type=_count, default=5, help="list the N best trials (default 5; the trials a tripwire "
                                                          "rule stopped are not ranked)")
    r.add_argument("--full-only", action="store_true",
                   help="rank only the trials that ran their full budget (completed at max_resource), leaving out "
                        "those early-stopped at a rung: --top lists them, and a line gives the best of them "
                        "(TuningResult.best_full)")
    r.add_argument("--errors", action="store_true", help="print the traceback of every failed trial")
    r.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout instead of the text: the job's summary and one object per "
                        "trial, at full precision (its keys: docs/cli.md); the exit status is as without it "
                        "(--errors is refused: each failed trial's traceback is in the JSON)")
    r.add_argument("--csv", action="store_true",
                   help="print every trial as CSV on stdout instead of the text: a header, then one row per trial "
                        "with the columns of TuningResult.dataframe() (needs pandas); the exit status is as without "
                        "it (--json, --errors and --full-only are refused with it; --top does not apply)")
    r.set_defaults(func=_report)
