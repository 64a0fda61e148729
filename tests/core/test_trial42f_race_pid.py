"""Trial 42f F6: two processes racing into a new out_dir: the loser was refused, rightly, but in 4 of
5 races without the winner's pid, whose worker file it had not written yet. The refusal waits a
moment for that file."""

from __future__ import annotations

import fcntl
import json
import threading
import time
from pathlib import Path

import pytest

from tripwire import ConfigError
from tripwire._format import WORKERS_DIR, shard_name, worker_meta_name
from tripwire._writer import RunWriter


def test_a_refused_writer_names_the_pid_of_a_training_that_began_a_moment_before(tmp_path: Path) -> None:
    out = tmp_path / "run"
    RunWriter(out).close()  # (a run directory, its run.json)
    workers = out / WORKERS_DIR
    (workers / worker_meta_name(0)).unlink()
    holder = open(workers / shard_name(0), "ab")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def write_meta() -> None:
        time.sleep(0.3)
        partial = workers / worker_meta_name(0)
        partial.write_text('{"environment": {"pid": 42')  # (a file being written: read before its end)
        time.sleep(0.2)
        partial.write_text(json.dumps({"environment": {"pid": 4242, "host": "elsewhere"}}))

    thread = threading.Thread(target=write_meta)
    thread.start()
    try:
        with pytest.raises(ConfigError, match=r"is being written by another training \(pid 4242 on elsewhere\)"):
            RunWriter(out)
    finally:
        thread.join()
        holder.close()
