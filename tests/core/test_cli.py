from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np

import tripwire
from tripwire._cli import main


def _make_run(path: Path) -> None:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["l2"]}, "losses": None}}) as s:
        for step in range(3):
            s.step("train", step, {"fc1.weight": (np.ones(4) * step, "weights"), "loss": (1.0 / (step + 1), "losses")})
        s.step("eval", 0, {"val_loss": (0.75, "losses")})
        s.record_finding(tripwire.Finding("my_rule", 2, "train", "something odd: 3 > 2"))


def test_inspect_prints_steps_collections_tensors_and_findings(tmp_path: Path, capsys) -> None:
    _make_run(tmp_path / "run")
    assert main(["inspect", str(tmp_path / "run"), "--tensors", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "status: complete" in out
    assert "train" in out and "weights" in out and "fc1.weight" in out
    assert "l2=4 @ 2" in out and "my_rule" in out and "something odd: 3 > 2" in out
    assert "raw=0.75 @ 0 (eval)" in out  # a validation metric's last value is in its own mode


def test_inspect_shows_the_last_array_of_a_tensor_kept_whole(tmp_path: Path, capsys) -> None:
    # trial 16c: labels and predictions (raw arrays only) had an empty "last value" cell
    with tripwire.Session({"out_dir": str(tmp_path / "run"), "save": {"interval": 1},
                           "collections": ["losses", "labels"]}) as s:
        for step in range(2):
            s.step("eval", step, {"labels": (np.arange(6), "labels"), "val_loss": (0.5, "losses")})
    assert main(["inspect", str(tmp_path / "run"), "--tensors", "--width", "200"]) == 0
    assert "array int64[6] @ 1 (eval)" in capsys.readouterr().out


def test_inspect_missing_run_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["inspect", str(tmp_path / "nope")]) == 2
    assert "no tripwire run at" in capsys.readouterr().err


def test_validate(tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("save: {interval: 5}\ncollections: [weights]\nactions: [log]\n")
    assert main(["validate", str(good)]) == 0
    assert "valid" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("collections:\n  weights:\n    reductions: [l2, histgram]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "collections.weights.reductions[1]: unknown reduction 'histgram'; did you mean 'histogram'?" in err


def test_validate_as_an_integration_runs_the_config(tmp_path: Path, capsys) -> None:
    # trial 19b: docs/xgboost.md's YAML was listed with the default set's two gradient rules and a
    # gradients collection, which XGBoost's callback leaves out
    cfg = tmp_path / "xgb.yaml"
    cfg.write_text("rules: [default, tree_depth]\n")
    assert main(["validate", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "vanishing_gradient" in out and "see them with --framework lightning|keras|xgboost|mxnet" in out
    assert main(["validate", str(cfg), "--framework", "xgboost"]) == 0
    out = capsys.readouterr().out
    assert "rules: exploding_tensor, loss_not_decreasing, oscillating_loss, tree_depth (as the xgboost " \
           "integration runs them)" in out
    assert "gradients" not in out
    cfg.write_text("rules: [dead_relu]\n")
    assert main(["validate", str(cfg), "--framework", "xgboost"]) == 2
    assert "rules[0]: dead_relu needs 'relu_outputs', which the xgboost integration does not capture" in capsys.readouterr().err
    assert main(["validate", str(cfg), "--framework", "lightning"]) == 0
    # trial 23l: with --framework every error was not named, only the first
    cfg.write_text("collections:\n  gradients: null\n  weights: null\nrules: [dead_relu]\n")
    assert main(["validate", str(cfg), "--framework", "xgboost"]) == 2
    err = capsys.readouterr().err
    assert f"3 errors in {cfg}:" in err
    for said in ("collections.gradients: the xgboost integration does not capture 'gradients'",
                 "collections.weights: the xgboost integration does not capture 'weights'",
                 "rules[0]: dead_relu needs 'relu_outputs'"):
        assert said in err, said


def test_validate_says_where_a_named_config_writes(tmp_path: Path, capsys) -> None:
    # with name: exp7 the run goes to tripwire-runs/exp7 (it said: a new run-<date>-<time> directory)
    named = tmp_path / "named.yaml"
    named.write_text("name: exp7\n")
    assert main(["validate", str(named)]) == 0
    assert "  out_dir: (default, from name: ./tripwire-runs/exp7)\n" in capsys.readouterr().out
    plain = tmp_path / "plain.yaml"
    plain.write_text("save: {interval: 5}\n")
    assert main(["validate", str(plain)]) == 0
    assert "  out_dir: (default: a new ./tripwire-runs/run-<date>-<time>)\n" in capsys.readouterr().out
    assert main(["validate", str(tmp_path)]) == 2  # a directory: it said "no such file"
    assert f"config: {str(tmp_path)!r} is a directory; accepted: the path of a YAML file" in capsys.readouterr().err


def test_validate_names_every_error_of_a_file_not_only_the_first(tmp_path: Path, capsys) -> None:
    # a fresh user fixed and re-ran once per error
    bad = tmp_path / "bad.yaml"
    bad.write_text("collections:\n  weights:\n    reductions: [l2, histgram]\n  gradients: null\nrules:\n"
                   "  - {name: dead_relu, threshhold: 0.5}\n  - exploding_gradient\n  - {name: overfit, gap: -1}\n"
                   "actions: [lgo]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"4 errors in {bad}:" in err
    for said in ("actions[0]: unknown action 'lgo'", "collections.weights.reductions[1]: unknown reduction 'histgram'",
                 "rules[0].threshhold: unknown parameter", "rules[2]: overfit.gap: got -1;"):
        assert said in err, said
    several = tmp_path / "several.yaml"  # each rule's error names its own place (all were rules[0])
    several.write_text("rules:\n  - default\n  - {name: dead_relu, threshold: 5}\n  - {name: tree_depth, max_depth: -1}\n"
                       "  - {name: overfit, tolerence: 1, gap: -1}\n")
    assert main(["validate", str(several)]) == 2
    err = capsys.readouterr().err
    for said in ("rules[1]: dead_relu.threshold: got 5;", "rules[2]: tree_depth.max_depth: got -1",
                 "rules[3].tolerence: unknown parameter", "rules[3]: overfit.gap: got -1;"):
        assert said in err, said
    assert "rules[0]" not in err
    settings = tmp_path / "settings.yaml"  # several top-level settings wrong: each is named (only the first was)
    settings.write_text("out_dir: 5\nactions: [lg]\nsave: {interval: -1}\nrules: [no_such_rule]\n")
    assert main(["validate", str(settings)]) == 2
    err = capsys.readouterr().err
    assert f"4 errors in {settings}:" in err
    for said in ("out_dir: got 5", "actions[0]: unknown action 'lg'", "save.interval: got -1", "unknown rule 'no_such_rule'"):
        assert said in err, said
    keys = tmp_path / "keys.yaml"  # several keys of one section wrong: each is named (only the first was)
    keys.write_text("writer: {queue_size: -3, fsync: 'yes'}\ncollections:\n  weights: {histogram_bins: 0, "
                    "histogram_range: [1, 0]}\nrules:\n  - {name: overfit, tolerence: 1, gap: -1}\n")
    assert main(["validate", str(keys)]) == 2
    err = capsys.readouterr().err
    assert f"6 errors in {keys}:" in err
    for said in ("writer.queue_size: got -3", "writer.fsync: got 'yes'", "collections.weights.histogram_bins: got 0",
                 "collections.weights.histogram_range: got [1, 0]", "rules[0].tolerence: unknown parameter",
                 "overfit.gap: got -1;"):
        assert said in err, said
    twice = tmp_path / "twice.yaml"  # trial 21b: a rule listed twice was named only once the others were fixed
    twice.write_text("rules:\n  - {name: dead_relu, threshold: 5}\n  - overfit\n  - {name: dead_relu, patience: 2}\n"
                     "  - {name: overfit, gap: -1}\n")
    assert main(["validate", str(twice)]) == 2
    err = capsys.readouterr().err
    assert f"4 errors in {twice}:" in err  # (trial 21d: only the first of two duplicates was named)
    for said in ("rules[0]: dead_relu.threshold: got 5;", "rules[3]: overfit.gap: got -1;",
                 "rules[2]: 'dead_relu' is listed already (rules[0])", "rules[3]: 'overfit' is listed already (rules[1])"):
        assert said in err, said
    one = tmp_path / "one.yaml"
    one.write_text("save: {modes: {eval: {enabled: false}}}\nrules: [overfit]\n")  # an error between parts: said once
    assert main(["validate", str(one)]) == 2
    assert "errors in" not in (err := capsys.readouterr().err) and "disabled, but rule 'overfit'" in err


def test_validate_imports_module_rules_as_a_training_from_the_current_directory(tmp_path: Path, capsys,
                                                                                  monkeypatch) -> None:
    # trial 26f: validate put the YAML's folder on sys.path; a training from the same directory does not
    pkg = tmp_path / "cfg" / "myrules_next_to_yaml"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def too_high(history, step, mode):\n    return None\n")
    cfg = tmp_path / "cfg" / "rules.yaml"
    cfg.write_text("rules: [myrules_next_to_yaml:too_high]\n")
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts the current directory first
    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(cfg.relative_to(tmp_path))]) == 2
    assert "'myrules_next_to_yaml' lies in the config's folder" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path / "cfg")  # started from the config's folder, it imports
    assert main(["validate", "rules.yaml"]) == 0
    assert "valid" in capsys.readouterr().out
    sys.modules.pop("myrules_next_to_yaml", None)


def test_rules_piped_into_a_reader_that_stops_early_is_not_an_error() -> None:
    code = "import sys; from tripwire._cli import main; sys.exit(main(['rules']))"
    # ``true`` exits before the listing is written: every write meets a closed pipe
    proc = subprocess.run(f"({sys.executable} -c \"{code}\"; echo rc=$? >&2) | true", shell=True,
                          capture_output=True, text=True)
    assert "rc=0" in proc.stderr and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_console_script_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "tripwire._cli", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("tripwire ")


def test_store_benchmark_quick(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "store.py"), "--quick", "--json", str(tmp_path / "s.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "MB/s" in out.stdout and "scalar records" in out.stdout
    assert (tmp_path / "s.json").exists()


def test_inspect_names_a_shard_shorter_than_its_end_marker(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    _make_run(run_dir)
    shard = run_dir / "workers" / "worker-00000.twr"
    records = 4  # three train steps and one eval step
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 10)  # the last record is torn: three read
    assert main(["inspect", str(run_dir), "--width", "300"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "status: complete" in lines[0]
    assert lines[1] == f"warning: worker 0: its end marker says {records} records, 3 were read from {shard}: " \
                       "the shard was truncated or damaged after the run ended (the records read are intact)"
    assert "worker 0" not in captured.err  # printed once, in the report (not logged as well)


def test_inspect_of_damaged_metadata(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    _make_run(run_dir)
    findings = run_dir / "findings" / "in-process-00000.jsonl"
    findings.write_text('{"rule": "my_ru\n' + findings.read_text())
    assert main(["inspect", str(run_dir), "--width", "300"]) == 0
    out = capsys.readouterr().out
    assert f"warning: {findings}: line 1 is damaged, not valid JSON" in out and "something odd: 3 > 2" in out
    info = run_dir / "run.json"
    info.write_text(info.read_text()[:30])
    assert main(["inspect", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tripwire inspect: error: {info}: damaged, not valid JSON (line ")


def test_inspect_regex_is_checked_first_and_implies_tensors(tmp_path: Path, capsys) -> None:
    _make_run(tmp_path / "run")
    assert main(["inspect", str(tmp_path / "run"), "--tensors", "--regex", "("]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing printed before the error
    assert captured.err.strip() == ("tripwire inspect: error: --regex: invalid regular expression '(' (missing ), "
                                    "unterminated subpattern at position 0); accepted: a Python regular expression, "
                                    "matched with re.search")
    assert main(["inspect", str(tmp_path / "run"), "--regex", "^fc", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "l2=4 @ 2" in out and "raw=0.75" not in out  # fc1.weight's row, not val_loss's


def test_cli_verbs_refuse_a_url(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "s3.yaml"
    cfg.write_text("out_dir: s3://team-runs/exp7\nrules: [default]\n")
    assert main(["validate", str(cfg)]) == 2
    assert "out_dir: got 's3://team-runs/exp7'; accepted: a local directory path" in capsys.readouterr().err
    assert main(["inspect", "s3://team-runs/exp7"]) == 2
    assert "no tripwire run at 's3://team-runs/exp7': remote stores such as s3:// are not supported" in capsys.readouterr().err


def test_inspect_shows_the_trial_and_why_the_tuner_stopped_it(tmp_path: Path, capsys) -> None:
    """A tuning trial's run says which trial it trained and why it stopped (a fresh user found
    status 'stopped', findings none and nothing else)."""
    import tripwire
    from tripwire.tune._trial import trial_facts

    class Trial:
        number, attempt, params = 3, 2, {"eta": np.float64(0.25), "max_depth": 4, "booster": "gbtree"}

    with tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1) as s:
        s.set_meta(trial=trial_facts(Trial(), "validation-auc"))
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.stop_reason = "the tuner stopped the trial after round 1 (validation-auc=0.75)"
        s.close("stopped")
    run = tripwire.open_run(tmp_path / "run")
    assert run.trial == {"metric": "validation-auc", "number": 3, "attempt": 2,
                         "params": {"eta": 0.25, "max_depth": 4, "booster": "gbtree"}}
    assert run.end_markers[0]["stop_reason"].startswith("the tuner stopped")
    assert main(["inspect", str(tmp_path / "run"), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "trial 3 (attempt 2)  reports: validation-auc  params: eta=0.25, max_depth=4, booster=gbtree" in out
    assert "worker 0 stopped: the tuner stopped the trial after round 1 (validation-auc=0.75)" in out


def test_inspect_into_a_closed_pipe_exits_0(tmp_path: Path) -> None:
    """``tripwire inspect RUN | head -1``: rich exits 1 when the reader goes away; the output simply
    ended."""
    import tripwire

    with tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, collections=["losses", "gradients"]) as s:
        for i in range(20):
            s.step("train", i, {"loss": (1.0, "losses"), **{f"gradients/layer{j}.weight": (np.ones(3), "gradients")
                                                            for j in range(60)}})
    cmd = f"{sys.executable} -m tripwire._cli inspect {tmp_path / 'run'} --tensors | head -1; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run ") and done.stderr == ""


def test_watch_imports_a_runs_own_module_rules_from_the_current_directory(tmp_path: Path,
                                                                           monkeypatch) -> None:
    # validate and rules imported module:attribute from the current directory, watch RUN did not
    (tmp_path / "cwd_rules.py").write_text(
        "def loss_above_2(history, step, mode):\n"
        "    got = history.latest('loss', 'raw', mode)\n"
        "    return f'loss {got[1]} > 2' if got is not None and got[1] > 2 else None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with tripwire.Session(out_dir=tmp_path / "run", save_interval=1, rules=["cwd_rules:loss_above_2"],
                          actions=[]) as s:
        s.step("train", 0, {"loss": (3.0, "losses")})
    script = Path(sys.executable).parent / "tripwire"
    done = subprocess.run([str(script), "watch", "run", "--once"], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 1, done.stderr
    assert "loss_above_2" in done.stdout


def test_inspect_says_what_is_there_instead(tmp_path: Path, capsys) -> None:
    _make_run(tmp_path / "runs" / "a")
    # (trial 27c: exit 2 and the reason on stderr, as tripwire plot, not a line on stdout and exit 0)
    assert main(["inspect", str(tmp_path / "runs" / "a"), "--regex", "nomatch"]) == 2
    assert "--regex: no tensor matches the regex 'nomatch' (re.search); available: " in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "runs")]) == 2  # a folder of runs
    assert "run.json is missing; it holds runs: a (open one of them)" in capsys.readouterr().err
    (tmp_path / "train.py").write_text("")
    assert main(["inspect", str(tmp_path / "train.py")]) == 2
    assert "it is a file; a run is a directory" in capsys.readouterr().err


def test_validate_names_the_errors_inside_nested_sections_and_lists(tmp_path: Path, capsys) -> None:
    # two bad keys of save.modes.eval, a bad include beside a bad every_step, two bad reductions of a
    # list, two bad actions of a rule: validate named the first of each (13 of 17 errors of a file)
    bad = tmp_path / "nested.yaml"
    bad.write_text("save: {modes: {eval: {interval: 0, enabled: maybe}}}\n"
                   "collections:\n  mine: {include: ['(('], every_step: true}\n  weights: {reductions: [l3, histgram]}\n"
                   "rules:\n  - {name: loss_not_decreasing, actions: [halt, {name: log, level: loud}]}\n"
                   "actions: [lgo, {name: log, level: loud}]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"10 errors in {bad}:" in err
    for said in ("save.modes.eval.interval: got 0", "save.modes.eval.enabled: got 'maybe'",
                 "actions[0]: unknown action 'lgo'", "actions[1].level: got 'loud'",
                 "collections.mine.include[0]: invalid regular expression '(('",
                 "collections.mine.every_step: got True for a collection of kinds any",
                 "collections.weights.reductions[0]: unknown reduction 'l3'",
                 "collections.weights.reductions[1]: unknown reduction 'histgram'",
                 "rules[0].actions[0]: unknown action 'halt'", "rules[0].actions[1].level: got 'loud'"):
        assert said in err, said


def test_validate_says_a_warning_of_a_failing_file_once(tmp_path: Path, caplog) -> None:
    # trial 17d: a collection named like a built-in one was warned about once per part checked again
    # (5 times with errors in other sections)
    bad = tmp_path / "bad.yaml"
    bad.write_text("out_dri: x\nsave: {interval: 0, start_step: -1}\ncollections:\n  weights: {reductions: [l2, histgram]}\n"
                   "  gradeints: {include: [fc], reductions: [l2]}\nrules:\n  - loss_not_decreasng\n"
                   "actions: [stop_trainig]\n")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert main(["validate", str(bad)]) == 2
    assert len([r for r in caplog.records if "is not built-in" in r.getMessage()]) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):  # (said again by the next validate: once each)
        assert main(["validate", str(bad)]) == 2
    assert len([r for r in caplog.records if "is not built-in" in r.getMessage()]) == 1


def test_an_unavailable_demo_names_the_extra_whatever_its_options(monkeypatch, capsys) -> None:
    # trial 19f: in a core-only install `tripwire demo --healthy` said "unrecognized arguments:
    # --healthy" where `tripwire demo` named the extra to install
    import importlib

    real = importlib.import_module

    def missing(name: str, *args, **kwargs):
        if name == "tripwire.integrations.lightning._demo":
            raise ImportError("'lightning' is not installed; install it with: pip install 'tripwire[lightning]'",
                              name="lightning")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", missing)
    for argv in (["demo"], ["demo", "--healthy"], ["demo", "--out-dir", "x", "--seed", "3"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "tripwire demo: error: 'lightning' is not installed; install it with: pip install 'tripwire[lightning]'" in err
        assert "unrecognized" not in err
    # trial 23g: its --help is a help (exit 0, every other verb's works without its extra), which names the extra
    for argv in (["demo", "--help"], ["demo", "-h"], ["demo", "--healthy", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: tripwire demo [options]") and "planted fault" in out
        assert "unavailable here: 'lightning' is not installed; install it with: pip install 'tripwire[lightning]'" in out


def test_python_m_tripwire_is_the_cli() -> None:
    # trial 23g: "No module named tripwire.__main__"
    out = subprocess.run([sys.executable, "-m", "tripwire", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"tripwire {tripwire.__version__}", out.stderr


# ------------------------------------------------------------------- report (issue 2 names the verb)
def _make_journal(path: Path) -> None:
    from tripwire.tune._journal import Journal

    with Journal(path, create=True) as j:
        j.init_job({"objective": "val_loss", "mode": "min", "strategy": {}})


def test_report_of_a_run_is_inspects_report(tmp_path: Path, capsys) -> None:
    _make_run(tmp_path / "run")
    assert main(["report", str(tmp_path / "run"), "--tensors"]) == 0
    out = capsys.readouterr().out
    assert "status: complete" in out and "my_rule" in out and "fc1.weight" in out


def test_report_of_a_journal_is_tune_reports_summary(tmp_path: Path, capsys) -> None:
    _make_journal(tmp_path / "j.db")
    assert main(["report", str(tmp_path / "j.db"), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "tuning job: 0 trials" and "objective: val_loss (min)" in out


def test_report_names_what_path_must_be_and_refuses_the_other_kinds_options(tmp_path: Path, capsys) -> None:
    _make_run(tmp_path / "run")
    _make_journal(tmp_path / "j.db")
    (tmp_path / "notes.txt").write_text("hello")
    cases = [
        (["report", str(tmp_path / "missing")], "does not exist; accepted: a run directory"),
        (["report", str(tmp_path / "notes.txt")], "is a file but not a SQLite journal; accepted: a run directory"),
        (["report", str(tmp_path / "run"), "--top", "3"], "--top: '" + str(tmp_path / "run") + "' is a run directory"),
        (["report", str(tmp_path / "j.db"), "--regex", "fc"], "--regex: '" + str(tmp_path / "j.db") + "' is a tuning"),
        (["report", str(tmp_path / "j.db"), "--top", "-1"], "--top: got '-1'; accepted: an integer >= 0"),
    ]
    for argv, said in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("tripwire report: error: ") and said in err, (argv, err)


def test_inspect_of_a_tuning_journal_points_to_tune_report(tmp_path: Path, capsys) -> None:
    _make_journal(tmp_path / "j.db")
    assert main(["inspect", str(tmp_path / "j.db")]) == 2
    assert "a tuning journal? read it with tripwire tune-report" in capsys.readouterr().err


def test_validate_names_only_the_bad_key_of_a_custom_collection(tmp_path: Path, capsys) -> None:
    # trial 20d: a bad key beside valid reductions added "reductions: got []: the collection would store nothing"
    path = tmp_path / "c.yaml"
    path.write_text("collections:\n  fc1:\n    include: [fc1]\n    reductions: [mean]\n    abs_reductions: [max]\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "collections.fc1.abs_reductions: unknown key 'abs_reductions'" in err and "got []" not in err, err


def test_inspect_names_the_worker_of_each_finding_in_a_run_of_several(tmp_path: Path, capsys) -> None:
    # trial 23b: a fault on rank 1 of a two-rank job, and rank 0's distributed_stop, looked alike
    run_dir = tmp_path / "run"
    for rank in (0, 1):
        with tripwire.Session({"out_dir": str(run_dir), "save": {"interval": 1}, "collections": ["losses"]},
                              rank=rank, world_size=2) as s:
            s.step("train", 0, {"loss": (1.0, "losses")})
            s.record_finding(tripwire.Finding("tree_depth", 0, "train", "round 0 added a tree of depth 12",
                                              worker=rank))
    assert main(["inspect", str(run_dir), "--width", "200"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "severity" in line)
    assert [c.strip() for c in header.split("┃")] == ["rule", "step", "mode", "worker", "severity", "message"]
    rows = [line.split("│") for line in out.splitlines() if line.strip().startswith("tree_depth")]
    assert sorted(r[3].strip() for r in rows) == ["0", "1"]


def test_inspect_of_a_one_worker_run_has_no_worker_column(tmp_path: Path, capsys) -> None:
    _make_run(tmp_path / "run")
    assert main(["inspect", str(tmp_path / "run"), "--width", "200"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "severity" in line)
    assert "worker" not in header
