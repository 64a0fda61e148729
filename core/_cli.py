"""The ``tripwire`` command line.

    tripwire inspect RUN          steps, collections, tensors and findings of a stored run
    tripwire validate CONFIG      check a YAML config (and the rules it names)
    tripwire rules                the built-in rules with their parameters and defaults
    tripwire watch RUN --config   evaluate rules over a run while it is written
    tripwire plot RUN TENSOR ...  plot tensors of a stored run (a PNG; needs tripwire[plot])
    tripwire demo [--healthy]     a real Lightning run with a planted fault, stopped by a rule
    tripwire tune TUNE.yaml       Hyperband tuning; tripwire tune-report JOURNAL
    tripwire report PATH          a run's summary (inspect) or a tuning journal's (tune-report)
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from ._errors import ConfigError, TripwireError

# (module, attribute) of the subcommand providers; each has register(subparsers).
_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("tripwire._rules_cli", "register"),
    ("tripwire._watch", "register"),
    ("tripwire._plot", "register"),
    ("tripwire.integrations.lightning._demo", "register"),
    ("tripwire.tune._cli", "register"),
)


_T = TypeVar("_T")


def typed(convert: Callable[[str], _T], accepted: str, check: Callable[[_T], bool] | None = None) -> Callable[[str], _T]:
    """An argparse ``type=``: ``convert(text)``, refused with ``got 'X'; accepted: <accepted>`` where it
    raises (or ``check`` is false), which :class:`_Parser` prints as the verbs' own checks print theirs
    (trial 22k: ``--interval abc`` said ``invalid float value: 'abc'``, with no accepted values)."""

    def parse(text: str) -> _T:
        try:
            value = convert(text)
        except (TypeError, ValueError, ArithmeticError):
            raise argparse.ArgumentTypeError(f"got {text!r}; accepted: {accepted}") from None
        if check is not None and not check(value):
            raise argparse.ArgumentTypeError(f"got {text!r}; accepted: {accepted}")
        return value

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


class _Parser(argparse.ArgumentParser):
    """The CLI's parsers (every verb's too: subparsers take their parent's class). An option value
    its type refuses (``got X; accepted: Y``: :func:`typed`) is one line, ``tripwire VERB: error:
    --flag: got X; accepted: Y``, as the verbs' own checks say it (trial 22k: ``tune-report --top -1``
    printed the usage line first, ``report --top -1`` did not); any other usage error is one line too,
    ``tripwire VERB: error: <argparse's message> (usage: ...)`` (trial 27c)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)  # (what error() reads: see _watch_json)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        refused = re.fullmatch(r"argument (?:\S+/)?(\S+): (got .*; accepted: .*)", message, re.S)
        if refused:
            line = f"{refused.group(1)}: {refused.group(2)}"
        else:
            # one line, the usage at its end (trial 27c: argparse's usage line came first, then the error:
            # two lines where every verb's --help promises one)
            line = f"{one_line(message)} ({' '.join(self.format_usage().split())})"
        self._json_error(line)
        self.exit(2, f"{self.prog}: error: {line}\n")

    def _json_error(self, error: str) -> None:
        """The object ``tripwire watch --json`` and ``validate --json`` print on stdout, for a usage
        error too (docs/cli.md: watch's last line is its summary whatever the exit status but 130,
        validate prints one object valid or not; trial 37l: ``--interval abc``, an unknown flag and
        ``--framework torch`` printed none, where ``--interval 0`` did)."""
        given = getattr(self, "_given", [])
        verb = self.prog.split()[-1]
        if verb not in ("watch", "validate"):
            if not given or given[0] not in ("watch", "validate"):
                return
            verb, given = given[0], given[1:]
        if "--json" not in given:
            return
        first = next((a for a in given if not a.startswith("-")), None)
        if verb == "watch":
            from ._watch import _summary

            print_json(_summary(first or "", None, 2, error, []))
            return
        framework = next((b for a, b in zip(given, given[1:]) if a == "--framework"), None)
        print_json({"config": first, "valid": False, "framework": framework, "errors": [error], "out_dir": None,
                    "default_out_dir": None, "rules": None, "collections": None})


#: The exit status every verb shares, in each one's ``--help`` (trial 22k: only watch and plot said theirs).
EXIT_BAD_INPUT = "2 bad input (the reason on stderr, one line)"


class ErrorList(ConfigError):
    """Several errors at once (``tripwire validate``'s every error of a file): :func:`main` prints
    its message as it is, a header line and one line per error, where any other error is one line."""


def one_line(message: str) -> str:
    """``message`` on one line, its lines joined with ``"; "`` (a YAML parser's error spans three or
    four): what a CLI verb prints on stderr for exit status 2 (trial 27c: a CI step that kept the
    first or last line lost the rest)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return "; ".join(lines)


def exit_codes(*codes: str) -> str:
    """A verb's ``--help`` epilog: ``Exit status: 0 ..., 2 bad input ...`` (its own codes first)."""
    return f"Exit status: {', '.join(codes)}."


def _worker_ends(run: Any, gone: list[int], unknown: dict[int, dict[str, Any]] | None = None) -> str:
    """The line under a ``running`` run's headline when some of its workers ended without closing it
    (``gone``: :meth:`Run.abandoned_workers`) or may still be written from where this machine cannot
    see (``unknown``: :meth:`Run.unknown_workers`, a copy of a run still written, a run of another
    machine): how each worker ended, or what is known of it. Trial 25b: a DDP run whose rank 1 was
    SIGKILLed, and whose rank 0 then failed and wrote its ``failed`` end marker, said "no training
    writes this run: worker 1 ended without closing it" and nothing of worker 0. Trial 28f: a copy
    of a run still being written said "no process writes this run any more: worker 0 ended without
    closing it (killed, out of memory, a crash)"."""
    from ._run import unknown_writer_text

    unknown = unknown or {}
    markers = run.end_markers
    workers = sorted(set(run.workers) | set(run._shard_workers()) | set(markers) | set(gone) | set(unknown))
    ends: list[str] = []
    writing: list[int] = []
    now = time.time()
    for w in workers:
        if w in gone:
            ends.append(f"worker {w} ended without closing it (killed, out of memory, a crash)")
        elif w in unknown:
            ends.append(unknown_writer_text(w, unknown[w], now))
        elif w in markers:
            ends.append(f"worker {w} ended with status {markers[w].get('status', 'complete')}")
        else:
            writing.append(w)
            ends.append(f"worker {w} still writes it")
    several = len(gone) > 1
    if not gone:
        head = ""  # (only workers whose end is not known: each says so)
    elif writing or unknown:
        head = (f"worker{'s' if several else ''} {', '.join(map(str, gone))} no longer "
                f"write{'' if several else 's'} this run: ")
    else:
        head = "no process writes this run any more: "
    return f"{head}{'; '.join(ends)}; what {'it' if len(workers) == 1 else 'they'} wrote is readable"


def _trainings_lines(run: Any) -> list[str]:
    """One line per worker whose run holds several trainings (``Run.trainings``: later fits through
    one session, or a later process that wrote into the same ``out_dir`` without resuming): where
    each began, and how it was judged."""
    out = []
    for worker, trainings in sorted(run.trainings.items()):
        processes = run.training_processes(worker)
        parts = []
        for k, t in enumerate(trainings, start=1):
            where = ", ".join(f"{m} step {s}" for m, s in t["steps"].items() if s) or "train step 0"
            part = f"{k} from {where}"
            if k > 1:
                part += ", continuing the one before" if t.get("continued") else ", a new training (judged alone)"
            if t.get("fresh") and t.get("argv"):
                mine, before = processes[k - 1], processes[k - 2]
                if mine is not None and mine == before:  # (a second callback in one notebook kernel: trial 30f F3)
                    part += f", by the same process (pid {mine[1]})"
                elif mine is not None and before is not None:
                    part += f", by a later process: {' '.join(t['argv'])}"
                else:  # (which process wrote one of the two is not in the run)
                    part += f", by a later session: {' '.join(t['argv'])}"
            parts.append(part)
        out.append(f"worker {worker} holds {len(trainings)} trainings: {'; '.join(parts)}")
    return out


_SHOWN_RANGES = 4
"""How many ranges of steps ``tripwire inspect`` lists of a mode before it counts the rest."""


def _steps_text(mode: str, held: Any, picked: Any) -> str:
    """``train steps 250-400, 1000-1039 and 2250-2289 (231 steps)``: ``picked`` (sorted unique steps
    of ``mode``) as the ranges it makes among ``held`` (every step the worker holds of ``mode``,
    sorted unique): a range runs over consecutive held steps, so that steps in between that were not
    picked are never said (trial 32b F6: "train steps 250 to 2289" read as if 401-999 were written
    twice). The first :data:`_SHOWN_RANGES` ranges, then how many more; ``train step 7`` for one step."""
    import numpy as np

    if len(picked) == 1:
        return f"{mode} step {int(picked[0])}"
    at = np.searchsorted(held, picked)
    breaks = (np.flatnonzero(np.diff(at) != 1) + 1).tolist()
    bounds = list(zip([0, *breaks], [*breaks, len(picked)]))
    ranges = [str(int(picked[a])) if b - a == 1 else f"{int(picked[a])}-{int(picked[b - 1])}" for a, b in bounds]
    shown, more = ranges[:_SHOWN_RANGES], len(ranges) - _SHOWN_RANGES
    if more > 0:
        listed = f"{', '.join(shown)} and {more} more range{'s' if more > 1 else ''}"
    else:
        listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
    return f"{mode} steps {listed} ({len(picked)} steps)"


def _went_back_lines(run: Any) -> list[str]:
    """One line per worker whose records of some steps a later training or a resume went back over
    (it started again at or before them; see ``tripwire._history.live_records``): the run holds
    those steps more than once, or holds a record of them that the later one does not replace (it
    stopped before them). The steps are said as ranges of each mode (:func:`_steps_text`). Where the
    last step an earlier writing session wrote lacks tensors that a later record of that step holds
    (a training killed inside that step; :func:`_cut_steps`), the line names them: such a tensor
    holds that step once. A worker whose step count went back within one writing session (a loop
    that restarts its step number) gets a line of its own saying so."""
    import numpy as np

    from ._history import gone_back_over, live_records

    out = []
    for worker in run.workers:
        parts, within = [], []
        ordered = run._records_in_order(worker)
        # (one writing session: the worker's global steps never go back)
        one_session = ordered is not None and not bool(np.any(ordered[0][1:] <= ordered[0][:-1]))
        for mode in run.modes():
            steps = run.wall_times(mode, worker)[0]
            if not len(steps):
                continue
            # the writing session of each record where the records hold global steps (they go back where
            # a later one began, whatever the mode), as run.dataframe()'s superseded column tells them: a
            # killed attempt's last step that the resume ran first is gone back over too (trial 32b F6)
            known = ordered is not None and mode in ordered[3]
            # (one writing session's records supersede none of its own: which steps it went back to is
            # told from the steps alone)
            over = np.unique(steps[gone_back_over(ordered[0])[ordered[3][mode]]] if known and not one_session
                             else steps[~live_records(steps)])
            if not len(over):
                continue
            said = _steps_text(mode, np.unique(steps), over)
            # (trial 27g F7: a loop restarting its step number every epoch is one writing session, whose
            # records' global steps only increase; its steps were said gone back over by "a later
            # training or a resume")
            (within if one_session else parts).append(said)
        if parts:
            cuts = _cut_steps(run, worker)
            if cuts is None:  # (records without global steps: which session wrote each is not in the run)
                partial = ("; which writing session wrote each record is not in this run (written before records "
                           "held global steps): the last step an earlier training wrote may lack tensors (a "
                           "training killed inside that step), each of which holds that step once, the later record")
            else:
                # (trial 31b F3: "series() returns every record" read as two records of every tensor at
                # each such step; trials 32c F6, 32d F5: "a crash inside that step" was said of a first fit
                # that ended normally: it is said only where that step lacks tensors a later record holds)
                partial = "".join(
                    f"; {mode} step {step}, the last step the earlier training wrote, lacks "
                    f"{_names_text(lacks)}, which the later record of that step holds (that training was cut off "
                    f"inside the step, a crash say, or saved other tensors there): "
                    f"{'it holds' if len(lacks) == 1 else 'each holds'} that step once, the later record"
                    for mode, step, lacks in cuts)
            out.append(f"worker {worker}: a later training or a resume went back over (started again at or before) "
                       f"the records of {' and of '.join(p for p in parts)}: series() returns every record, "
                       f"value() the last written{partial}; run.dataframe()'s superseded column marks the records "
                       f"gone back over")
        if within:
            verb = "holds" if len(within) == 1 and " step " in within[0] else "hold"
            out.append(f"worker {worker}: {' and '.join(within)} {verb} several records: the step count went back "
                       f"within one training (a loop that restarts its step number, each epoch say: steps must "
                       f"increase); series() returns every record, value() the last written")
    return out


def _names_text(names: list[str]) -> str:
    """``loss``, ``loss and acc``, ``3 tensors (loss, acc, lr ...)``: tensors named in a line."""
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    return f"{len(names)} tensors ({', '.join(names[:3])}{' ...' if len(names) > 3 else ''})"


def _cut_steps(run: Any, worker: int) -> list[tuple[str, int, list[str]]] | None:
    """``(mode, step, tensors)`` for each earlier writing session of ``worker`` (before a later one
    went back: a resume from an earlier checkpoint, a later training in the same ``out_dir``) whose
    last record's step lacks tensors that a later session's record of that step holds: the tensors
    (sorted), which the run holds once at that step, the later record. The step a training killed
    inside it left with some of its tensors (Lightning writes a step's gradients before its loss);
    a training that ended normally, or whose step no later session wrote again, is not listed
    (trials 32c F6, 32d F5). The records of every mode in write order (by wall time), a session
    beginning where their global steps go back; scalar values only (a whole array is held once per
    step: the last written). None where a record has no global step (a shard written before they
    were): the sessions cannot be told apart."""
    import numpy as np

    modes = run.modes()
    kinds, places, steps, walls, globals_ = [], [], [], [], []
    for k, mode in enumerate(modes):
        st, wa = run.wall_times(mode, worker)
        g = run.global_steps(mode, worker)
        if len(g) != len(st) or (len(g) and int(g.min()) < 0):
            return None
        kinds.append(np.full(len(st), k, dtype=np.int64))
        places.append(np.arange(len(st)))
        steps.append(st)
        walls.append(wa)
        globals_.append(g)
    if not kinds:
        return []
    kind, step, place = np.concatenate(kinds), np.concatenate(steps), np.concatenate(places)
    order = np.argsort(np.concatenate(walls), kind="stable")
    g = np.concatenate(globals_)[order]
    session = np.empty(len(order), dtype=np.int64)  # (the writing session of each record, in write order)
    session[order] = np.concatenate(([0], np.cumsum(g[1:] <= g[:-1])))
    out = []
    for j in (np.flatnonzero(g[1:] <= g[:-1]) + 1).tolist():
        last = int(order[j - 1])
        mode, at, mine = modes[int(kind[last])], int(step[last]), int(session[last])
        same = (kind == kind[last]) & (step == at)
        later = place[same & (session > mine)]
        if not len(later):  # (no later session wrote that step: it is held once, as written)
            continue
        earlier = place[same & (session == mine)]
        lacks = run._record_tensors(mode, worker, later) - run._record_tensors(mode, worker, earlier)
        if lacks:
            out.append((mode, at, sorted(lacks)))
    return out


def _json_safe(value: Any) -> Any:
    """``value`` as strict JSON data: numpy scalars and arrays as Python ones, a mapping's keys as
    strings, a float that is not finite as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
    (JSON has no such numbers; ``json.dumps`` would write invalid JSON), every finite float at full
    precision (``json`` writes its shortest exact form)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _json_safe(value.tolist())
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def print_json(data: Any) -> None:
    """Print ``data`` on stdout as one line of strict JSON (see :func:`_json_safe`; ASCII only, so
    that no stdout encoding refuses it)."""
    import json

    print(json.dumps(_json_safe(data), allow_nan=False), flush=True)


def _regex_matches_nothing(run: Any, regex: str, flag: str = "--regex") -> ConfigError:
    """The error of a ``--regex`` that matches no tensor of ``run`` (as ``tripwire plot`` says it)."""
    names = run.tensor_names()
    return ConfigError(f"{flag}: no tensor matches the regex {regex!r} (re.search); available: "
                       f"{', '.join(names[:20]) or 'none'}{' ...' if len(names) > 20 else ''}")


def _missing_lines(run: Any) -> list[str]:
    """``tripwire inspect``'s line naming the workers of the run's world size that its
    ``writer.ranks`` says write and that wrote nothing (:meth:`Run.missing_workers`); ``[]`` where
    there are none."""
    missing = run.missing_workers()
    if not missing:
        return []
    ranks = (run.config.get("writer") or {}).get("ranks", "all")
    names = f"worker{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
    wrote = sorted(set(run._shard_workers()) | set(run.end_markers))
    held = (f"the status is that of worker{'s' if len(wrote) > 1 else ''} {', '.join(map(str, wrote))} alone"
            if wrote else "no worker wrote")
    return [f"{names} of world size {run.world_size} wrote nothing to this run (no shard, no end marker), though "
            f"writer.ranks is {ranks if ranks == 'all' else list(ranks)}: {held}; such a "
            f"rank never made its session (it failed before, or has not started yet), was given another out_dir (a "
            f"per-rank timestamp splits one job in several runs), or was made with write=False"]


def _known_workers(run: Any) -> list[int]:
    """Every worker the run knows of: those with records (``run.workers``), with a shard, or with an
    end marker (a worker whose shard is missing or empty has none of its records read)."""
    return sorted(set(run.known_workers()) | set(run._shard_workers()))


def _last_value(run: Any, name: str, worker: int) -> dict[str, Any] | None:
    """What ``tripwire inspect --tensors`` shows of ``name`` in its "last value @ step" column, as
    data: its headline reduction's latest value (``kind`` ``reduction``), else its last whole array's
    dtype and shape (``kind`` ``array``), in mode ``train`` where it has train values, else in its
    first mode; None where it has neither."""
    from ._run import headline_reduction

    modes = run.tensor(name).modes(worker)
    if not modes:
        return None
    mode = "train" if "train" in modes else modes[0]  # (validation metrics: their own mode)
    red = headline_reduction(run.reductions(name))
    if red is not None:
        latest = run.latest(name, red, mode, worker)
        if latest is None:
            return None
        return {"kind": "reduction", "reduction": red, "value": float(latest[1]), "step": int(latest[0]),
                "mode": mode, "worker": worker}
    if "raw" in run.array_kinds(name):  # (whole arrays only: labels, predictions)
        steps = run.array_steps(name, "raw", mode, worker)
        if steps:
            arr = run.array(name, steps[-1], "raw", mode, worker)
            return {"kind": "array", "dtype": str(arr.dtype), "shape": list(arr.shape), "step": int(steps[-1]),
                    "mode": mode, "worker": worker}
    return None


def _printable(name: str) -> str:
    """``name`` with its control characters written as Python escapes (``\\t``, ``\\n``): a table
    row per tensor (trial 43a: a name holding a newline was drawn as two rows, a tab cut it short)."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _last_of_any(run: Any, name: str, first: int) -> dict[str, Any] | None:
    """:func:`_last_value` of ``first`` (rank 0, else the run's lowest worker), else of the lowest
    other worker that holds a value of ``name`` (its ``worker`` says which): a tensor only rank 1
    logged, the NaN its finding names, showed a blank last value (trial 31b F1)."""
    got = _last_value(run, name, first)
    if got is not None:
        return got
    for worker in run.workers:
        if worker != first:
            got = _last_value(run, name, worker)
            if got is not None:
                return got
    return None


def _inspect_data(run: Any, status: str, tensors: bool, regex: str | None) -> dict[str, Any]:
    """``tripwire inspect --json``'s object (every key in docs/cli.md)."""
    info = run.info
    known = _known_workers(run)
    gone = run.abandoned_workers() if status == "running" else []
    unknown = run.unknown_workers() if status == "running" else {}
    notes = (([_worker_ends(run, gone, unknown)] if gone or unknown else []) + _missing_lines(run)
             + _trainings_lines(run) + _went_back_lines(run))
    first = run.workers[0] if run.workers else 0
    listed = None
    if tensors:
        listed = [{"name": name, "collections": list(run.tensor_collections(name)), "reductions": run.reductions(name),
                   "arrays": list(run.array_kinds(name)), "last": _last_of_any(run, name, first)}
                  for name in run.tensor_names(regex=regex)]
    findings = run.findings
    return {
        "run": str(run.path),
        "status": status,
        "framework": info.get("framework"),
        "world_size": run.world_size,
        "workers": known,
        "workers_without_records": [w for w in known if w not in run.workers],
        "abandoned_workers": gone,
        "unknown_workers": [{"worker": w, **info} for w, info in sorted(unknown.items())],
        "ends": [{"worker": w, "status": m.get("status", "complete"), "stop_reason": m.get("stop_reason")}
                 for w, m in sorted(run.end_markers.items())],
        "trial": run.trial,
        "warnings": list(run.warnings),
        "notes": notes,
        "steps": [{"mode": mode, "count": len(steps), "first": steps[0], "last": steps[-1]}
                  for mode in run.modes() for steps in [run.steps(mode)]],
        "collections": {name: list(names) for name, names in run.collections().items()},
        "tensors": listed,
        "findings": [f.to_dict() for f in findings if f.kind == "finding"],
        "rule_errors": [f.to_dict() for f in findings if f.kind == "error"],
    }


def _cmd_inspect(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ._history import compile_regex
    from ._run import open_run

    if args.regex is not None:
        compile_regex(args.regex, "--regex")  # before anything is printed
        args.tensors = True  # --regex lists the matching tensors
    with _reader_warnings_shown_below():
        run = open_run(args.run)
        status = run.status
    if args.regex is not None and not run.tensor_names(regex=args.regex):
        # exit 2 and nothing on stdout, as tripwire plot (trial 27c: inspect said so on stdout and exited 0)
        raise _regex_matches_nothing(run, args.regex)
    if getattr(args, "json", False):
        print_json(_inspect_data(run, status, args.tensors, args.regex))
        return 0
    console = _inspect_console(args.width)
    info = run.info
    known = _known_workers(run)
    silent = [w for w in known if w not in run.workers]
    # (trial 27c: "workers: []" above a warning naming worker 0, whose shard was missing)
    unread = (f" (no records read of worker{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))})"
              if silent else "")
    gone = run.abandoned_workers() if status == "running" else []
    unknown = run.unknown_workers() if status == "running" else {}
    # (trial 31c #6: "status: running" for a run whose only writer was killed, read as a live job)
    unfinished = set(run._shard_workers()) - set(run.end_markers)
    shown = (f"{status} (but no process writes it any more: see below)"
             if gone and unfinished and unfinished <= set(gone) else status)
    console.print(f"[bold]run[/bold] {escape(str(run.path))}  status: [bold]{shown}[/bold]  "
                  f"framework: {escape(str(info.get('framework', '?')))}  world size: {run.world_size}  "
                  f"workers: {known}{unread}", highlight=False, soft_wrap=True)
    trial = run.trial
    if trial is not None:
        params = ", ".join(f"{k}={v}" for k, v in (trial.get("params") or {}).items())
        attempt = f" (attempt {trial['attempt']})" if "attempt" in trial else ""
        console.print(f"[bold]trial[/bold] {trial.get('number', '?')}{attempt}  reports: {trial.get('metric')}  "
                      f"params: {params or 'none'}", highlight=False, soft_wrap=True)
    if gone or unknown:
        console.print(f"[bold yellow]{escape(_worker_ends(run, gone, unknown))}[/bold yellow]", highlight=False,
                      soft_wrap=True)
    for worker, marker in sorted(run.end_markers.items()):
        if marker.get("stop_reason"):  # (one line, whatever its length: trial 27c grepped it)
            console.print(f"worker {worker} {marker.get('status')}: {escape(str(marker['stop_reason']))}",
                          highlight=False, soft_wrap=True)
    for line in _missing_lines(run):  # (trial 30b F6: a rank that never wrote went unsaid)
        console.print(f"[bold yellow]{escape(line)}[/bold yellow]", highlight=False, soft_wrap=True)
    for warning in run.warnings:  # damage read past: a truncated shard, a bad findings line ...
        console.print(f"[bold yellow]warning:[/bold yellow] {escape(warning)}", highlight=False, soft_wrap=True)
    table = Table(title="steps", show_edge=False)
    for col in ("mode", "steps with records", "first", "last"):
        table.add_column(col)
    for mode in run.modes():
        steps = run.steps(mode)
        table.add_row(mode, str(len(steps)), str(steps[0]), str(steps[-1]))
    console.print(table)
    for line in _trainings_lines(run) + _went_back_lines(run):  # (trial 26i: neither was said)
        console.print(escape(line), highlight=False, soft_wrap=True)
    cols = run.collections()
    table = Table(title="collections", show_edge=False)
    table.add_column("collection")
    table.add_column("tensors", justify="right")
    table.add_column("examples")
    for name, tensors in cols.items():
        table.add_row(escape(name), str(len(tensors)),
                      escape(", ".join(tensors[:4]) + (" ..." if len(tensors) > 4 else "")))
    console.print(table)
    if args.tensors:
        table = Table(title="tensors", show_edge=False)
        # (trial 29b: a long reductions list was cut with "...", hiding variance, zero_fraction and the
        # histogram: the lists fold inside their column, at ", ", and the names and values stay whole)
        table.add_column("tensor", no_wrap=True, overflow="fold")
        table.add_column("collections", overflow="fold")
        table.add_column("reductions", overflow="fold")
        table.add_column("last value @ step", no_wrap=True, overflow="fold")
        first = run.workers[0] if run.workers else 0  # (a run whose rank 0 wrote no shard)
        for name in run.tensor_names(regex=args.regex):
            reds = run.reductions(name)
            shown = reds + [kind for kind in run.array_kinds(name) if kind not in reds]  # whole arrays, histograms
            last = ""
            got = _last_of_any(run, name, first)
            if got is not None and got["kind"] == "reduction":
                last = f"{got['reduction']}={got['value']:.6g} @ {got['step']}"  # (--json: every digit)
            elif got is not None:
                last = f"array {got['dtype']}{got['shape']} @ {got['step']}"
            if got is not None:
                # (worker: a tensor the first worker holds no value of, another's: trial 31b F1)
                said = ([got["mode"]] if got["mode"] != "train" else []) + (
                    [f"worker {got['worker']}"] if got["worker"] != first else [])
                last += f" ({', '.join(said)})" if said else ""
            table.add_row(escape(_printable(name)), escape(", ".join(run.tensor_collections(name))), ", ".join(shown),
                          last)
        console.print(table)
    findings = [f for f in run.findings if f.kind == "finding"]
    # a rule that raised is no finding (trial 27c: a custom rule's error made "findings (2)" of one finding)
    errors = [f for f in run.findings if f.kind == "error"]
    # trial 23b: in a run of several workers, which rank found it (a fault on rank 1 of a DDP job,
    # one finding per XGBoost worker with ranks='all': rows that otherwise look the same)
    by_worker = len(set(run.workers) | {f.worker for f in run.findings}) > 1
    lost = _lost_findings_text(run)
    if not findings:
        # (trial 32b F1: "findings: none" under the stop reason of the finding that a full disk lost)
        console.print("findings: none" + (f" read, though {lost}" if lost else ""), highlight=False, soft_wrap=True)
    for title, rows in ((f"findings ({len(findings)})", findings), (f"rule errors ({len(errors)})", errors)):
        if not rows:
            continue
        table = Table(title=title, show_edge=False)
        for col in ("rule", "step", "mode", *(("worker",) if by_worker else ()), "severity", "message"):
            table.add_column(col, overflow="fold")
        for f in rows:
            table.add_row(escape(f.rule), str(f.step), f.mode, *((str(f.worker),) if by_worker else ()), f.severity,
                          escape(f.message))
        console.print(table)
    if findings and lost:
        console.print(f"findings: fewer read than the end markers count: {lost}", highlight=False, soft_wrap=True)
    return 0


def _lost_findings_text(run: Any) -> str:
    """``worker 0's end marker counts 1 finding (rule errors included), the run holds 0 of that worker
    (lost to its write error: see the warning above)``: the workers whose end marker counts more
    findings than the run holds (``Run._findings_lost``, said in a warning); ``""`` where there are
    none."""
    markers = run.end_markers
    parts = []
    for worker, (counted, held, every) in sorted(run._findings_lost.items()):
        why = "its write error" if markers.get(worker, {}).get("write_error") else "a damaged findings file"
        parts.append(f"worker {worker}'s end marker counts {counted} finding{'s' if counted != 1 else ''} (rule errors "
                     f"included), the run holds {held} {'of all its workers' if every else 'of that worker'} "
                     f"(lost to {why})")
    return f"{'; '.join(parts)}: see the warning above" if parts else ""


class _DropReaderWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "tripwire_reader", False)


@contextlib.contextmanager
def _reader_warnings_shown_below() -> Iterator[None]:
    """The run reader logs what it found damaged; ``tripwire inspect`` prints it in its report
    instead (once, under the status line)."""
    log = logging.getLogger("tripwire")
    drop = _DropReaderWarnings()
    log.addFilter(drop)
    try:
        yield
    finally:
        log.removeFilter(drop)


class _OnceEach(logging.Filter):
    """Lets each message through once: ``tripwire validate`` checks a failing file's parts again
    and again, and a part's WARNING (a collection named like a built-in one) was said each time."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "tripwire_unregistered_rule", False):
            return False  # (validate names that rule among its errors: not said twice, trial 22k)
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


def _cmd_validate(args: argparse.Namespace) -> int:
    log = logging.getLogger("tripwire")
    once = _OnceEach()
    log.addFilter(once)
    try:
        return _validate(args)
    finally:
        log.removeFilter(once)


def _validate(args: argparse.Namespace) -> int:
    framework = getattr(args, "framework", None)
    said = _WarningsSaid()  # (trial 43j: --json left out the likely-typo WARNINGs that stderr shows)
    logging.getLogger("tripwire").addHandler(said)
    try:
        return _validate_said(args, framework, said)
    finally:
        logging.getLogger("tripwire").removeHandler(said)


class _WarningsSaid(logging.Handler):
    """The WARNINGs (and worse) tripwire logs while ``validate`` reads a config, for ``--json``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(cli_line(record.getMessage()))
        except Exception:  # noqa: BLE001 - (a message that cannot be formatted: left out)
            pass


def _validate_said(args: argparse.Namespace, framework: str | None, said: _WarningsSaid) -> int:
    from pathlib import Path

    from ._config import config_mapping, load_config, read_config_text
    from ._session import _effective_collections, check_config

    text: str | None = None
    pipe = False
    try:
        path = Path(args.config)
        if path.exists() and not path.is_dir() and not path.is_file():
            # a pipe (validate <(...), /dev/stdin) reads once: its text serves every check (trial 25i)
            pipe = True
            text = read_config_text(path)
            config = load_config(config_mapping(text, args.config))
        else:
            config = load_config(args.config)
        rules = check_config(config, **_as_run_by(framework))
        cols = _captured_by(framework, _effective_collections(config, rules, framework))
    except ConfigError as first:
        # (a pipe whose text could not be read, not UTF-8: read again, it would wait for a writer forever)
        every = [str(first)] if pipe and text is None else _every_error(args.config, first, framework, text)
        errors = _after_failed_imports([_beside_the_config(e, args.config) for e in every])
        if getattr(args, "json", False):  # (each error on one line, as stderr says it: trial 37l)
            print_json({"config": args.config, "valid": False, "framework": framework,
                        "errors": [cli_line(e) for e in errors],
                        "out_dir": None, "default_out_dir": None, "rules": None, "collections": None,
                        "warnings": said.lines})
        if len(errors) > 1:
            raise ErrorList(f"{len(errors)} errors in {args.config}:\n  " + "\n  ".join(errors)) from None
        if errors[0] != str(first):
            raise ConfigError(errors[0]) from None
        raise
    if getattr(args, "json", False):
        print_json({"config": args.config, "valid": True, "framework": framework, "errors": [],
                    "out_dir": None if config.out_dir is None else os.fspath(config.out_dir),
                    "default_out_dir": (None if config.out_dir is not None or not config.name
                                        else f"./{config.resolved_out_dir().as_posix()}"),
                    "rules": [r.name for r in rules], "collections": list(cols), "warnings": said.lines})
        return 0
    print(f"{args.config}: valid")
    default_dir = (f"(default, from name: ./{config.resolved_out_dir().as_posix()})" if config.name
                   else "(default: a new ./tripwire-runs/run-<date>-<time>)")
    print(f"  out_dir: {config.out_dir or default_dir}")
    print(f"  rules: {', '.join(r.name for r in rules) or 'none'}" + (f" (as the {framework} integration runs them)"
                                                                      if framework else ""))
    print(f"  collections captured: {', '.join(_captured_text(config, rules, cols))}")
    if framework is None and any(r.rule_set for r in rules):
        print("  (a rule set's members an integration cannot feed are left out by its callback: see them with "
              "--framework lightning|keras|xgboost|mxnet)")
    return 0


_REGISTER_ADVICE = ("list its module under the config's imports (imports: [teamrules]), or name it "
                    "'module:Class')")


def _after_failed_imports(errors: list[str]) -> list[str]:
    """An unknown rule's advice to list its module under ``imports`` where the config lists modules
    that failed to import: the rule may be one of theirs (trial 36d: validate advised the imports the
    config had, under the error of its failed import)."""
    failed = [e.split(":", 1)[0] for e in errors if re.match(r"imports\[\d+\]: (cannot import|importing) module", e)]
    if not failed:
        return errors
    instead = (f"it may be registered by a module of the config's imports that did not import ({', '.join(failed)}: "
               f"see {'that error' if len(failed) == 1 else 'those errors'}), or name it 'module:Class')")
    return [e.replace(_REGISTER_ADVICE, instead) if ": unknown rule " in e else e for e in errors]


def _beside_the_config(message: str, config: str) -> str:
    """``message``, an error of ``tripwire validate config``, with what to do where it is a
    ``module:attribute`` (a rule's, an action's) that does not import (``No module named 'X'``)
    because ``X`` lies in the config file's folder: validate imports as a training started from the
    current directory does (the current directory and PYTHONPATH), which does not search that
    folder. Trial 26f: validate put the folder on ``sys.path`` and said "valid", and the callback,
    made from the same directory, refused the file. Other messages are returned as they are."""
    import importlib.machinery
    import importlib.util
    import shlex

    missing = re.search(r"No module named '([\w.]+)'", message)
    if missing is None or not os.path.isfile(config):  # (a pipe, <(...), has no folder of its own)
        return message
    top = missing.group(1).split(".")[0]
    folder = os.path.dirname(os.path.abspath(config))
    searched = {os.path.realpath(p or os.curdir) for p in sys.path}
    if os.path.realpath(folder) in searched or importlib.machinery.PathFinder.find_spec(top, [folder]) is None:
        return message
    with contextlib.suppress(ImportError, ValueError):
        if importlib.util.find_spec(top) is not None:  # (the top module imports: a submodule of it is missing)
            return message
    return (f"{message}; {top!r} lies in the config's folder {folder}, which a training started from this "
            f"directory does not search: start the training (and validate) from {folder}, or set "
            f"PYTHONPATH={shlex.quote(folder)}")


#: Config lists of independent items, each checked apart by ``tripwire validate`` (not a pair such
#: as ``histogram_range``).
_ITEM_LISTS = ("actions", "exclude", "include", "kinds", "ranks", "reductions", "steps")

#: Config keys that hold one value, never a section of settings: a mapping written there is one error
#: (the mapping), not one per key of it (trial 25g: ``histogram_range: {low: 0, high: 1}`` gave three
#: errors, two of them values the file does not hold, ``{'low': 0}`` and ``{'high': 1}``).
_ONE_VALUE = ("histogram_range", "histogram_bins", "interval", "start_step", "end_step", "enabled", "every_step",
              "queue_size", "fsync", "out_dir", "name", "strict", "exclude", "include", "kinds", "ranks",
              "reductions", "steps")


#: Valid values an action's required parameter is checked with in its stead, where the file's own is
#: missing or wrong, so that ``tripwire validate`` names the errors of the other parameters too.
_ACTION_STAND_INS: dict[str, dict[str, Any]] = {
    "notify": {"topic_arn": "arn:aws:sns:us-east-1:000000000000:tripwire-validate"},
}


def _as_run_by(framework: str | None) -> dict[str, Any]:
    """``check_config``'s arguments for a config as that integration's callback runs it (a rule
    set's members it can feed; a rule or collection it cannot feed is an error: trial 19b)."""
    if framework is None:
        return {}
    from tripwire.integrations._provides import PROVIDES

    return {"framework": framework, "provides": PROVIDES[framework]}


def _captured_text(config: Any, rules: list[Any], cols: list[str]) -> list[str]:
    """``cols`` as ``validate`` lists them: one the config does not name that rules ask for only as an
    optional need is named with them (trial 35j: ``optimizer``, which oscillating_loss reads where a
    training clips gradients or scales an fp16 loss, was listed as captured, and the run held none)."""
    out = []
    for name in cols:
        needs = [(r.name, req.optional) for r in rules for req in r.requirements() if req.collection == name]
        if name not in config.collections and needs and all(optional for _, optional in needs):
            who = list(dict.fromkeys(n for n, _ in needs))
            name = f"{name} (only what {', '.join(who)} read{'s' if len(who) == 1 else ''} where the training has it)"
        out.append(name)
    return out


def _captured_by(framework: str | None, cols: dict[str, Any]) -> list[str]:
    """The names of ``cols`` (a config's collections with its rules' needs) that a training of
    ``framework`` can capture: every one without ``--framework``; with it, those of a kind the
    integration captures (``losses`` and ``metrics`` everywhere) or of any kind (a custom collection
    without ``kinds``). Trial 32f F4: ``validate --framework xgboost`` of ``rules: [default]`` listed
    ``optimizer``, which ``oscillating_loss`` asks for as an optional requirement (its clipping
    limits) and no XGBoost run holds. A collection the config itself names that the framework cannot
    capture is refused before this (``check_config``)."""
    if framework is None:
        return list(cols)
    from tripwire.integrations._provides import PROVIDES

    have = set(PROVIDES[framework]) | {"losses", "metrics"}
    return [name for name, col in cols.items() if col.kinds is None or have & set(col.kinds)]


def _lacks_a_given_parameter(message: str, rule: Any) -> bool:
    """Whether ``message`` says that a parameter ``rule`` (a rule mapping of the file) gives a value
    is None: an error of a part checked without it, not of the file."""
    if not isinstance(rule, dict):
        return False
    return any(k != "name" and v is not None and re.search(rf"\.{re.escape(str(k))}: got None\b", message)
               for k, v in rule.items())


def _every_error(path: str, first: ConfigError, framework: str | None = None, text: str | None = None) -> list[str]:
    """Every error of a config file that fails, not only the first (a user fixed and re-ran once per
    error): each setting but collections and rules, then each collection and each rule on top
    of the valid part, checked apart. ``[str(first)]`` where the parts pass alone (an error between
    them, such as a rule that needs a mode the save disables) or the file is no mapping."""
    from ._config import Config, load_yaml, read_config_text
    from ._session import check_config

    try:
        if text is None:  # (given: a pipe's text, read once by the caller)
            text = read_config_text(path)
        data = load_yaml(text, path)
    except Exception:  # noqa: BLE001 - not readable or not YAML: the first error says so
        return [str(first)]
    if not isinstance(data, dict):
        return [str(first)]
    errors: list[str] = []
    as_run = _as_run_by(framework)

    def error_of(part: dict[str, Any]) -> str | None:
        """The error of ``part`` (as it names a rule checked alone: ``rules[0]``), or None where it is valid."""
        try:
            check_config(Config.from_dict(part), **as_run)  # (trial 23l: --framework gave the first error only)
        except ConfigError as exc:
            return str(exc)
        return None

    def note(message: str, rule_index: int) -> str:
        """``message`` noted once, a rule checked alone (as ``rules[0]``) named by its place in the
        file, ``rule_index``; returns it as noted."""
        message = message.replace("rules[0]", f"rules[{rule_index}]") if rule_index else message
        if message not in errors:
            errors.append(message)
        return message

    def check(part: dict[str, Any], rule_index: int = 0) -> bool:
        """``part`` valid? Else its error noted (:func:`note`)."""
        message = error_of(part)
        if message is None:
            return True
        note(message, rule_index)
        return False

    def narrow_action(action: dict[Any, Any], wrap: Callable[[Any], dict[str, Any]], rule_index: int) -> None:
        """``wrap(action)`` failed, ``action`` an action mapping (``{name: notify, topic_arn: ...}``, or
        ``{notify: {topic_arn: ...}}``): its parameters after the first error, each error's key left out
        (a required one given a valid stand-in) and the rest checked again, until they pass (trial
        26c: ``timeout: 0`` was named only once a mistyped ``regionn`` beside it was fixed)."""
        if isinstance(action.get("name"), str):
            name = action["name"]
            params = {k: v for k, v in action.items() if k != "name"}

            def build(p: dict[Any, Any]) -> dict[Any, Any]:
                return {"name": name, **p}
        elif len(action) == 1 and isinstance(next(iter(action.values())), dict):
            ((name, params),) = action.items()

            def build(p: dict[Any, Any]) -> dict[Any, Any]:
                return {name: p}
        else:
            return
        stand_ins = _ACTION_STAND_INS.get(name, {})
        current = {**{k: v for k, v in stand_ins.items() if k not in params}, **params}  # (a missing one: noted)
        for _ in range(len(current)):
            message = error_of(wrap(build(current)))
            if message is None:
                return
            message = note(message, rule_index)
            named = re.search(r"\bactions\[0\]\.(\w+)", message)
            key = named.group(1) if named else None
            if key not in current:
                return  # (an error of the whole action: nothing of it left out can be checked)
            if key in stand_ins and current[key] != stand_ins[key]:
                current[key] = stand_ins[key]
            else:
                del current[key]

    def narrow(whole: Any, wrap: Callable[[Any], dict[str, Any]], keep: tuple[str, ...] = (), rule_index: int = 0,
               key: str = "", depth: int = 0) -> None:
        """``wrap(whole)`` failed: each key of a mapping (with ``keep``, which a part needs to be
        checked at all: a custom collection's ``include``) and each item of a list apart, and so on
        inside the parts that fail, for the errors after the first (``save.modes.eval`` with two bad
        keys, ``reductions: [l3, histgram]``). A list's item is checked as a list of one, and its
        error renamed from ``key[0]`` to its place in the list."""
        if depth > 4 or (key in _ONE_VALUE and not isinstance(whole, list)):
            return
        if key == "actions" and isinstance(whole, dict):  # one action, not in a list
            narrow_action(whole, wrap, rule_index)
        elif isinstance(whole, dict) and keep[:1] == ("name",) and "name" not in whole:
            # a rule mapping with no 'name' key (the one-key form with keys beside it): its own error says
            # so, and its keys alone name no rule either (trial 40d F2: a second "needs a 'name' key, got
            # {'patience': 2}", quoting a part of the entry)
            return
        elif isinstance(whole, dict):
            # a custom collection is checked with its reductions too: without them it would store
            # nothing, an error of the part, not of the file (trial 20d: a bad key beside valid
            # reductions added "reductions: got []")
            extra = ("reductions",) if "include" in keep else ()
            kept = {k: whole[k] for k in keep + extra if k in whole}
            if kept and keep[:1] == ("name",) and "rule_name" in kept and not check(wrap(kept), rule_index):
                # a rule_name that fails (its error noted): the entry's other keys checked under its name alone
                # (trial 41k: {rule_name: 5} alone was "a rule mapping needs a 'name' key", and patiense was hidden)
                kept = {"name": kept["name"]}
                if error_of(wrap(kept)) is not None:
                    return
            elif kept and not check(wrap(kept), rule_index):  # the kept keys fail themselves: their error noted
                stand_in = ({"include": [".*"]} if "include" in kept else {}) | (
                    {"reductions": ["l2"]} if "reductions" in kept else {})
                if len(kept) > 1:  # each apart too, the others valid: the first error hid the next (trial 22k)
                    for k in kept:
                        check(wrap({**{o: v for o, v in stand_in.items() if o != k}, k: kept[k]}), rule_index)
                kept = stand_in
                if keep[:1] == ("name",):
                    return  # a rule without a valid name: nothing else of it can be checked
            for k, value in whole.items():
                if k not in keep and not check(wrap({**kept, k: value}), rule_index) and not unknown(k):
                    narrow(value, lambda part, k=k: wrap({**kept, k: part}), (), rule_index, k, depth + 1)
        elif isinstance(whole, list) and (len(whole) > 1 or key == "actions") and key in _ITEM_LISTS:
            valid: list[int] = []
            for i, item in enumerate(whole):
                before = len(errors)
                if check(wrap([item]), rule_index):
                    valid.append(i)
                    continue
                if key == "actions" and isinstance(item, dict):  # an action's parameters one by one
                    narrow_action(item, lambda action: wrap([action]), rule_index)
                if i and key:
                    renamed = [e.replace(f"{key}[0]", f"{key}[{i}]", 1) for e in errors[before:]]
                    errors[before:] = [e for e in renamed if e not in errors[:before]]
            if key == "actions" and len(valid) > 1:
                # the valid ones together: an action listed twice is an error of the list, which no item
                # alone has (trial 42f: [{name: log, level: LOUD}, record, record] named the level only),
                # each one named, the one named left out for the next (trial 42h: only the first was)
                while len(valid) > 1:
                    message = error_of(wrap([whole[i] for i in valid]))
                    again = re.match(r".*?\bactions\[(\d+)\]: got .*, listed already", message or "")
                    if message is None:
                        break
                    note(re.sub(r"\bactions\[(\d+)\]", lambda m: f"actions[{valid[int(m.group(1))]}]", message),
                         rule_index)
                    if again is None:
                        break
                    del valid[int(again.group(1))]

    def unknown(key: Any) -> bool:
        """The last error noted is that ``key`` is unknown: its value is not narrowed (trial 35a: smdebug's
        ``reduction_config: {reductions: [mean], norms: [l2]}`` was three errors, one per part of it)."""
        return bool(errors) and f"unknown key {str(key)!r}" in errors[-1]

    # each setting apart (an out_dir, an actions list and a save section can each be wrong; a
    # section's keys apart too), then the valid ones together
    base = {}
    for key, value in data.items():
        if key in ("collections", "rules"):
            continue
        if check({key: value}):
            base[key] = value
        elif not unknown(key):
            narrow(value, lambda part, key=key: {key: part}, key=key)
    if not check(base):
        base = {}
    cols = data.get("collections")
    kept: Any
    if isinstance(cols, dict):
        good = []
        for name, spec in cols.items():
            if check({**base, "collections": {name: spec}}):
                good.append((name, spec))
            else:
                narrow(spec, lambda part, name=name: {**base, "collections": {name: part}}, keep=("include", "kinds"))
        kept = dict(good)
    elif isinstance(cols, list):
        # each entry apart, as a list of one, its error renamed to its place (trial 25g: an entry that
        # is a mapping, unhashable, was made a mapping key here: a TypeError traceback, exit 1)
        kept = []
        for i, item in enumerate(cols):
            before = len(errors)
            if check({**base, "collections": [item]}):
                kept.append(item)
            elif i:
                renamed = [e.replace("collections[0]", f"collections[{i}]", 1) for e in errors[before:]]
                errors[before:] = [e for e in renamed if e not in errors[:before]]
    else:  # (null: the defaults; anything else is one value, right or wrong)
        kept = cols if cols is None or check({**base, "collections": cols}) else None
    rules = data.get("rules")
    good_rules: list[tuple[int, Any]] = []
    if rules is not None and not isinstance(rules, (list, str, dict)):  # (rules: 5: an error of the key itself)
        check({**base, "collections": kept, "rules": rules})
        rules = None
    for i, rule in enumerate(rules if isinstance(rules, list) else [] if rules is None else [rules]):
        before = len(errors)
        if not check({**base, "collections": kept, "rules": [rule]}, i):
            # (a function's rule_name is part of its name: trial 41i, checked without it each error came twice,
            # the second under the function's name, and two entries of one function were "listed already")
            own = ("rule_name",) if isinstance(rule, dict) and "rule_name" in rule else ()
            narrow(rule, lambda part, i=i: {**base, "collections": kept, "rules": [part]}, keep=("name", *own),
                   rule_index=i)
            # (trial 29d: the narrowing checks a rule by its name alone, where a required parameter the
            # file gives, similar_across_runs' other, was missing: "other: got None" beside its real error)
            errors[before + 1:] = [e for e in errors[before + 1:] if not _lacks_a_given_parameter(e, rule)]
            if isinstance(rule, dict) and isinstance(rule.get("name"), str):  # (by its name alone, where that builds)
                alone = {"name": rule["name"], **{k: rule[k] for k in own}}
                with contextlib.suppress(Exception):
                    check_config(Config.from_dict({**base, "collections": kept, "rules": [alone]}), **as_run)
                    good_rules.append((i, alone))
        else:
            good_rules.append((i, rule))
    while len(good_rules) > 1:
        # the rules that pass alone (or by their names), together: an error between them (one rule listed twice) is named
        # with the others (trial 21b: it came only once the others were fixed), by their places in the file; the
        # entry it names first is left out and the rest checked again, for the next such error (trial 21d)
        try:
            check_config(Config.from_dict({**base, "collections": kept, "rules": [r for _, r in good_rules]}), **as_run)
            break
        except ConfigError as exc:
            named = re.match(r"rules\[(\d+)\]", str(exc))
            message = re.sub(r"rules\[(\d+)\]", lambda m: f"rules[{good_rules[int(m.group(1))][0]}]"
                             if int(m.group(1)) < len(good_rules) else m.group(0), str(exc))
            if message not in errors:
                errors.append(message)
            if named is None or int(named.group(1)) >= len(good_rules):
                break
            del good_rules[int(named.group(1))]
    return errors or [str(first)]


def _cmd_report(args: argparse.Namespace) -> int:
    """``tripwire report PATH``: issue 2 names a ``report`` verb; a run directory gets ``inspect``'s
    report, a tuning journal ``tune-report``'s. Options of the other kind are refused by name."""
    from ._config import url_refusal
    from ._run import SQLITE_HEADER

    path = args.path
    remote = url_refusal(path)
    if remote is not None:  # (trial 27c: "does not exist", where inspect, watch and plot said this)
        raise ConfigError(f"path={path!r}: {remote}; accepted: a local run directory (a callback's out_dir) or a "
                          f"tuning job's SQLite journal")
    json_out = getattr(args, "json", False)
    if os.path.isdir(path):
        misplaced = [flag for flag, given in (("--top", args.top is not None), ("--full-only", args.full_only),
                                              ("--errors", args.errors), ("--csv", args.csv)) if given]
        if misplaced:
            raise ConfigError(f"{', '.join(misplaced)}: {path!r} is a run directory; accepted for a run: --tensors, "
                              f"--regex, --json (--top, --full-only, --errors and --csv are for a tuning journal)")
        return _cmd_inspect(argparse.Namespace(run=path, tensors=args.tensors, regex=args.regex, width=None,
                                               json=json_out))
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        raise ConfigError(f"path={path!r} does not exist; accepted: a run directory (a callback's out_dir) or a "
                          f"tuning job's SQLite journal") from None
    except OSError as exc:
        raise ConfigError(f"path={path!r} cannot be read ({exc.strerror}); accepted: a run directory or a tuning "
                          f"job's SQLite journal") from None
    if head != SQLITE_HEADER:
        raise ConfigError(f"path={path!r} is a file but not a SQLite journal; accepted: a run directory (a "
                          f"callback's out_dir) or a tuning job's SQLite journal")
    misplaced = [flag for flag, given in (("--tensors", args.tensors), ("--regex", args.regex is not None)) if given]
    if misplaced:
        raise ConfigError(f"{', '.join(misplaced)}: {path!r} is a tuning journal; accepted for a journal: --top, "
                          f"--full-only, --errors, --json, --csv (--tensors and --regex are for a run directory)")
    from .tune._cli import _count, _report

    try:
        top = 5 if args.top is None else _count(args.top)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--top: {exc}") from None
    # (--json: tune-report --json's object; trial 27c: refused, tune-report had no JSON output)
    return _report(argparse.Namespace(journal=path, top=top, full_only=args.full_only, errors=args.errors,
                                      json=json_out, csv=args.csv, command="report"))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tripwire",
        description="Catch broken training runs while they run, and tune the ones worth keeping.",
        epilog="Exit status: each command's --help ends with its own; 2 is bad input for every command (the "
               "reason on stderr, one line; tripwire validate lists each error of a config on a line of its own "
               "under a header line), and no command given. The commands, their --json output and what goes to "
               "stdout and stderr: docs/cli.md.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"tripwire {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("inspect", help="show the steps, collections, tensors and findings of a stored run",
                       epilog=exit_codes("0 shown", f"{EXIT_BAD_INPUT}: no run at RUN, a URL (runs are local), a bad "
                                                        "--regex or one that matches no tensor, a file of the run "
                                                        "that cannot be read, a corrupt run"))
    p.add_argument("run", help="the run directory (out_dir)")
    p.add_argument("--tensors", action="store_true", help="list every tensor with its reductions")
    p.add_argument("--regex", default=None,
                   help="list the tensors matching this regular expression (re.search; implies --tensors)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout instead of the tables (its keys: docs/cli.md)")
    p.add_argument("--width", type=typed(int, "an integer (columns)"), default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_inspect)
    p = sub.add_parser("validate", help="check a YAML config and the rules it names",
                       epilog=exit_codes("0 valid", "2 bad input: the config is not valid or cannot be read, the "
                                                    "reason on stderr: one line for one error; for several, a line "
                                                    "'N errors in CONFIG:' and one indented line per error"))
    p.add_argument("config", help="path to the YAML config")
    p.add_argument("--framework", choices=("keras", "lightning", "mxnet", "xgboost"), default=None,
                   help="check it as that integration's callback would: refuse what it cannot feed, and list the "
                        "rules it runs (a rule set's members it can feed)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout, valid or not (its keys: docs/cli.md); the exit status and "
                        "stderr are as without it")
    p.set_defaults(func=_cmd_validate)
    p = sub.add_parser("report", help="the summary of a run directory (as inspect) or of a tuning journal (as "
                                      "tune-report), by what PATH is",
                       description="The summary of PATH: a run directory (out_dir) is reported as `tripwire inspect` "
                                   "reports it, a tuning job's SQLite journal as `tripwire tune-report` does.",
                       epilog=exit_codes("0 reported", "1 (a journal) the job ended and no trial returned an objective "
                                                       "(every finished trial failed), as tripwire tune-report",
                                         f"{EXIT_BAD_INPUT}: neither a run nor a journal, an option of the other kind"))
    p.add_argument("path", help="a run directory (out_dir) or a tuning journal (SQLite file)")
    p.add_argument("--tensors", action="store_true", help="(a run) list every tensor with its reductions")
    p.add_argument("--regex", default=None, help="(a run) list the tensors matching this regular expression")
    p.add_argument("--top", default=None, help="(a journal) list the N best trials (default 5)")
    p.add_argument("--full-only", action="store_true",
                   help="(a journal) rank only the trials that completed at max_resource (as tune-report --full-only)")
    p.add_argument("--errors", action="store_true", help="(a journal) print the traceback of every failed trial")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the text: inspect --json's "
                                                       "for a run, tune-report --json's for a journal")
    p.add_argument("--csv", action="store_true", help="(a journal) print every trial as CSV (as tune-report --csv)")
    p.set_defaults(func=_cmd_report)
    for module, attr in _PROVIDERS:
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            if exc.name is not None and module.startswith(exc.name):
                continue  # this provider is not part of the installed package
            _unavailable(sub, module, exc)
            continue
        getattr(mod, attr)(sub)
    return parser


#: What a command that needs a missing extra does, for its ``--help``.
_HELP_OF_UNAVAILABLE = {"demo": "A real Lightning run (an MLP on scikit-learn's digits) with a planted fault, stopped "
                                "early by a rule; --healthy runs the fixed twin to completion (the README's quick "
                                "start)."}


def _unavailable(sub: Any, module: str, exc: ImportError) -> None:
    """A provider whose optional dependency is missing: its command says what to install."""
    names = {"tripwire.integrations.lightning._demo": "demo"}
    name = names.get(module)
    if name is None:
        return
    # whatever options follow (the real command's, --help too) get the install hint, not
    # "unrecognized arguments: --healthy" (trial 19f): nothing is parsed as an option here
    p = sub.add_parser(name, help=f"(unavailable: {exc})", prefix_chars="\0", add_help=False)
    p.add_argument("options", nargs="*", help=argparse.SUPPRESS)

    def fail(args: argparse.Namespace) -> int:
        if any(o in ("-h", "--help") for o in args.options):  # (trial 23g: every other verb's --help works)
            print(f"usage: tripwire {name} [options]\n\n{_HELP_OF_UNAVAILABLE.get(name, name)}\n\n"
                  f"unavailable here: {exc}")
            return 0
        print(f"tripwire {name}: error: {exc}", file=sys.stderr)  # (as every verb: trial 29k)
        return 2

    p.set_defaults(func=fail)


def _pipe_console_class() -> Any:
    from rich.console import Console

    class PipeConsole(Console):
        """rich exits with status 1 when the reader of its pipe goes away (``| head``): raise
        BrokenPipeError instead, which :func:`main` treats as the end of the output (status 0)."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return PipeConsole


def _console(**kwargs: Any) -> Any:
    """A rich Console whose closed pipe ends the output quietly (rich imports on first use)."""
    return _pipe_console_class()(**kwargs)


#: what ipykernel sets in its environment for the commands a notebook runs (``!tripwire ...``,
#: ``subprocess``): ipykernel's ``ZMQInteractiveShell.init_environment`` (every version; 6 and later add
#: ``FORCE_COLOR`` and ``CLICOLOR_FORCE``). A terminal does not set ``TERM=xterm-color`` with both pagers ``cat``.
JUPYTER_KERNEL_ENV = {"TERM": "xterm-color", "CLICOLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat"}


def under_jupyter_kernel(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process was started by a Jupyter kernel (IPython's ``!`` in a notebook,
    ``subprocess`` in a cell): its environment holds what ipykernel sets for its commands
    (:data:`JUPYTER_KERNEL_ENV`). ``!`` runs a command on a pseudo-terminal of 80 columns, and
    ipykernel sets ``FORCE_COLOR=1``, so rich drew an 80-column table with colour codes (trial 30f
    F7), where a notebook shows a command's output as text of any width."""
    env = os.environ if environ is None else environ
    return all(env.get(k) == v for k, v in JUPYTER_KERNEL_ENV.items())


PIPED_WIDTH = 200
"""The width of ``tripwire inspect``'s console and of the tuner's live view where the output is piped
or shown by a Jupyter kernel: whole numbers and names instead of an 80-column cut."""


def _inspect_console(width: int | None) -> Any:
    """``tripwire inspect``'s console: ``width`` columns where given (the hidden ``--width``); piped
    or redirected, or run by a Jupyter kernel (:func:`under_jupyter_kernel`), :data:`PIPED_WIDTH` (200) columns (whole
    names and lists, not an 80-column terminal's cut) unless ``COLUMNS`` says, and under a kernel
    no colour codes, whatever its ``FORCE_COLOR=1`` asks (as piped: docs/cli.md); else rich's own
    (the terminal's width, ``COLUMNS``, ``NO_COLOR``)."""
    notebook = under_jupyter_kernel()
    if width is None and (notebook or not sys.stdout.isatty()) and not os.environ.get("COLUMNS"):
        width = PIPED_WIDTH
    return _console(width=width, force_terminal=False) if notebook else _console(width=width)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if getattr(args, "command", None) == "plot" and not any(a.startswith("-") for a in extra):
            # trial 23a: ``plot RUN loss --mode eval val_loss``: a tensor after an option is a tensor
            args.tensors.extend(extra)
        else:  # (the verb's own usage and name, not the top-level ones)
            verbs = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
            verbs.get(getattr(args, "command", None), parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        # (trial 27c: the whole --help on stdout, nothing on stderr)
        verbs = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
        print(f"tripwire: error: no command given; accepted: {', '.join(verbs)} (tripwire --help says what each "
              f"does)", file=sys.stderr)
        return 2
    added: list[str] = []  # (taken off sys.path again at the end: main() called in a program or a test)
    if os.getcwd() not in sys.path and "" not in sys.path:
        # ``module:attribute`` rules and actions import from the current directory, as with ``python
        # -m`` (a run's own rules in ``tripwire watch RUN`` too, as ``validate`` and ``rules`` did)
        added.append(os.getcwd())
    config = getattr(args, "config", None)
    if isinstance(config, str) and os.path.isfile(config) and args.command != "validate":
        # ``module:attribute`` rules and actions next to the YAML import as they do for tripwire tune:
        # watch and tune run the rules themselves, in this process. Not for validate, which checks a
        # config as a training started here imports it (trial 26f: validate passed a rule beside the
        # YAML that the callback, from the same directory, could not import)
        added.append(os.path.dirname(os.path.abspath(config)))
    for folder in added:
        sys.path.insert(0, folder)
    try:
        return _run_verb(args)
    finally:
        for folder in added:
            if folder in sys.path:
                sys.path.remove(folder)


def _run_verb(args: argparse.Namespace) -> int:
    """Run the parsed verb; its exit status (errors printed as one line, never a traceback)."""
    try:
        with _unencodable_escaped():
            rc = int(args.func(args) or 0)
            sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return rc
    except BrokenPipeError:  # ``tripwire rules | head``: the reader went away, not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except TripwireError as exc:
        print(f"tripwire {args.command}: error: {error_text(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"tripwire {args.command}: error: {os_error_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


#: What a command line can give where the Python API takes more (a mapping, a Config, None): said so.
_PYTHON_ONLY = re.compile(r"; accepted: the path of (a (?:local )?YAML file), a mapping, a Config or None(?: \((?:the defaults)\))?")


def error_text(exc: TripwireError) -> str:
    """What a verb prints after ``tripwire VERB: error: `` for ``exc`` (exit status 2): one line
    (:func:`one_line`), but for :class:`ErrorList` (a header line and one line per error). A config
    error's accepted forms are those a command line can give (trial 37l: "a mapping, a Config or
    None (the defaults)" of a missing config file)."""
    return str(exc) if isinstance(exc, ErrorList) else cli_line(str(exc))


def cli_line(message: str) -> str:
    """``message`` as a verb prints it: one line (:func:`one_line`), a config's accepted forms those a
    command line can give (see :func:`error_text`)."""
    return _PYTHON_ONLY.sub(r"; accepted: the path of \1", one_line(message))


def os_error_text(exc: OSError) -> str:
    """One line for a file the verb could not read or write (trial 27c: a run's findings file that
    was a directory gave a traceback and exit 1): the path, the system's reason and what to check."""
    where = f"{exc.filename!r}" if exc.filename is not None else "a file"
    if exc.filename2 is not None:
        where += f" -> {exc.filename2!r}"
    why = exc.strerror or one_line(str(exc)) or type(exc).__name__
    return (f"{where} cannot be used: {why}; accepted: a file tripwire can read there (or write: a plot, a watch's "
            f"findings); {_OS_ERROR_HINTS.get(exc.errno, 'check the file, its folder and its disk')}")


#: what to check for an ``OSError`` of a verb (:func:`os_error_text`), by errno (trial 28f: a
#: read-only run's "Read-only file system" was followed by "something else replaced it")
_OS_ERROR_HINTS: dict[int | None, str] = {
    errno.EROFS: "the file system is read-only (a read-only mount)",
    errno.EACCES: "its permissions (or its folder's) refuse it",
    errno.EPERM: "its permissions (or its folder's) refuse it",
    errno.EISDIR: "something else is in its place (a folder where a file belongs)",
    errno.ENOTDIR: "something else is in its place (a file where a folder belongs)",
    errno.EEXIST: "something else is in its place (a file where a folder belongs)",
    errno.ENOENT: "it (or its folder) was removed",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
}


@contextlib.contextmanager
def _unencodable_escaped() -> Iterator[None]:
    """While a verb runs, a character stdout's encoding cannot write (a run path or tensor name in
    Unicode, an ASCII or latin-1 console, ``PYTHONIOENCODING=ascii`` in CI) is written as a
    backslash escape (``\\xfc``), as stderr does by default, not a UnicodeEncodeError traceback and
    exit 1 (trial 27c). The stream's own setting comes back after."""
    stream = sys.stdout
    before = getattr(stream, "errors", None)
    changed = False
    if before in ("strict", None) and hasattr(stream, "reconfigure"):
        with contextlib.suppress(Exception):  # (a stream that cannot change: left as it is)
            stream.reconfigure(errors="backslashreplace")
            changed = True
    try:
        yield
    finally:
        if changed:
            with contextlib.suppress(Exception):
                stream.reconfigure(errors=before)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
