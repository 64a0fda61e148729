"""Results of a tuning job: one :class:`TrialRecord` per trial, the best one, resource accounting.

``resource_used`` is the sum of the resource each trial consumed (its last reported step; a trial
that never reported counts ``max_resource``). ``resource_lost``: the units of attempts that a killed
or interrupted tuner left running and a resume reran (the journal's meta ``resource_lost``), and,
read from a journal whose tuner is gone (``kill -9``), those of the trials it left ``running``, which a
resume will rerun (``resource_interrupted``: trial 30e, they showed as used until the resume, and
then as lost); they count nowhere but in ``max_total_resource``, which counts ``resource_used +
resource_lost``.
``resource_without_early_stopping`` is what the same trials would have used had none been stopped
early: ``max_resource`` for each completed or stopped trial, the resource actually used for a
failed one. ``best`` is the best final objective among completed and stopped trials (ties: lowest
trial number), leaving out the trials a tripwire rule stopped (``TrialRecord.rule`` set): a broken
run is not a candidate. ``best_full`` (and ``ranked(full_only=True)``) ranks only the trials that
ran their full budget: ``completed`` at ``max_resource``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from tripwire._config import url_refusal
from tripwire._errors import missing_extra

from ._errors import ConfigError, error_summary
from ._format import format_value
from ._journal import Journal

__all__ = ["TrialRecord", "TuningResult"]

STATUSES = ("pending", "running", "completed", "stopped", "failed")
#: dtype of ``dataframe()``'s ``start`` and ``end`` columns, whatever the trials hold
DATETIME_DTYPE = "datetime64[us, UTC]"


#: What to do instead of a URL as a journal (after "remote stores such as s3:// are not supported; ").
JOURNAL_URL_THEN = ("a journal is a local SQLite file: run the job on a local path, and copy the journal to the "
                    "store once the job ended (or back it up while it runs: sqlite3 tuning.db \".backup copy.db\")")


def journal_url_problem(path: Any, key: str) -> str | None:
    """Why ``path`` (a str or os.PathLike) cannot be a journal because it is a URL (``s3://b/x.db``,
    ``gs://...``, ``file:///x.db``, and the one-slash form ``s3:/b/x.db`` that ``os.path.normpath``
    and ``pathlib`` make of ``s3://b/x.db``), in words naming ``key``, the value and what is
    accepted; None for a local path (trial 28f: ``journal="s3://runs/tuning.db"`` was told to create
    a local folder ``s3:/runs``, and wrote the journal there where one existed)."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    why = url_refusal(path, then=JOURNAL_URL_THEN)
    if why is None:
        return None
    return f"{key}: got {os.fspath(path)!r}; accepted: a local file path ({why})"


def check_journal_arg(path: Any, owner: str) -> None:
    """``path`` names a journal to read: a non-empty str or os.PathLike that is not a URL
    (:func:`journal_url_problem`), else a :class:`ConfigError` naming ``owner``, the value and what is
    accepted (trial 24f: ``TuningResult.from_journal(None)`` was "TypeError: expected str, bytes or
    os.PathLike object")."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ConfigError(f"{owner}: got {path!r}; accepted: the path of a tuning job's journal (a str or "
                          f"os.PathLike: the Tuner's journal=, or a result's TuningResult.journal)")
    problem = journal_url_problem(path, owner)
    if problem is not None:
        raise ConfigError(problem)


def _float(x: Any) -> float:
    return math.nan if x is None else float(x)


@dataclass(frozen=True)
class TrialRecord:
    """One trial as journaled."""

    number: int
    params: dict[str, Any]
    status: str
    value: float | None
    metrics: dict[str, Any] | None
    resource: int
    bracket: int
    rung: int
    reason: str | None
    error: str | None
    attempt: int
    started: float | None
    ended: float | None
    rule: str | None = None   # the tripwire rule that stopped the training, if one did

    @property
    def objective(self) -> float | None:
        """The final objective: ``value`` (the name of its ``dataframe()`` column)."""
        return self.value

    @property
    def rankable(self) -> bool:
        """Completed or stopped with an objective (not NaN), and not stopped by a tripwire rule (a
        broken run, never the best): a candidate for :attr:`TuningResult.best`."""
        return (self.status in ("completed", "stopped") and self.rule is None and self.value is not None
                and not math.isnan(self.value))

    @property
    def elapsed(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started


def ended_before_any_trial(result: "TuningResult") -> bool:
    """The job ended on a completion criterion (``result.halt``: ``max_wall_time`` spent by the
    workers' start-up and ``setup()``, say) before any trial started, and no tuner runs it now: no
    trial returned an objective (trial 25f: its summary said "best: none yet", as for a job just
    started, and ``tripwire tune`` exited 0)."""
    h = result.holder
    return not result.trials and result.halt is not None and not (h is not None and h.get("alive"))


class TuningResult:
    """What :meth:`Tuner.fit` returns (also built from a journal by :meth:`from_journal`)."""

    def __init__(self, trials: list[TrialRecord], objective: str, mode: str, max_resource: int | None,
                 job: dict[str, Any] | None = None, journal: str | None = None, halt: str | None = None,
                 resource_lost: int = 0) -> None:
        self.trials = trials
        self.halt = halt   # why the job stopped before max_jobs (a completion criterion, fail-fast), if it did
        self.objective = objective
        self.mode = mode
        self.max_resource = max_resource
        self.job = job or {}
        self.journal = journal
        #: Units trained by attempts that were interrupted (the tuner killed or stopped while they ran)
        #: and rerun by a resume: not in :attr:`resource_used`, counted by ``max_total_resource``
        #: (trial 25f: "max_total_resource=60 reached" was shown next to "resource used: 55")
        self.resource_lost = int(resource_lost)
        #: Of :attr:`resource_lost`, the units of the trials that a tuner no longer running left
        #: ``running`` (a ``kill -9``): a resume reruns them from scratch and counts their units as lost,
        #: so they are not in :attr:`resource_used` (:meth:`from_journal` sets it; 0 otherwise). A trial
        #: told to stop already is not one of them: a resume ends it with its units as used.
        self.resource_interrupted = 0
        #: How many trials left ``running`` by a tuner no longer running a resume reruns (see above)
        self._interrupted_trials = 0
        #: The trials left ``running`` by a tuner no longer running that it had told to stop: a resume
        #: ends them ``stopped``, their units as used (trial 37e: counted at their units, not at
        #: ``max_resource``, in :attr:`resource_without_early_stopping`)
        self._told_to_stop: frozenset[int] = frozenset()
        #: The tuner holding the journal's lock when it was read (:meth:`from_journal`):
        #: ``{"pid", "host", "alive"}`` (``alive`` False: that tuner was killed outright, ``kill -9``,
        #: and left its lock row; trial 31g), or None (no tuner holds it: the job ended, or its tuner
        #: was stopped by Ctrl-C or SIGTERM, which release it). A journal copied while its job ran adds
        #: ``"copy_of"``, the original's path (the row is the original's, ``alive`` False: no tuner
        #: runs the copy; trial 28b).
        self.holder: dict[str, Any] | None = None

    @classmethod
    def from_journal(cls, path: str | os.PathLike[str]) -> "TuningResult":
        check_journal_arg(path, "TuningResult.from_journal")
        with Journal(path, readonly=True) as j:
            job = j.job or {}
            rows = j.trials()
            halt = j.get_meta("halt")
            holder = j.holder()
            lost = j.get_meta("resource_lost", 0)
            interrupted: list[dict[str, Any]] = []
            told: set[int] = set()
            if not (holder is not None and holder.get("alive")) and any(r["status"] == "running" for r in rows):
                # no tuner runs the job: its running trials were interrupted (kill -9). A resume reruns them and
                # counts their units as lost, except those told to stop already (ended with their units as used)
                told = {t["number"] for t in j.told_to_stop()}
                interrupted = [r for r in rows if r["status"] == "running" and r["number"] not in told]
        trials = [TrialRecord(**{**r, "value": r["value"]}) for r in rows]
        strat = job.get("strategy", {})
        units = sum(int(r["resource"] or 0) for r in interrupted)
        result = cls(trials, job.get("objective", "objective"), job.get("mode", "max"), strat.get("max_resource"),
                     job, str(path), halt, int(lost or 0) + units)
        result.holder = holder
        result.resource_interrupted = units
        result._interrupted_trials = len(interrupted)
        result._told_to_stop = frozenset(r["number"] for r in rows if r["status"] == "running" and r["number"] in told)
        return result

    def earlier_reports(self, number: int | None = None) -> list[tuple[int, int, int, float, float, bool, str]]:
        """``(trial, attempt, step, value, time, stop, reason)`` rows, read from the job's journal: the
        reports of attempts that a killed tuner interrupted and a resume reran (of trial ``number``,
        or of every trial). They count nowhere: the rerun reported afresh. ``[]`` for a result that
        has no journal (trial 22e: the docs named a ``Journal`` that is not public)."""
        if self.journal is None or not os.path.exists(self.journal):
            return []
        with Journal(self.journal, readonly=True) as j:
            return j.earlier_reports(number)

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.mode == "max" else a < b

    @property
    def best(self) -> TrialRecord | None:
        """Best completed or stopped trial, or ``None``; a trial a tripwire rule stopped is left out.
        With Hyperband, a trial that a completion criterion (``max_total_resource``,
        ``max_wall_time``...) cut short below ``min_resource`` (the least training the job deems
        meaningful) is best only when no trial reached ``min_resource``. The first of
        :meth:`ranked`."""
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def full_budget(self, t: TrialRecord) -> bool:
        """Whether trial ``t`` ran its full budget: ``completed`` at ``max_resource`` (its last
        reported step, or no report at all: charged ``max_resource``), with an objective and not
        stopped by a tripwire rule; where the strategy has no ``max_resource``, every such
        ``completed`` trial (none was stopped early but by a completion criterion)."""
        return t.rankable and t.status == "completed" and (self.max_resource is None
                                                              or t.resource >= self.max_resource)

    def ranked(self, full_only: bool = False) -> list[TrialRecord]:
        """The candidates of :attr:`best`, best objective first (ties: the lower trial number):
        completed or stopped trials with an objective, not stopped by a tripwire rule
        (``tripwire tune-report --top``'s list); with Hyperband, those a completion criterion cut
        short below ``min_resource`` come after the others, where any reached it. ``full_only=True``: only the trials that ran
        their full budget (:meth:`full_budget`: ``completed`` at ``max_resource``), leaving out
        those early-stopped at a rung (trial 29c: for a metric that does not improve with the
        resource, the best trial may be one stopped after 1 of 27 epochs)."""
        if not isinstance(full_only, bool):
            raise ConfigError(f"TuningResult.ranked: full_only={full_only!r}; accepted: True (only the trials "
                              "completed at max_resource) or False (every candidate of best)")
        chosen = [t for t in self.trials if (self.full_budget(t) if full_only else t.rankable)]
        # after the others, as best has them (trial 36a: --top listed first a trial cut short below
        # min_resource, under a best that was another): those cut short below min_resource
        floor = (self.job or {}).get("strategy", {}).get("min_resource") or 0
        reached = any(t.resource >= floor for t in chosen)
        return sorted(chosen, key=lambda t: (reached and t.resource < floor,  # type: ignore[operator]
                                             t.value if self.mode == "min" else -t.value, t.number))  # type: ignore

    @property
    def best_full(self) -> TrialRecord | None:
        """The best trial among those that ran their full budget (``completed`` at
        ``max_resource``, :meth:`full_budget`), or None where none did: :attr:`best` may be a trial
        early-stopped at a low rung, which trained for a fraction of the budget (Optuna's
        ``best_trial`` leaves pruned trials out likewise)."""
        ranked = self.ranked(full_only=True)
        return ranked[0] if ranked else None

    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(STATUSES, 0)
        for t in self.trials:
            c[t.status] = c.get(t.status, 0) + 1
        return c

    @property
    def resource_used(self) -> int:
        """The trials' units: the sum of their ``resource``, less :attr:`resource_interrupted` (the
        units of attempts that a tuner no longer running left running, lost once a resume reruns them)."""
        return sum(t.resource for t in self.trials) - self.resource_interrupted

    @property
    def resource_without_early_stopping(self) -> int:
        if self.max_resource is None:
            return self.resource_used
        return sum(self.max_resource if t.status in ("completed", "stopped") or t.number in self._told_to_stop
                   else t.resource for t in self.trials) - self.resource_interrupted

    def dataframe(self) -> Any:
        """One row per trial: ``number``, the hyperparameters (``param_<name>`` where a name is one of
        the fixed columns), ``status``, ``objective``, ``resource``, ``bracket``, ``rung``, ``start``,
        ``end`` (UTC), ``elapsed_s``, ``reason``, ``error``, ``attempt``, ``rule`` (the tripwire rule
        that stopped the training, or None), then ``metric:<key>`` for every key of the dicts ``train``
        returned. A column that holds text (``status``, ``reason``, ``error``, ``rule``, a str
        hyperparameter or metric) has dtype object and None where a row has no value; a numeric
        column has NaN there (``objective`` of a failed trial, a metric a trial did not return). The
        fixed columns' dtypes do not depend on the trials: ``objective`` and ``elapsed_s`` float64
        (NaN where missing), ``start``/``end`` datetime64[us, UTC] (NaT), the counts int64.
        ``rung``: how many rungs of its bracket the trial reached (passed, or was stopped at); 0 for a
        trial stopped or ended below its bracket's first rung. Needs pandas."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise missing_extra("pandas", "pandas", exc) from None
        fixed = ("number", "status", "objective", "resource", "bracket", "rung", "start", "end", "elapsed_s",
                 "reason", "error", "attempt", "rule")
        metric_keys = sorted({k for t in self.trials for k in (t.metrics or {})})
        names = sorted({k for t in self.trials for k in t.params})
        col = {n: (f"param_{n}" if n in fixed else n) for n in names}

        rows = []
        for t in self.trials:
            row: dict[str, Any] = {"number": t.number}
            row.update({col[n]: t.params.get(n) for n in names})
            row.update({"status": t.status, "objective": t.value, "resource": t.resource, "bracket": t.bracket,
                        "rung": t.rung, "start": t.started, "end": t.ended, "elapsed_s": t.elapsed,
                        "reason": t.reason, "error": t.error, "attempt": t.attempt, "rule": t.rule})
            row.update({f"metric:{k}": (t.metrics or {}).get(k) for k in metric_keys})
            rows.append(row)
        df = pd.DataFrame(rows, columns=["number", *col.values(), *fixed[1:],
                                         *(f"metric:{k}" for k in metric_keys)])
        for c in df.columns:  # text columns keep None for a missing value (pandas would make it NaN)
            values = [row.get(c) for row in rows]
            if any(isinstance(v, str) for v in values):
                df[c] = pd.Series(values, index=df.index, dtype=object)
        # the fixed columns' dtypes do not depend on how the job went (all failed, none ended yet...)
        for c in ("number", "resource", "bracket", "rung", "attempt"):
            df[c] = df[c].astype("int64")
        for c in ("objective", "elapsed_s"):
            df[c] = pd.Series([_float(row[c]) for row in rows], index=df.index, dtype="float64")
        for c in ("start", "end"):
            df[c] = pd.to_datetime(pd.Series([_float(row[c]) for row in rows], index=df.index, dtype="float64"),
                                   unit="s", utc=True).astype(DATETIME_DTYPE)
        for c in ("status", "reason", "error", "rule"):
            df[c] = pd.Series([row[c] for row in rows], index=df.index, dtype=object)
        return df

    def summary(self) -> str:
        """A few lines of text: counts, best, resource (``resource used: U of F without early
        stopping``; ``resource used: none (no trial reported a step)`` where no trial reported any,
        every trial failed before its first report, say, ``none yet`` while trials run, and ``0 (the N
        unit(s) reported so far were trained by interrupted attempts ...)`` where every reported step
        is an interrupted attempt's); ``resource lost: N (...)`` where attempts were interrupted,
        with ``max_total_resource counts them: T in all`` where the job sets ``max_total_resource``
        and ``used and lost: T in all`` where it does not."""
        c = self.counts()
        parts = ", ".join(f"{k} {v}" for k, v in c.items() if v)
        lines = [f"tuning job: {len(self.trials)} trial{'' if len(self.trials) == 1 else 's'}"
                 + (f" ({parts})" if parts else ""), f"objective: {self.objective} ({self.mode})"]
        if self.job.get("seed") is not None:  # (trial 24g: a drawn seed, seed=None, was shown nowhere)
            lines.append(f"seed: {self.job['seed']} (Tuner(seed=...) with it draws the same configurations)")
        if self.halt:
            lines.append(f"ended early: {self.halt}")
        b = self.best
        if b is not None:
            lines.append(f"best: trial {b.number} {self.objective}={format_value(b.value)} params={b.params}")
        elif ended_before_any_trial(self):
            # trial 25f: a job whose max_wall_time went to the workers' start-up said "none yet"
            lines.append(f"best: none: no trial returned an objective: the job ended ({self.halt}) before any "
                         "trial started")
        elif not self.trials or c["running"] or c["pending"]:
            lines.append("best: none yet")
        else:
            ruled = sum(1 for t in self.trials if t.rule is not None and t.value is not None)
            lines.append("best: none: no trial returned an objective" if not ruled else
                         f"best: none: the {ruled} trial(s) with an objective were stopped by a tripwire rule")
        used, full = self.resource_used, self.resource_without_early_stopping
        ratio = f" ({used / full:.1%})" if full else ""
        if not used and not full:
            # trial 32g F5: every trial failed before its first report (a trial_metric typo), and the line read
            # "resource used: 0 of 0 without early stopping"
            # trial 32h F4: after a kill -9 every step reported so far may be an interrupted attempt's (lost, not
            # used), and the line said "no trial has reported a step" next to "resource lost: 60"
            lines.append("resource used: " + (
                f"0 (the {self.resource_lost} unit(s) reported so far were trained by interrupted attempts: "
                "lost, below)" if self.resource_lost
                else "none yet (no trial has reported a step)" if c["running"] or c["pending"]
                else "none (no trial reported a step)" if self.trials
                else "none (no trial ran)"))
        elif self.max_resource is not None:
            lines.append(f"resource used: {used} of {full} without early stopping{ratio}")
        else:  # (trials without a resource budget: nothing was stopped early to compare with)
            lines.append(f"resource used: {used} (reported steps; the strategy has no max_resource)")
        if self.resource_lost:  # (trial 25f: max_total_resource counts them, and they were shown nowhere)
            # trials an interrupted session left to rerun: pending, and running where no tuner runs them now
            # (trial 29c: right after Ctrl-C the line said "rerun on resume" of trials not rerun yet; trial
            # 30e: after kill -9 the line was missing, their units counted as used)
            waiting = c["pending"] + self._interrupted_trials
            what = (f"attempts interrupted; {waiting} trial(s) will rerun on resume, from scratch" if waiting
                    else "attempts interrupted and rerun on resume")
            # (trial 32h F4: "max_total_resource counts them" was said of a job that sets no max_total_resource)
            counted = ("max_total_resource counts them" if self.job.get("max_total_resource") is not None
                       else "used and lost")
            lines.append(f"resource lost: {self.resource_lost} ({what}; {counted}: {used + self.resource_lost} in all)")
        failed = [t for t in self.trials if t.status == "failed" and t.error]
        if failed:
            last = error_summary(failed[0].error)
            lines.append(f"first error (trial {failed[0].number}, {len(failed)} failed): {last}")
        h = self.holder
        if h is not None and h.get("copy_of"):
            # trial 28b: a copy made while its job ran said "a tuner is running this job now"
            pending = c["running"] + c["pending"]
            rerun = (f"; Tuner.resume on this copy reruns its {pending} running or pending trial(s)" if pending
                     else "")
            lines.append(f"no tuner is running this copy: it is a copy of {h['copy_of']!r}, made while a tuner "
                         f"(pid {h['pid']} on {h['host']}) ran the job there{rerun}")
        elif h is not None and h["alive"]:
            lines.append(f"a tuner is running this job now (pid {h['pid']} on {h['host']})")
        elif c["running"] or c["pending"]:
            who = f" (pid {h['pid']} on {h['host']})" if h is not None else ""
            told = len(self._told_to_stop)
            rerun = c["running"] + c["pending"] - told
            does = " and ".join(part for part in (
                f"reruns {'them' if not told else f'the {rerun} other(s)'}" if rerun else "",
                # (trial 43b: "as stopped" of a trial whose last report was at max_resource, ended completed)
                f"ends the {told} it had told to stop already (stopped, or completed where its last report was at "
                f"max_resource)" if told else "") if part)
            lines.append(f"no tuner is running this job: the one that ran it{who} ended before its "
                         f"{c['running'] + c['pending']} running or pending trial(s) finished; "
                         f"`tripwire tune --resume TUNE.yaml` or `Tuner.resume(journal)` {does}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        b = self.best
        return (f"TuningResult(trials={len(self.trials)}, best={None if b is None else (b.number, b.value)}, "
                f"resource_used={self.resource_used})")
