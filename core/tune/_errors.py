"""Exceptions of :mod:`tripwire.tune`.

Each subclasses :class:`tripwire._errors.TripwireError` and the builtin that matches its meaning.
"""

from __future__ import annotations

from tripwire._errors import ConfigError, TripwireError

__all__ = ["ConfigError", "JournalError", "JournalLockedError", "ReportError", "TrialDetachedError", "TuneError"]


class TuneError(TripwireError, RuntimeError):
    """A tuning job cannot go on (for example every worker failed to start)."""


class ReportError(TripwireError, ValueError):
    """``trial.report`` got a step that is not a positive integer, a step that is not larger than
    the previous one (duplicate or decreasing), or a value that is not a real number."""


class TrialDetachedError(TripwireError, RuntimeError):
    """``trial.report`` was called on a copy of a trial that lives in another process than the one
    that runs the trial function (report from that process only, e.g. rank 0)."""


class JournalError(TripwireError, OSError):
    """A journal file is missing, is not a tripwire journal, or does not match the job."""


class JournalLockedError(TripwireError, RuntimeError):
    """Another live tuner holds the journal."""
