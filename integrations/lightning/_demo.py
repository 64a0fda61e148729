"""``tripwire demo``: a Lightning MLP on scikit-learn's digits (offline) with a planted fault.

The faulty run uses a learning rate of 4.0 for plain SGD: the first large steps push every ReLU unit
into its dead zone, the gradients vanish and the loss stays at chance level (about 2.3) for the rest
of training. The ``default`` rule set (``exploding_tensor``, ``loss_not_decreasing``,
``oscillating_loss``, ``vanishing_gradient``, ``exploding_gradient``, ``loss_scale_collapse``) finds
it and stops training.
``--healthy`` runs the fixed twin (learning rate 0.3) to completion without a finding. Lightning and
torch are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

FAULTY_LR = 4.0
HEALTHY_LR = 0.3


#: The seeds ``--seed`` accepts: numpy's (Lightning's seed_everything passes it on).
SEED_MAX = 2**32 - 1
_ACCEPTED_SEED = f"an integer from 0 to {SEED_MAX}"
_ACCEPTED_EPOCHS = "an integer >= 1"


def register(subparsers: Any) -> None:
    from tripwire._cli import exit_codes, typed

    p = subparsers.add_parser(
        "demo",
        help="train a small Lightning model with a planted fault and watch tripwire stop it",
        description=__doc__.replace("``", "`"),  # (one backtick reads better in a terminal)
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.fill(exit_codes("0 trained (stopped by a rule or to the end)",
                                        "2 bad input (the reason on stderr, one line): a flag's value, an --out-dir "
                                        "that cannot hold a run, lightning or scikit-learn missing"), 100),
    )
    p.add_argument("--healthy", action="store_true", help="run the fixed twin (no fault): it trains to the end")
    p.add_argument("--out-dir", default=None, help="where to store the run (default: tripwire-runs/demo-<time>)")
    p.add_argument("--max-epochs", type=typed(int, _ACCEPTED_EPOCHS), default=8,
                   help="epochs to train at most, >= 1 (default: 8)")
    p.add_argument("--seed", type=typed(int, _ACCEPTED_SEED), default=0,
                   help=f"random seed, 0 to {SEED_MAX} (default: 0)")
    p.set_defaults(func=run_demo)


def build_config(out_dir: str) -> dict[str, Any]:
    """The demo's config: the ``default`` rule set, each rule stopping training when it fires."""
    return {
        "out_dir": out_dir,
        "save": {"interval": 5, "modes": {"eval": {"interval": 1}}},
        "collections": ["losses", "metrics", "gradients"],
        "rules": [{"name": "default", "actions": ["record", "stop_training"]}],
    }


def check_out_dir_writable(out_dir: str | os.PathLike[str]) -> None:
    """Make ``out_dir`` (as given: no ``~`` or ``$VAR`` expanded; and the directories above it) and write a probe file in it, removed again:
    a :class:`~tripwire.ConfigError` worded as the run writer words it (``out_dir: got '/proc/x',
    which this process cannot create or write (...)``) where either fails. The demo calls it before
    its banner, so that an ``--out-dir`` that cannot hold a run is refused with nothing on stdout
    (trial 32f F3: ``--out-dir /proc/x`` passed the config's checks and was refused by the writer,
    at the first step, after the banner). The directory it made is kept: the run is written there."""
    from tripwire._errors import ConfigError
    from tripwire._writer import _cannot_write

    path = Path(out_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(_cannot_write(path, exc)) from exc


def check_out_dir_new(out_dir: str | os.PathLike[str]) -> None:
    """Refuse an ``out_dir`` that holds a run already (trial 40b F2: ``--out-dir`` of a Keras run had the
    demo's Lightning training appended to it, with a WARNING only, and the run then mixed the two
    models' tensors): a :class:`~tripwire.ConfigError` naming the run, before the banner."""
    from tripwire._errors import ConfigError
    from tripwire._format import RUN_FILE

    path = Path(out_dir)
    if (path / RUN_FILE).exists():
        raise ConfigError(f"--out-dir: got {str(out_dir)!r}, which holds a run already; accepted: a new or empty "
                          f"directory (the demo writes a run of its own; leave --out-dir out for a new "
                          f"tripwire-runs/demo-<time>)")


def run_demo(args: argparse.Namespace) -> int:
    from tripwire._errors import ConfigError

    if args.max_epochs < 1:
        raise ConfigError(f"--max-epochs: got {args.max_epochs}; accepted: {_ACCEPTED_EPOCHS}")
    if not 0 <= args.seed <= SEED_MAX:  # (trial 22k: -5 was numpy's ValueError, a traceback, after the imports)
        raise ConfigError(f"--seed: got {args.seed}; accepted: {_ACCEPTED_SEED}")
    import logging
    import warnings

    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        from tripwire._errors import missing_extra

        raise missing_extra("scikit-learn", "lightning", exc) from exc
    import lightning as L

    from . import TripwireCallback

    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    L.seed_everything(args.seed, verbose=False)

    class DigitsMLP(L.LightningModule):
        def __init__(self, lr: float) -> None:
            super().__init__()
            self.lr = lr
            self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            logits = self.net(x)
            self.log("val_loss", nn.functional.cross_entropy(logits, y))
            self.log("val_acc", (logits.argmax(1) == y).float().mean())

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.from_numpy(np.random.default_rng(args.seed).permutation(len(x)))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    train = DataLoader(TensorDataset(x[:n_train], y[:n_train]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[n_train:], y[n_train:]), batch_size=256)

    out_dir = args.out_dir or time.strftime("tripwire-runs/demo-%Y%m%d-%H%M%S")
    lr = HEALTHY_LR if args.healthy else FAULTY_LR
    label = "healthy twin" if args.healthy else "planted fault"
    # made before the banner: an --out-dir that cannot hold a run is refused with nothing on stdout (trial 27c)
    try:
        callback = TripwireCallback(build_config(out_dir))
        # (trial 32f F3: /proc/x passed the callback's checks, and was refused after the banner; the config's
        # out_dir is the one given with ~ and $VAR expanded, as the run is written there)
        check_out_dir_writable(callback.config.resolved_out_dir())
        check_out_dir_new(callback.config.resolved_out_dir())
    except ConfigError as exc:  # (the flag's name, as the demo's other errors say it; trial 42f)
        if str(exc).startswith("out_dir: "):
            raise ConfigError(f"--out-dir: {str(exc)[len('out_dir: '):]}") from exc
        raise
    print(f"tripwire demo ({label}): a 3-layer MLP on scikit-learn digits, SGD with learning rate {lr}, "
          f"up to {args.max_epochs} epochs ({args.max_epochs * len(train)} steps)")
    trainer = L.Trainer(max_epochs=args.max_epochs, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, callbacks=[callback])
    started = time.perf_counter()
    trainer.fit(DigitsMLP(lr), train, val)
    elapsed = time.perf_counter() - started
    planned = args.max_epochs * len(train)

    findings = [f for f in callback.findings if f.kind == "finding"]
    print()
    if callback.stopped_by is not None:
        f = callback.stopped_by
        # (steps numbered from 0, as the run and its findings number them; trainer.global_step
        # counts the steps done)
        print(f"tripwire stopped training after step {trainer.global_step - 1} ({trainer.global_step} of {planned} "
              f"planned steps trained, {elapsed:.1f} s): rule {f.rule!r} fired at step {f.step} ({f.mode}).")
    else:
        print(f"training ran to the end: {trainer.global_step} steps in {elapsed:.1f} s.")
    if findings:
        print(f"findings ({len(findings)}):")
        for f in findings:
            print(f"  - {f}")
    else:
        print("findings: none")
    val_acc = trainer.callback_metrics.get("val_acc")
    if val_acc is not None:
        print(f"last validation accuracy: {float(val_acc):.3f}")
    print()
    print(f"the run is stored in {callback.out_dir}")
    print("inspect it with:")
    print(f"  tripwire inspect {callback.out_dir}")
    print("or in Python:")  # (lines that run as pasted: trial 19f)
    print("  import tripwire")
    print(f"  run = tripwire.open_run({str(callback.out_dir)!r})")
    print("  print(run.findings); print(run.series('loss', 'raw', 'train'))")
    # (trial 26f: run.dataframe() failed in the quick start's environment, which has no pandas)
    print("  # run.dataframe(): every scalar as a pandas DataFrame, with the pandas extra (pip install -e '.[pandas]')")
    if not args.healthy:
        print("\nrun the fixed twin with: tripwire demo --healthy")
    return 0
