"""Config files that are not UTF-8 where trial 29d's fix (core/_config.py ``read_config_text``)
did not reach: ``tripwire validate`` of a pipe (its text read once, in core/_cli.py) and a tuning
job's YAML (``tripwire tune``'s ``load_job_config``). A UTF-16 file with its byte-order mark (what
Windows PowerShell 5 writes) is read; Latin-1 bytes are a ConfigError naming the file, never a
UnicodeDecodeError traceback."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tripwire import ConfigError
from tripwire._cli import main
from tripwire.tune._cli import load_job_config


def _through_a_pipe(tmp_path: Path, data: bytes) -> str:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    threading.Thread(target=feed, daemon=True).start()
    return str(fifo)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_validate_reads_a_utf16_pipe_and_names_a_latin1_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = "save: {interval: 5}\nrules: [default]\n".encode("utf-16")  # (with its byte-order mark)
    assert main(["validate", _through_a_pipe(tmp_path, good)]) == 0
    capsys.readouterr()
    bad_dir = tmp_path / "b"
    bad_dir.mkdir()
    bad = "# caf\xe9\nsave: {interval: 5}\n".encode("latin-1")
    assert main(["validate", _through_a_pipe(bad_dir, bad)]) == 2
    err = capsys.readouterr().err
    assert "config.fifo" in err and "UTF-8" in err and "Traceback" not in err


def test_a_tuning_yaml_in_utf16_is_read_and_latin1_is_a_config_error(tmp_path: Path) -> None:
    text = ("entry_point: mymod:train\nspace: {x: {type: continuous, min: 0, max: 1}}\n"
            "strategy: {type: random, max_jobs: 2}\n")
    utf16 = tmp_path / "tune16.yaml"
    utf16.write_bytes(text.encode("utf-16"))
    try:
        data = load_job_config(utf16)
    except ConfigError as exc:  # a key this test got wrong would be named; never a decoding error
        assert "decode" not in str(exc) and "UTF" not in str(exc)
    else:
        assert data["entry_point"] == "mymod:train"
    latin = tmp_path / "tune1.yaml"
    latin.write_bytes(("# r\xe9glage\n" + text).encode("latin-1"))
    with pytest.raises(ConfigError, match=r"tune1\.yaml.*UTF-8"):
        load_job_config(latin)
