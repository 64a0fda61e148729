"""Trial 22k: the CLI's verbs on bad input (one line, exit 2, what is accepted), the rules a
``--set`` holds, a watch that judged nothing, ``plot --out``, and every verb's exit codes in its --help."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._cli import main


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _run(path: Path) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["l2"]}, "losses": None}}) as s:
        for step in range(4):
            s.step("train", step, {"fc1.weight": (np.ones(4) * step, "weights"), "loss": (1.0 / (step + 1), "losses")})
    return path


# ---- 2. demo --seed
def test_demo_refuses_a_seed_numpy_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: --seed -5 was numpy's ValueError, a traceback, exit 1
    for seed in ("-5", str(2**32)):
        assert main(["demo", "--seed", seed]) == 2
        assert _one_line(capsys.readouterr().err) == \
            f"tripwire demo: error: --seed: got {seed}; accepted: an integer from 0 to 4294967295"


def test_demo_flags_that_are_no_integer_are_one_line_naming_what_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in ((["--seed", "x"], "--seed: got 'x'; accepted: an integer from 0 to 4294967295"),
                       (["--max-epochs", "abc"], "--max-epochs: got 'abc'; accepted: an integer >= 1")):
        with pytest.raises(SystemExit) as exc:
            main(["demo", *argv])
        assert exc.value.code == 2
        assert _one_line(capsys.readouterr().err) == f"tripwire demo: error: {said}"


# ---- 3. rules NAME --set SET, --json --markdown
def test_rules_name_not_in_the_set_is_refused_naming_the_sets_rules(capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: `rules overfit --set default` printed "rule set 'default': overfit"
    assert main(["rules", "overfit", "--set", "default"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert _one_line(captured.err) == (
        "tripwire rules: error: 'overfit' is not a rule of the rule set 'default'; accepted with --set default: "
        "exploding_tensor, loss_not_decreasing, oscillating_loss, vanishing_gradient, exploding_gradient, loss_scale_collapse "
        "(or leave --set out: tripwire rules overfit)")


def test_rules_name_in_the_set_is_shown_as_one_rule_of_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "exploding_tensor", "--set", "default"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "rule 'exploding_tensor' of the rule set 'default', with the set's parameters"
    assert "\nloss_not_decreasing\n" not in out


def test_rules_json_with_markdown_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: --markdown was ignored in silence, JSON printed
    assert main(["rules", "--json", "--markdown"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert _one_line(captured.err) == ("tripwire rules: error: --json and --markdown: got both; accepted: one of them "
                                       "(or neither: text)")


# ---- 5 and 6. watch
@pytest.mark.parametrize("text", ["", "save: {interval: 2}\n", "rules: []\n", "rules:\n"])
def test_watch_refuses_a_config_that_lists_no_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     text: str) -> None:
    # trial 22k: an empty config watched nothing and exited 0 in silence (a CI gate passed the run)
    run = _run(tmp_path / "run")
    cfg = tmp_path / "empty.yaml"
    cfg.write_text(text)
    assert main(["watch", str(run), "--config", str(cfg), "--once"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"tripwire watch: error: --config: {str(cfg)!r} lists no rules, so nothing would be "
                           "watched; accepted: a YAML config whose rules: lists the rules to watch")


def test_watch_says_no_run_appeared_when_the_timeout_ran_out_on_a_missing_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: it said "judged what was written by then" where no run ever existed
    missing = tmp_path / "no_such_run"
    assert main(["watch", str(missing), "--timeout", "0", "--interval", "0.01"]) == 3
    err = capsys.readouterr().err
    assert f"--timeout=0 s ran out and no run appeared at {str(missing)!r}: nothing was judged" in err
    assert "judged what was written" not in err


def test_watch_flag_values_are_one_line_naming_what_is_accepted(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run")
    with pytest.raises(SystemExit) as exc:
        main(["watch", str(run), "--interval", "abc"])
    assert exc.value.code == 2
    assert _one_line(capsys.readouterr().err) == \
        "tripwire watch: error: --interval: got 'abc'; accepted: a number of seconds > 0 (finite)"
    assert main(["watch", str(run), "--timeout", "inf"]) == 2  # (inf is >= 0: "finite" says why it is refused)
    assert "--timeout: got inf; accepted: a number of seconds >= 0 (finite;" in _one_line(capsys.readouterr().err)


# ---- 7. plot --out, --regex
def test_plot_out_through_a_file_is_one_line_naming_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    (tmp_path / "afile.txt").write_text("x")
    out = tmp_path / "afile.txt" / "x.png"
    assert main(["plot", str(run), "loss", "--out", str(out)]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"tripwire plot: error: --out: got {str(out)!r}, but {str(tmp_path / 'afile.txt')!r} is a file, not a "
        "directory; accepted: an image path whose existing parent is a directory you can write to (missing parent "
        "directories are created)")
    (tmp_path / "dir.png").mkdir()
    assert main(["plot", str(run), "loss", "--out", str(tmp_path / "dir.png")]) == 2
    assert "--out: got" in _one_line(capsys.readouterr().err)
    (tmp_path / "adir").mkdir()  # trial 24d: a directory without an image suffix was "not a .png path"
    assert main(["plot", str(run), "loss", "--out", str(tmp_path / "adir")]) == 2
    assert f"--out: got {str(tmp_path / 'adir')!r}, which is a directory; accepted: an image path" in \
        _one_line(capsys.readouterr().err)
    for given in (str(tmp_path / "adir") + "/", str(tmp_path / "newdir") + "/"):  # (trial 24h: the slash dropped)
        assert main(["plot", str(run), "loss", "--out", given]) == 2
        assert f"--out: got {given!r}, which names a directory; accepted: an image path" in _one_line(capsys.readouterr().err)


def test_plot_creates_missing_parent_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    out = tmp_path / "made" / "by" / "plot" / "a.png"
    assert main(["plot", str(run), "loss", "--out", str(out)]) == 0
    assert out.is_file() and capsys.readouterr().out.strip() == str(out)


def test_plot_regex_matching_nothing_names_the_users_pattern(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: "no tensor matches the regex '(?:nomatch)'", the pattern the CLI made of it
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    assert main(["plot", str(run), "nomatch", "--regex"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "no tensor matches the regex 'nomatch' (--regex, re.search); available: " in line and "(?:" not in line
    assert main(["plot", str(run), "nomatch", "other", "--regex"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "no tensor matches the regex 'nomatch' or 'other' (--regex, re.search)" in line and "(?:" not in line
    with pytest.raises(SystemExit):
        main(["plot", str(run), "loss", "--worker", "x"])
    assert _one_line(capsys.readouterr().err) == \
        "tripwire plot: error: --worker: got 'x'; accepted: a worker number of the run, an integer >= 0"


# ---- 10. exit codes in every verb's --help
@pytest.mark.parametrize("verb", ["inspect", "validate", "rules", "report", "watch", "plot", "demo", "tune",
                                  "tune-report"])
def test_every_verbs_help_states_its_exit_codes(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 " in text and "2 bad input" in text
