"""The live view of a tuning job's progress: drawn by ``tripwire tune`` and by
``Tuner.fit(progress=True)`` (trial 30f: a notebook's ``fit()`` showed nothing until it returned).

:class:`LiveView` is a ``progress`` callable and a context manager. In a terminal it is a ``rich``
``Live`` display, redrawn 4 times a second; in a Jupyter notebook (where ``rich``'s ``Live`` needs
``ipywidgets``) it is one output of the cell, updated in place 4 times a second through an IPython
display handle; elsewhere (output to a file or a pipe) the last view is printed when the job ends.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any, Mapping

from .._cli import PIPED_WIDTH
from ._format import format_value

__all__ = ["HALTING", "SHUTTING_DOWN", "LiveView"]

#: What the live view says while the workers stop after the last trial ended.
SHUTTING_DOWN = "every trial has ended; stopping the workers"

#: How the live view's caption starts once a completion criterion (or fail fast) ends the job.
HALTING = "ending:"

#: Redraws a second (the clock runs on between snapshots).
REFRESH_PER_SECOND = 4


def _of(value: str, limit: Any) -> str:
    """``value``, then `` / limit`` where the job has that limit."""
    return value if limit is None else f"{value} / {format_value(limit)}"


class LiveView:
    """``tripwire tune``'s live view, also ``Tuner.fit(progress=True)``'s: one row of the counts of the
    tuner's latest snapshot, with the progress towards the limits that are set (trial 28b: a
    400-trial job's view could not say how far along it was): under the title, the trials (``114 /
    400 trials`` against ``max_jobs``) and the pending ones (a resume's reruns, Dask trials waiting for
    a thread); ``resource used`` against ``max_total_resource`` (which counts the lost units too) and
    ``elapsed`` against ``max_wall_time``; once the job is ending, a caption names its halt (``ending:
    max_total_resource=900 reached``). The row keeps its 7 columns (80 characters show them). Its
    clock runs on between snapshots (redrawn 4 times a second), and while the workers stop after the
    last trial ended (seconds, for workers that imported torch), the row shows no trial running and a
    caption says so (trial 27b: the view showed the last trial running, with its clock stopped, for 3
    to 4 s).

    Call it with each snapshot (``fit(progress=view)``) between ``with view:`` and its end, which
    starts and stops the display; where none came before its end (the job was refused before it
    started: a journal another tuner holds), it leaves nothing, in a terminal or piped (trial 33d F3:
    an empty "0 trials" view was printed above the refusal). ``console``: the ``rich`` console it
    draws on (default: a new ``Console()``, which finds out whether it is a terminal or a Jupyter
    notebook; where it is neither, output piped to a file, one :data:`PIPED_WIDTH` columns wide: a
    number in the row is never cut, and one too wide for its cell on a narrow terminal wraps whole,
    trial 30g F8)."""

    def __init__(self, title: str, console: Any = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.console = Console() if console is None else console
        if console is None and not self.console.is_terminal and not self.console.is_jupyter:
            # piped (a log file): drawn up to 200 columns wide, as the CLI's tables, so that no number is cut
            # (trial 30g F8: at 80 columns the best value, the one number a log keeps, read 0.00011287…)
            self.console = Console(width=PIPED_WIDTH)
        self._snapshot: Mapping[str, Any] = {}
        self._received = time.monotonic()
        self._lock = threading.Lock()
        self.live = Live(console=self.console, refresh_per_second=REFRESH_PER_SECOND, transient=False,
                         get_renderable=self._current)
        # a notebook: an IPython display handle, updated by a thread of this view (see _start_notebook)
        self._handle: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- what it draws ------------------------------------------------------------------------
    def _current(self) -> Any:
        """The latest snapshot, its ``elapsed`` run on to now (not once the job has ended)."""
        s = self._snapshot
        if s and s.get("phase", "running") != "ended":
            s = {**s, "elapsed": float(s.get("elapsed", 0.0)) + time.monotonic() - self._received}
        return self._render(s)

    def _render(self, s: Mapping[str, Any]) -> Any:
        from rich.table import Table
        from rich.text import Text

        captions = []
        if s.get("halt"):
            captions.append(f"{HALTING} {s['halt']}")
        if s.get("phase") == "shutting down":
            captions.append(SHUTTING_DOWN)
        counts = {k: int(s.get(k, 0) or 0) for k in ("running", "completed", "stopped", "failed", "pending")}
        trials = _of(str(sum(counts.values())), s.get("max_jobs")) + " trials"
        if counts["pending"]:
            trials += f", {counts['pending']} pending"
        # (Text: a halt's error line or a path with [brackets] is not read as rich markup)
        t = Table(title=Text(f"{self.title}\n{trials}", style="table.title"), show_header=True,
                  caption=Text("\n".join(captions), style="table.caption") if captions else None)
        for col in ("running", "completed", "stopped", "failed", "best so far", "resource used", "elapsed"):
            # (a number too wide for its cell wraps onto a second line, whole, instead of ending in "…")
            t.add_column(col, justify="right", overflow="fold")
        best = s.get("best")
        lost = s.get("resource_lost")
        used = str(s.get("resource_used", 0)) + (f" (+{lost} lost)" if lost else "")
        wall = s.get("max_wall_time")
        t.add_row(str(counts["running"]), str(counts["completed"]), str(counts["stopped"]), str(counts["failed"]),
                  "-" if best is None else format_value(best), _of(used, s.get("max_total_resource")),
                  f"{s.get('elapsed', 0.0):.1f} s" + ("" if wall is None else f" / {format_value(wall)} s"))
        return t

    # ---- the progress callable ----------------------------------------------------------------
    def __call__(self, snapshot: Mapping[str, Any]) -> None:
        """Take a snapshot of ``Tuner.fit``'s ``progress`` and redraw."""
        self._snapshot, self._received = dict(snapshot), time.monotonic()
        if self._handle is not None:
            self._update_notebook()
        else:
            self.live.refresh()

    # ---- start and stop -----------------------------------------------------------------------
    def __enter__(self) -> LiveView:
        if self.console.is_jupyter:
            self._start_notebook()
        else:
            self.live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._handle is not None:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=2)
            self._update_notebook()
            return
        if not self._snapshot:
            # no snapshot came: the job was refused before it started (a journal another tuner holds, trial
            # 33d F3: piped, "0 trials, best so far -" was printed above the refusal, although the journal held
            # trials): nothing stays, in a terminal the view drawn while it started is erased, piped none is printed
            self.live.transient = True
            self.live.stop()
            return
        self.live.stop()
        if not self.console.is_terminal:
            self.console.line()  # (rich ends the last view without a newline where it is not a terminal)

    def _start_notebook(self) -> None:
        """One output of the running cell (``IPython.display.display(..., display_id=True)``), updated
        in place by a thread 4 times a second and at each snapshot: ``rich``'s ``Live`` shows nothing
        in a notebook without ``ipywidgets``."""
        from IPython.display import display

        self._handle = display(self._bundle(), display_id=True)

        def tick() -> None:
            while not self._stop.wait(1.0 / REFRESH_PER_SECOND):
                self._update_notebook()

        self._thread = threading.Thread(target=tick, name="tripwire-tune-view", daemon=True)
        self._thread.start()

    def _update_notebook(self) -> None:
        with self._lock:
            self._handle.update(self._bundle())

    def _bundle(self) -> Any:
        """The view now as a notebook output: its HTML (``rich``'s colours) and its plain text."""
        from rich.console import Console
        from rich.jupyter import JUPYTER_HTML_FORMAT, JupyterRenderable

        out = Console(record=True, file=io.StringIO(), width=max(80, min(self.console.width, 120)),
                      force_terminal=True, force_jupyter=False, color_system="truecolor")
        out.print(self._current())
        return JupyterRenderable(out.export_html(inline_styles=True, code_format=JUPYTER_HTML_FORMAT, clear=False),
                                 out.export_text())
