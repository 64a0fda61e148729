"""Trial 28f finding 2 (all but the Tuner's journal): a URL is refused wherever a local path is
meant, not only for ``out_dir`` and ``open_run``. A one-slash URL (``s3:/b/x``, what
``os.path.normpath`` makes of ``s3://b/x``) given as a string was accepted and wrote ``./s3:/b/x``;
``tripwire plot --out s3://...`` wrote the image to a local ``./s3:`` folder and exited 0; a config
path given as a URL was "no such file 's3:/runs/cfg.yaml'", a path the user did not type."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError, RunNotFoundError, load_config, open_run
from tripwire._cli import main


# ------------------------------------------------------------------------ 1. a one-slash URL string
@pytest.mark.parametrize("out_dir", ["s3:/runs/exp1", os.path.normpath("s3://runs/exp1"), "gs:/b/run"])
def test_a_one_slash_url_string_out_dir_is_refused_as_its_path_is(out_dir: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scheme = out_dir.split(":")[0]
    match = (rf"out_dir: got '{out_dir}'; accepted: a local directory path \(remote stores such as {scheme}:// are "
             r"not supported; write locally and copy the run directory\)")
    with pytest.raises(ConfigError, match=match):
        tripwire.Session(out_dir=out_dir)
    with pytest.raises(ConfigError, match=match):
        tripwire.Session(out_dir=Path(out_dir))  # (refused before this fix too: the same text, the same answer)
    with pytest.raises(RunNotFoundError, match=rf"no tripwire run at '{out_dir}': remote stores"):
        open_run(out_dir)
    assert list(tmp_path.iterdir()) == []  # no ./s3: folder


def test_a_one_slash_file_url_names_the_path_to_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"out_dir: got 'file:/tmp/x'; accepted: a local directory path \(not a URL: "
                                          r"write the path itself, '/tmp/x'\)"):
        tripwire.Session(out_dir="file:/tmp/x")


def test_validate_refuses_a_one_slash_url_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.yaml").write_text('out_dir: "s3:/runs/exp1"\n')
    assert main(["validate", "one.yaml"]) == 2
    out, err = capsys.readouterr()
    assert "valid" not in out
    assert "out_dir: got 's3:/runs/exp1'; accepted: a local directory path (remote stores such as s3://" in err


@pytest.mark.parametrize("path", ["runs/exp1", "./s3/x", "C:/x", "a:b/c", "s3_runs:x"])
def test_local_paths_that_are_no_urls_stay_accepted(path: str) -> None:
    from tripwire._config import url_refusal, url_scheme

    assert url_scheme(path) is None and url_refusal(path) is None


# ----------------------------------------------------------------------------- 2. tripwire plot --out
def _run(path: Path) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "collections": {"losses": None}}) as s:
        for step in range(4):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    return path


@pytest.mark.parametrize("out", ["s3://runs/plots/loss.png", "s3:/runs/plots/loss.png", "gs://b/loss.png"])
def test_plot_refuses_a_url_out_and_writes_nothing(out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(run), "loss", "--out", out]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    scheme = out.split(":")[0]
    assert captured.err.strip() == (f"tripwire plot: error: --out: got {out!r}; accepted: a local image path (remote "
                                    f"stores such as {scheme}:// are not supported; write the image locally and "
                                    f"copy it)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no ./s3: folder
    assert not (run / "plots").exists()


def test_plot_out_as_a_file_url_names_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)  # (where a ./file: folder would be made)
    target = tmp_path / "loss.png"
    assert main(["plot", str(run), "loss", "--out", f"file://{target}"]) == 2
    assert f"--out: got 'file://{target}'; accepted: a local image path (not a URL: write the path itself, " \
           f"'{target}')" in capsys.readouterr().err
    assert not target.exists()


def test_plot_to_a_local_path_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    out = tmp_path / "sub" / "loss.png"
    assert main(["plot", str(run), "loss", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------- 3. config paths
_CONFIG_REFUSAL = (r"config: got '{url}'; accepted: the path of a local YAML file, a mapping, a Config or None "
                   r"\(remote stores such as s3:// are not supported; download the file and give its local path\)")


@pytest.mark.parametrize("url", ["s3://runs/cfg.yaml", "s3:/runs/cfg.yaml"])
def test_load_config_refuses_a_url_naming_what_was_given(url: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=_CONFIG_REFUSAL.format(url=url)):
        load_config(url)
    # a local file at the path the URL collapses to is not read in its place
    (tmp_path / "s3:" / "runs").mkdir(parents=True)
    (tmp_path / "s3:" / "runs" / "cfg.yaml").write_text("rules: [default]\n")
    with pytest.raises(ConfigError, match=_CONFIG_REFUSAL.format(url=url)):
        load_config(url)
    with pytest.raises(ConfigError, match=_CONFIG_REFUSAL.format(url="s3:/runs/cfg.yaml")):
        load_config(Path(url))
    with pytest.raises(ConfigError, match=_CONFIG_REFUSAL.format(url=url)):
        tripwire.Session(url)


def test_load_config_a_file_url_names_the_path(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("rules: [default]\n")
    with pytest.raises(ConfigError, match=rf"config: got 'file://{cfg}'; accepted: .*\(not a URL: write the path "
                                          rf"itself, '{cfg}'\)"):
        load_config(f"file://{cfg}")


def test_validate_refuses_a_url_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "s3://runs/cfg.yaml"]) == 2
    err = capsys.readouterr().err
    assert "no such file" not in err and "'s3:/runs" not in err
    assert "config: got 's3://runs/cfg.yaml'; accepted: the path of a local YAML file" in err
    assert "remote stores such as s3:// are not supported; download the file and give its local path" in err


def test_watch_refuses_a_url_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert main(["watch", str(run), "--once", "--config", "s3://runs/cfg.yaml"]) == 2
    err = capsys.readouterr().err
    assert "no such file" not in err
    assert "config: got 's3://runs/cfg.yaml'; accepted: the path of a local YAML file" in err
    assert not (tmp_path / "s3:").exists()


def test_a_missing_local_config_is_still_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"config: no such file '{tmp_path / 'nope.yaml'}'"):
        load_config(tmp_path / "nope.yaml")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("rules: [default]\n")
    assert [r.name for r in load_config(str(cfg)).rules] == ["default"]
