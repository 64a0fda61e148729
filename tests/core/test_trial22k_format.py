"""Trial 22k: a run.json of another format, or of a newer format version, was read as this one
without a word."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError, CorruptRunError
from tripwire._format import FORMAT_VERSION


def _run(tmp_path: Path, **meta: object) -> Path:
    out = tmp_path / "run"
    session = tripwire.Session(out_dir=out, rules=[])
    session.step("train", 0, {"loss": (1.0, "losses")})
    session.close()
    info = json.loads((out / "run.json").read_text())
    info.update(meta)
    (out / "run.json").write_text(json.dumps(info))
    return out


def test_a_newer_format_version_is_read_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = _run(tmp_path, format_version=99)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = tripwire.open_run(out)
    assert run.series("loss")[1].tolist() == [1.0]
    assert f"format version 99, written by a newer tripwire; this reader knows versions 1 to {FORMAT_VERSION}" in caplog.text
    assert any("format version 99" in w for w in run.warnings)


@pytest.mark.parametrize(("meta", "said"), [
    ({"format": "something-else"}, r"format 'something-else'; accepted: 'tripwire-run'"),
    ({"format_version": "2"}, r"format_version .2.; accepted: an integer >= 1 \(this reader knows 1 to 3"),
    ({"format_version": 0}, r"format_version 0; accepted: an integer >= 1 \(this reader knows 1 to 3"),
])
def test_another_format_is_refused_naming_it(tmp_path: Path, meta: dict[str, object], said: str) -> None:
    out = _run(tmp_path, **meta)
    with pytest.raises(CorruptRunError, match=said):
        tripwire.open_run(out)


def test_the_current_format_reads_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = _run(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert tripwire.open_run(out).warnings == []
    assert caplog.text == ""


@pytest.mark.parametrize(("info", "key"), [({}, "format"), ({"framework": "lightning"}, "format"),
                                           ({"format": "tripwire-run"}, "format_version")])
def test_a_run_json_without_its_format_is_refused(tmp_path: Path, info: dict[str, object], key: str) -> None:
    """Trial 41d F5: a run.json of {} was read as a run ("framework: ?"), without a word; trial 41j:
    one without its format_version too."""
    out = _run(tmp_path)
    (out / "run.json").write_text(json.dumps(info))
    with pytest.raises(CorruptRunError, match=rf"run\.json: damaged, no '{key}' key \(it holds .*\); accepted: the "
                                              r"run\.json a tripwire writer made, with 'format': 'tripwire-run' and "
                                              r"'format_version'"):
        tripwire.open_run(out)


@pytest.mark.parametrize(("text", "said"), [("{}", r"holds no tripwire run's \(its 'format' is None\)"),
                                            ('{"format": "smdebug"}', r"holds no tripwire run's \(its 'format' is 'smdebug'\)"),
                                            ("[1]", r"holds list, no tripwire run's"),
                                            ('{"format": "tripwire-run"}', r"holds 'format_version' None"),
                                            ('{"format": "tripwire-run", "format_version": 0}', r"holds 'format_version' 0"),
                                            ('{"format": "tripwire-run", "format_version": "x"}', r"holds 'format_version' 'x'"),
                                            ('{"format": "tripwire-run", "format_version": 2.0}', r"holds 'format_version' 2\.0"),
                                            ("{", r"cannot be read \(JSONDecodeError")])
def test_a_session_refuses_a_directory_whose_run_json_no_reader_reads(tmp_path: Path, text: str, said: str) -> None:
    """Trial 41j F4: a session wrote a whole training into a directory whose run.json every reader
    refuses, without a word."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(text)
    with pytest.raises(ConfigError, match=rf"out_dir: .* has a run\.json that {said}.*so no reader could read what "
                                          r"this training writes there"):
        tripwire.Session(out_dir=out, rules=[])
    assert (out / "run.json").read_text() == text
    # (the refused directory is left as it was: no empty workers/, findings/ or control/ of ours; session 41's list)
    assert sorted(p.name for p in out.iterdir()) == ["run.json"]
