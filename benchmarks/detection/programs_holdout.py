"""Held-out set: fault programs and healthy controls written after the rules were calibrated on the
development set (``programs.py``), with other models (1-D CNN, RNN, GRU, deep tanh nets), data sets
(synthetic signals and sequences, wine, breast cancer, diabetes), optimisers (RMSprop, AdamW,
SGD+momentum), APIs (XGBoost's scikit-learn API) and training set-ups (schedulers, dropout, weight
decay, bfloat16 autocast, gradient clipping). Each is labelled with its expected rules from its
fault category (../../../shared/evaluation.md §1) before any rule ran on it; no threshold was
changed for this set. Run with ``run.py --set holdout``."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from _frameworks import keras_run, lightning_run, xgb_run
from _harness import Result, tabular, torch_loop
from _harness import seed_all as _seed, split as _split
from programs import program as _program

program = functools.partial(_program, set_="holdout")
STEPS = 1500


def wine(seed: int, standardise: bool = True) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    return _split(X, y.astype(np.int64), seed, standardise)


def cancer(seed: int) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return _split(X, y.astype(np.int64), seed)


def diabetes(seed: int) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    return _split(X, y.astype(np.float32), seed)


def signals(seed: int, n: int = 2000, length: int = 64, flat: float = 0.0) -> tuple[np.ndarray, ...]:
    """Noisy sinusoids of 3 frequency bands (classes), one channel, standardised per sample as a
    sensor pipeline would; ``flat``: the fraction of samples from a dead sensor (constant signal)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    t = np.arange(length, dtype=np.float32)
    freq = np.array([0.05, 0.12, 0.25])[y] * rng.uniform(0.85, 1.15, n)
    X = np.sin(2 * np.pi * freq[:, None] * t[None, :] + rng.uniform(0, 2 * np.pi, n)[:, None])
    X = 5.0 + 3.0 * X + rng.normal(0, 1.0, X.shape)
    dead = rng.random(n) < flat
    X[dead] = 5.0
    with np.errstate(invalid="ignore", divide="ignore"):
        X = (X - X.mean(1, keepdims=True)) / X.std(1, keepdims=True)  # 0/0 = NaN for a flat signal
    X = X[:, None, :].astype(np.float32)
    k = int(n * 0.75)
    return X[:k], y[:k].astype(np.int64), X[k:], y[k:].astype(np.int64)


def sequences(seed: int, n: int = 2000, length: int = 30) -> tuple[np.ndarray, ...]:
    """4 standard-normal features per time step; the class says whether feature 0 sums to > 0."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, length, 4)).astype(np.float32)
    y = (X[:, :, 0].sum(1) > 0).astype(np.int64)
    k = int(n * 0.75)
    return X[:k], y[:k], X[k:], y[k:]


def cnn1d(classes: int = 3) -> Any:
    from collections import OrderedDict

    from torch import nn

    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv1d(1, 8, 5, padding=2)), ("act1", nn.ReLU()), ("pool1", nn.MaxPool1d(2)),
        ("conv2", nn.Conv1d(8, 16, 5, padding=2)), ("act2", nn.ReLU()), ("pool2", nn.AdaptiveAvgPool1d(1)),
        ("flat", nn.Flatten()), ("fc", nn.Linear(16, classes)),
    ]))


def recurrent(kind: str, hidden: int = 32) -> Any:
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = (nn.GRU if kind == "gru" else nn.RNN)(4, hidden, batch_first=True)
            self.fc = nn.Linear(hidden, 2)

        def forward(self, x: Any) -> Any:
            out, _ = self.rnn(x)
            return self.fc(out[:, -1])

    return Net()


def mlp_drop(sizes: list[int], act: str = "relu", dropout: float = 0.0) -> Any:
    from collections import OrderedDict

    from torch import nn

    layers: list[tuple[str, Any]] = []
    for i in range(len(sizes) - 1):
        layers.append((f"fc{i + 1}", nn.Linear(sizes[i], sizes[i + 1])))
        if i < len(sizes) - 2:
            layers.append((f"act{i + 1}", {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[act]()))
            if dropout:
                layers.append((f"drop{i + 1}", nn.Dropout(dropout)))
    return nn.Sequential(OrderedDict(layers))


def _one_cycle(total: int, warm: float = 0.3) -> Callable[[int], float]:
    """Peak-normalised one-cycle multiplier: 0.04 -> 1 (cosine) -> ~0."""
    w = int(total * warm)

    def f(step: int) -> float:
        if step < w:
            return 0.04 + 0.96 * 0.5 * (1 - math.cos(math.pi * step / w))
        return 0.5 * (1 + math.cos(math.pi * (step - w) / (total - w)))
    return f


# ============================================================================================ faults
@program("ho_rnn_large_lr", "torch", ("exploding_gradient",), "vanilla tanh RNN on 30-step sequences, SGD+momentum lr 2.0, no clipping")
def ho_rnn_large_lr(seed: int) -> Result:
    _seed(seed)
    return torch_loop(recurrent("rnn"), sequences(seed), seed=seed, steps=STEPS, lr=2.0, optimizer="sgd", momentum=0.9)


@program("ho_cnn1d_flat_sensor_nan", "torch", ("exploding_tensor",),
         "1-D CNN on per-sample standardised signals; 2% flat signals become 0/0 = NaN", onset="nonfinite")
def ho_cnn1d_flat_sensor_nan(seed: int) -> Result:
    _seed(seed)
    return torch_loop(cnn1d(), signals(seed, flat=0.02), seed=seed, steps=STEPS, lr=1e-3)


@program("ho_deep_tanh_small_init", "torch", ("vanishing_gradient", "poor_weight_initialization"),
         "10-layer tanh net of width 32, N(0, 0.01) init, SGD")
def ho_deep_tanh_small_init(seed: int) -> Result:
    import torch

    _seed(seed)
    model = mlp_drop([30] + [32] * 9 + [2], act="tanh")
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, 0.0, 0.01)
            torch.nn.init.zeros_(m.bias)
    return torch_loop(model, cancer(seed), seed=seed, steps=STEPS, lr=0.01, optimizer="sgd")


@program("ho_keras_shuffled_labels", "keras", ("loss_not_decreasing",), "Keras MLP, SGD, breast-cancer labels shuffled")
def ho_keras_shuffled_labels(seed: int) -> Result:
    Xtr, ytr, Xva, yva = cancer(seed)
    rng = np.random.default_rng(seed + 7)
    return keras_run(seed, lambda k: [k.layers.Dense(64, activation="relu"), k.layers.Dense(2)],
                     (Xtr, rng.permutation(ytr), Xva, rng.permutation(yva)), epochs=100, lr=0.01,
                     optimizer=lambda k, lr: k.optimizers.SGD(lr))


@program("ho_keras_softmax_one_unit", "keras", ("loss_not_decreasing",),
         "Keras binary classifier with Dense(1, activation='softmax'): the output is always 1")
def ho_keras_softmax_one_unit(seed: int) -> Result:
    return keras_run(seed, lambda k: [k.layers.Dense(32, activation="relu"), k.layers.Dense(1, activation="softmax")],
                     cancer(seed), epochs=100, lr=1e-3, loss=lambda k: k.losses.BinaryCrossentropy())


@program("ho_cnn1d_adam_missing_zero_grad", "torch", ("oscillating_loss",), "1-D CNN, Adam 1e-3, optimizer.zero_grad() never called",
         onset="first_swing")
def ho_cnn1d_missing_zero_grad(seed: int) -> Result:
    _seed(seed)
    return torch_loop(cnn1d(), signals(seed), seed=seed, steps=STEPS, lr=1e-3, zero_grad=False)


@program("ho_diabetes_targets_x1000", "torch", ("exploding_gradient",), "diabetes regression, raw targets x1000 (MSE), RMSprop")
def ho_diabetes_targets_x1000(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = diabetes(seed)
    return torch_loop(mlp_drop([10, 64, 64, 1]), (Xtr, ytr * 1000, Xva, yva * 1000), seed=seed, steps=STEPS, lr=1e-3,
                      optimizer="rmsprop", loss="mse")


@program("ho_xgb_sklearn_target_leak", "xgboost", ("feature_importance_overweight",),
         "XGBClassifier (sklearn API) on breast cancer plus a target-encoded leak column")
def ho_xgb_sklearn_leak(seed: int) -> Result:
    Xtr, ytr, Xva, yva = cancer(seed)
    rng = np.random.default_rng(seed)

    def leak(y: np.ndarray) -> np.ndarray:
        return (y * 0.8 + 0.1 + rng.normal(0, 0.15, len(y))).astype(np.float32)
    return xgb_run(seed, (np.c_[Xtr, leak(ytr)], ytr, np.c_[Xva, leak(yva)], yva), 150, sklearn=True, max_depth=3,
                   learning_rate=0.05)


@program("ho_xgb_sklearn_unbounded_depth", "xgboost", ("tree_depth",),
         "XGBClassifier, lossguide growth with max_depth=0 (unlimited), min_child_weight=0, 20% label noise")
def ho_xgb_unbounded(seed: int) -> Result:
    return xgb_run(seed, tabular(seed, n=4000, features=30, flip_y=0.2), 80, sklearn=True, grow_policy="lossguide",
                   max_depth=0, max_leaves=0, min_child_weight=0, learning_rate=0.3)


@program("ho_lightning_label_noise_overfit", "lightning", ("overfit",),
         "Lightning, 2x512 MLP on breast cancer with 35% of the training labels flipped, 150 epochs", onset="best_val")
def ho_lightning_overfit(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    Xtr, ytr, Xva, yva = cancer(seed)
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(len(ytr)) < 0.35, 1 - ytr, ytr)
    return lightning_run(seed, mlp_drop([30, 512, 512, 2]), (Xtr, y, Xva, yva), epochs=150, lr=1e-3)


@program("ho_sigmoid_raw_wine", "torch", ("saturated_activation", "input_not_normalized"),
         "sigmoid MLP on raw wine features (proline ~ 300-1700)")
def ho_sigmoid_raw_wine(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp_drop([13, 32, 32, 3], act="sigmoid"), wine(seed, standardise=False), seed=seed, steps=STEPS, lr=1e-3)


@program("ho_rmsprop_class_imbalance", "torch", ("class_imbalance",), "3 classes 90:8:2, RMSprop, no class weights")
def ho_rmsprop_imbalance(seed: int) -> Result:
    _seed(seed)
    data = tabular(seed, n=4000, classes=3, weights=[0.9, 0.08, 0.02], class_sep=0.6, flip_y=0.0, informative=6)
    return torch_loop(mlp_drop([20, 32, 3]), data, seed=seed, steps=STEPS, lr=1e-3, optimizer="rmsprop")


# =========================================================================================== healthy
@program("ho_healthy_cnn1d_onecycle_adamw", "torch", (), "1-D CNN, AdamW (weight decay 1e-2), one-cycle schedule")
def ho_healthy_cnn1d(seed: int) -> Result:
    _seed(seed)
    return torch_loop(cnn1d(), signals(seed), seed=seed, steps=STEPS, lr=3e-3, optimizer="adamw", weight_decay=1e-2,
                      schedule=_one_cycle(STEPS))


@program("ho_healthy_gru_clipped", "torch", (), "GRU on sequences, Adam 3e-3, gradient norm clipped at 1")
def ho_healthy_gru(seed: int) -> Result:
    _seed(seed)
    return torch_loop(recurrent("gru"), sequences(seed), seed=seed, steps=STEPS, lr=3e-3, clip=1.0)


@program("ho_healthy_dropout_weight_decay", "torch", (), "MLP with dropout 0.3, SGD+momentum, weight decay 5e-4, standardised wine")
def ho_healthy_dropout(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp_drop([13, 64, 64, 3], dropout=0.3), wine(seed), seed=seed, steps=600, lr=0.01, optimizer="sgd",
                      weight_decay=5e-4, eval_every=20)


@program("ho_healthy_bf16_autocast", "torch", (), "MLP under bfloat16 autocast (mixed precision), 5-class tabular data")
def ho_healthy_bf16(seed: int) -> Result:
    _seed(seed)
    data = tabular(seed, n=4000, features=40, classes=5, informative=12, class_sep=1.5, flip_y=0.02)
    return torch_loop(mlp_drop([40, 128, 64, 5]), data, seed=seed, steps=STEPS, lr=1e-3, amp=True)


@program("ho_healthy_keras_bn_dropout", "keras", (), "Keras, BatchNormalization + Dropout, sigmoid output, binary cross-entropy")
def ho_healthy_keras(seed: int) -> Result:
    def layers(k: Any) -> list[Any]:
        return [k.layers.Dense(64), k.layers.BatchNormalization(), k.layers.Activation("relu"), k.layers.Dropout(0.3),
                k.layers.Dense(1, activation="sigmoid")]
    return keras_run(seed, layers, cancer(seed), epochs=30, lr=1e-3, loss=lambda k: k.losses.BinaryCrossentropy())


@program("ho_healthy_xgb_sklearn_subsample", "xgboost", (), "XGBClassifier, depth 4, learning rate 0.05, subsample 0.8, 150 rounds")
def ho_healthy_xgb(seed: int) -> Result:
    return xgb_run(seed, cancer(seed), 150, sklearn=True, max_depth=4, learning_rate=0.05, subsample=0.8, colsample_bytree=0.8)


@program("ho_healthy_lightning_steplr", "lightning", (), "Lightning MLP, SGD+momentum 0.05 with StepLR (x0.3 every 4 epochs)")
def ho_healthy_lightning(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    data = tabular(seed, n=3000, classes=3, informative=8, class_sep=1.2, flip_y=0.03)
    return lightning_run(seed, mlp_drop([20, 64, 64, 3]), data, epochs=12, lr=0.05, opt="sgd_momentum",
                         scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=4, gamma=0.3))
