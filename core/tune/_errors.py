"""Exceptions of :mod:`tripwire.tune`.

Each subclasses :class:`tripwire._errors.TripwireError` and the builtin that matches its meaning.
"""

from __future__ import annotations

import re

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


_CHAINS = ("The above exception was the direct cause of the following exception:",
           "During handling of the above exception, another exception occurred:")
_FRAME = re.compile(r"^(Traceback \(most recent call last\):|\s+File \")")


def _block_header(lines: list[str]) -> str:
    """The exception line of one traceback block: the first unindented line after its last frame
    (a message that goes on over more lines: its first line, cut at its last full sentence)."""
    last = max((i for i, ln in enumerate(lines) if _FRAME.match(ln)), default=-1)
    rest = [ln for ln in lines[last + 1:] if ln.strip() and not ln.startswith((" ", "\t"))]
    if not rest:
        return ""
    head = rest[0].strip()
    if len(rest) > 1 and ". " in head:  # ("RuntimeError: Error during deserialization .... This frequently")
        head = head[:head.rindex(". ") + 1]
    return head


_DAEMONIC = "daemonic processes are not allowed to have children"


#: What a timed-out trial's error says before the stack its worker dumped (see ``_executor``).
STACK_MARKER = "where its threads were when it was stopped"


_IMPORT_FRAME = re.compile(r'File "(?P<file>[^"]+)", line \d+,? in <module>')
#: a module file's top-level package where it lies in an installed package's folder
_SITE_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<name>[^/\\]+?)(?:\.py)?(?:[/\\]|$)")


def import_hint(stack: str | None) -> str:
    """What a timed-out trial's error adds when the stack dumped at its timeout (most recent call
    first) is inside an ``import``: the module being imported (its outermost ``<module>`` frame),
    and that ``trial_timeout`` counts the imports done inside ``train`` (trial 27b: a worker that
    replaced a timed-out one imported Lightning again inside its first trial, which timed out in
    turn); ``""`` otherwise."""
    if not stack or "<frozen importlib._bootstrap>" not in stack:
        return ""
    files = [m.group("file") for m in _IMPORT_FRAME.finditer(stack) if not m.group("file").startswith("<")]
    what = f" ({files[-1]})" if files else ""
    if files and stack.rstrip().endswith("..."):
        # faulthandler keeps 100 frames a thread and ends a longer stack with "...": the outermost
        # module frame kept is one the import reached, not the one train imported (trial 41c:
        # .../lightning/fabric/fabric.py, for an `import lightning` in train)
        package = _SITE_PACKAGE.search(files[-1])
        what = (f" (the {package.group('name')} package: the stack dump keeps 100 frames, the outermost module "
                f"among them {files[-1]})" if package else
                f" ({files[-1]}, the outermost module among the 100 frames the stack dump keeps)")
    return (f"; it was importing a module{what}: trial_timeout counts the imports done inside train, and a worker "
            "started to replace a timed-out one imports them again in its first trial; import the framework at the "
            "module level of train's module, or in setup(): a worker does those before it takes a trial, outside "
            "any trial's time")


def error_summary(text: str | None) -> str:
    """One line for a failed trial's error: the exception line of its traceback (not the last line
    of a message that spans several, such as a URL), with the exception that directly caused it
    (``RuntimeError: Error during deserialization of the task graph. (cause: AttributeError: Can't
    get attribute 'train2' ...)``); a text that is no traceback: its last line."""
    head, marker, _ = (text or "").partition("\n" + STACK_MARKER)
    if marker:  # a timed-out trial: its message, not the last frame of the stack dumped after it
        text = head
    lines = (text or "").strip().splitlines()
    last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    if not any(_FRAME.match(ln) for ln in lines):
        return last
    blocks: list[list[str]] = [[]]
    chains: list[str] = []
    for ln in lines:
        if ln.strip() in _CHAINS:
            chains.append(ln.strip())
            blocks.append([])
        else:
            blocks[-1].append(ln)
    head = _block_header(blocks[-1]) or last
    if chains and chains[-1] == _CHAINS[0]:
        cause = _block_header(blocks[-2])
        if cause:
            head = f"{head} (cause: {cause})"
    if _DAEMONIC in (text or ""):
        if _DAEMONIC not in head:  # (a Lightning trial's DataLoader workers: Lightning's teardown error shown, trial 17f)
            head = f"{head} (while handling: AssertionError: {_DAEMONIC})"
        head += (" [a Dask worker process is daemonic and cannot start processes: create the cluster under "
                 "dask.config.set({'distributed.worker.daemon': False}) (executor='dask' does), or use the local "
                 "executor]")
    return head
