"""Second held-out set: fault programs and healthy controls written after the rules were changed
with the first held-out set in view (``programs_holdout.py``), so the first held-out set is no longer
unseen. Other models (2-D CNN, LSTM, residual MLP with LayerNorm, deep Keras nets), data (make_moons,
make_blobs, make_friedman1, make_gaussian_quantiles, iris, 8x8 digits as images), losses (label
smoothing, MSE with missing targets), frameworks and APIs (Keras ``trainable=False``, Lightning
class-imbalanced data, ``XGBRegressor``). Each program is labelled with its expected rules from its
fault category (../../../shared/evaluation.md §1) before any rule ran on it; it is run once with the
final rules and no threshold is changed after. Run with ``run.py --set holdout2``."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from _frameworks import keras_run, lightning_run, xgb_run
from _harness import Result, digits, digits_relabelled, torch_loop
from _harness import seed_all as _seed, split as _split
from programs import program as _program

program = functools.partial(_program, set_="holdout2")
STEPS = 1200


def moons(seed: int, n: int = 2000, noise: float = 0.2) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import make_moons

    X, y = make_moons(n_samples=n, noise=noise, random_state=seed)
    return _split(X, y.astype(np.int64), seed)


def blobs(seed: int, n: int = 2400, centers: int = 5, std: float = 2.0) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=n, n_features=12, centers=centers, cluster_std=std, random_state=seed)
    return _split(X, y.astype(np.int64), seed)


def friedman(seed: int, n: int = 2000, noise: float = 1.0) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=n, n_features=10, noise=noise, random_state=seed)
    Xtr, ytr, Xva, yva = _split(X, y.astype(np.float32), seed)
    m, s = ytr.mean(), ytr.std()
    return Xtr, ((ytr - m) / s).astype(np.float32), Xva, ((yva - m) / s).astype(np.float32)


def quantiles(seed: int, n: int = 3000) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=n, n_features=6, n_classes=3, random_state=seed)
    return _split(X, y.astype(np.int64), seed)


def iris(seed: int) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return _split(X, y.astype(np.int64), seed)


def waves(seed: int, n: int = 1600, length: int = 20) -> tuple[np.ndarray, ...]:
    """Sequences of a noisy sine with random frequency and phase (2 features: value and its square);
    the class says whether the frequency is above the median."""
    rng = np.random.default_rng(seed)
    f = rng.uniform(0.05, 0.3, n)
    t = np.arange(length)
    x = np.sin(2 * np.pi * f[:, None] * t[None, :] + rng.uniform(0, 2 * np.pi, n)[:, None]) + rng.normal(0, 0.2, (n, length))
    X = np.stack([x, x**2 - 0.5], axis=-1).astype(np.float32)
    y = (f > np.median(f)).astype(np.int64)
    k = int(n * 0.75)
    return X[:k], y[:k], X[k:], y[k:]


def conv2d(classes: int = 10, channels: int = 8) -> Any:
    from collections import OrderedDict

    from torch import nn

    return nn.Sequential(OrderedDict([
        ("image", nn.Unflatten(1, (1, 8, 8))),
        ("conv1", nn.Conv2d(1, channels, 3, padding=1)), ("act1", nn.ReLU()),
        ("conv2", nn.Conv2d(channels, 2 * channels, 3, padding=1)), ("act2", nn.ReLU()), ("pool", nn.MaxPool2d(2)),
        ("flat", nn.Flatten()), ("fc", nn.Linear(2 * channels * 16, classes)),
    ]))


def lstm(features: int = 2, hidden: int = 16, classes: int = 2) -> Any:
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(features, hidden, batch_first=True)
            self.head = nn.Linear(hidden, classes)

        def forward(self, x: Any) -> Any:
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    return Net()


def residual_mlp(inp: int, width: int, blocks: int, classes: int) -> Any:
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.fc = nn.Linear(width, width)
            self.act = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return x + self.act(self.fc(self.norm(x)))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Linear(inp, width)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.head = nn.Linear(width, classes)

        def forward(self, x: Any) -> Any:
            return self.head(self.blocks(self.stem(x)))

    return Net()


def mlp(sizes: list[int], act: str = "relu") -> Any:
    from collections import OrderedDict

    from torch import nn

    layers: list[tuple[str, Any]] = []
    for i in range(len(sizes) - 1):
        layers.append((f"fc{i + 1}", nn.Linear(sizes[i], sizes[i + 1])))
        if i < len(sizes) - 2:
            layers.append((f"act{i + 1}", {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[act]()))
    return nn.Sequential(OrderedDict(layers))


def _cosine(total: int) -> Callable[[int], float]:
    return lambda step: 0.5 * (1 + math.cos(math.pi * step / total))


# ============================================================================================ faults
@program("h2_friedman_nan_targets", "torch", ("exploding_tensor",),
         "MLP regression on make_friedman1 where 1% of the training targets are missing (NaN)", onset="nonfinite")
def h2_friedman_nan_targets(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = friedman(seed)
    y = ytr.copy()
    y[np.random.default_rng(seed).random(len(y)) < 0.01] = np.nan
    return torch_loop(mlp([10, 64, 64, 1]), (Xtr, y, Xva, yva), seed=seed, steps=STEPS, lr=1e-3, loss="mse")


@program("h2_keras_deep_relu_normal_init", "keras", ("exploding_gradient",),
         "Keras 10-layer ReLU net, kernels N(0, 1) (RandomNormal(stddev=1)), make_blobs")
def h2_keras_deep_relu_normal_init(seed: int) -> Result:
    def layers(k: Any) -> list[Any]:
        init = k.initializers.RandomNormal(stddev=1.0, seed=seed)
        return [k.layers.Dense(48, activation="relu", kernel_initializer=init) for _ in range(10)] + [k.layers.Dense(5)]
    return keras_run(seed, layers, blobs(seed), epochs=20, lr=1e-3)


@program("h2_keras_deep_sigmoid", "keras", ("vanishing_gradient",), "Keras 12-layer sigmoid net on make_gaussian_quantiles")
def h2_keras_deep_sigmoid(seed: int) -> Result:
    return keras_run(seed, lambda k: [k.layers.Dense(32, activation="sigmoid") for _ in range(12)] + [k.layers.Dense(3)],
                     quantiles(seed), epochs=20, lr=1e-3)


@program("h2_lightning_dead_relu_bias", "lightning", ("dead_relu",), "Lightning ReLU MLP whose biases start at -6, make_blobs")
def h2_lightning_dead_relu_bias(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    net = mlp([12, 64, 64, 5])
    for m in net.modules():
        if isinstance(m, torch.nn.Linear) and m.out_features == 64:
            torch.nn.init.constant_(m.bias, -6.0)
    return lightning_run(seed, net, blobs(seed), epochs=20, lr=1e-3)


@program("h2_keras_tanh_large_init", "keras", ("saturated_activation", "poor_weight_initialization"),
         "Keras tanh MLP with kernels N(0, 4) on iris")
def h2_keras_tanh_large_init(seed: int) -> Result:
    def layers(k: Any) -> list[Any]:
        init = k.initializers.RandomNormal(stddev=4.0, seed=seed)
        return [k.layers.Dense(32, activation="tanh", kernel_initializer=init), k.layers.Dense(32, activation="tanh", kernel_initializer=init),
                k.layers.Dense(3)]
    return keras_run(seed, layers, iris(seed), epochs=200, lr=1e-3, batch=16)


@program("h2_friedman_inputs_x1000", "torch", ("input_not_normalized",), "friedman1 features scaled x1000 and shifted by 5000")
def h2_friedman_inputs_x1000(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = friedman(seed)
    return torch_loop(mlp([10, 64, 1]), (Xtr * 1000 + 5000, ytr, Xva * 1000 + 5000, yva), seed=seed, steps=STEPS, lr=1e-3, loss="mse")


@program("h2_keras_frozen_model", "keras", ("loss_not_decreasing",), "Keras model with model.trainable = False before compile")
def h2_keras_frozen_model(seed: int) -> Result:
    def layers(k: Any) -> list[Any]:
        out = [k.layers.Dense(32, activation="relu"), k.layers.Dense(5)]
        for layer in out:
            layer.trainable = False
        return out
    return keras_run(seed, layers, blobs(seed), epochs=20, lr=1e-3)


@program("h2_lstm_lr_tiny", "torch", ("loss_not_decreasing",), "LSTM on wave sequences, Adam with learning rate 1e-7")
def h2_lstm_lr_tiny(seed: int) -> Result:
    _seed(seed)
    return torch_loop(lstm(), waves(seed), seed=seed, steps=STEPS, lr=1e-7)


@program("h2_rmsprop_high_lr_oscillates", "torch", ("oscillating_loss",), "MLP on make_moons, RMSprop with learning rate 0.3",
         onset="first_swing")
def h2_rmsprop_high_lr(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([2, 64, 64, 2]), moons(seed), seed=seed, steps=STEPS, lr=0.3, optimizer="rmsprop")


@program("h2_moons_tiny_train_overfit", "torch", ("overfit",), "2x256 MLP on 40 noisy make_moons samples (noise 0.35)",
         onset="best_val")
def h2_moons_overfit(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = moons(seed, n=1000, noise=0.35)
    return torch_loop(mlp([2, 256, 256, 2]), (Xtr[:40], ytr[:40], Xva, yva), seed=seed, steps=STEPS, lr=3e-3, batch=20,
                      eval_every=20)


@program("h2_lightning_class_imbalance_97_3", "lightning", ("class_imbalance",),
         "Lightning MLP on 97:3 tabular classes (hard boundary), no class weights")
def h2_lightning_imbalance(seed: int) -> Result:
    import torch
    from sklearn.datasets import make_classification

    torch.manual_seed(seed)
    X, y = make_classification(n_samples=3000, n_features=16, n_informative=5, weights=[0.97, 0.03], class_sep=0.4,
                               flip_y=0.0, random_state=seed)
    return lightning_run(seed, mlp([16, 16, 2]), _split(X, y.astype(np.int64), seed), epochs=8, lr=1e-3)


@program("h2_conv2d_swapped_1_7", "torch", ("confusion",), "2-D CNN on 8x8 digit images, every training 1 labelled 7")
def h2_conv2d_swapped(seed: int) -> Result:
    _seed(seed)
    return torch_loop(conv2d(), digits_relabelled(seed, 1, 7), seed=seed, steps=STEPS, lr=1e-3)


@program("h2_xgb_regressor_deep", "xgboost", ("tree_depth",), "XGBRegressor, max_depth 14, min_child_weight 0 on friedman1")
def h2_xgb_regressor_deep(seed: int) -> Result:
    return xgb_run(seed, friedman(seed, noise=3.0), 60, sklearn=True, objective="reg:squarederror", eval_metric="rmse",
                   max_depth=14, min_child_weight=0, learning_rate=0.3)


@program("h2_xgb_moons_overfit", "xgboost", ("overfit",), "xgb.train eta 0.8, depth 12 on make_moons with noise 0.45",
         onset="best_val")
def h2_xgb_moons_overfit(seed: int) -> Result:
    return xgb_run(seed, moons(seed, n=1500, noise=0.45), 80, max_depth=12, eta=0.8)


# =========================================================================================== healthy
@program("h2_healthy_conv2d_digits", "torch", (), "2-D CNN on 8x8 digit images, Adam 1e-3")
def h2_healthy_conv2d(seed: int) -> Result:
    _seed(seed)
    return torch_loop(conv2d(), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("h2_healthy_lstm_waves", "torch", (), "LSTM on wave sequences, Adam 3e-3, cosine decay")
def h2_healthy_lstm(seed: int) -> Result:
    _seed(seed)
    return torch_loop(lstm(), waves(seed), seed=seed, steps=STEPS, lr=3e-3, schedule=_cosine(STEPS))


@program("h2_healthy_keras_iris", "keras", (), "Keras MLP on standardised iris, Adam 3e-3")
def h2_healthy_keras_iris(seed: int) -> Result:
    return keras_run(seed, lambda k: [k.layers.Dense(32, activation="relu"), k.layers.Dense(3)], iris(seed), epochs=60, lr=3e-3,
                     batch=16)


@program("h2_healthy_lightning_moons_cosine", "lightning", (), "Lightning MLP on make_moons, AdamW with cosine annealing")
def h2_healthy_lightning_moons(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    return lightning_run(seed, mlp([2, 64, 64, 2]), moons(seed), epochs=10, lr=3e-3, opt="adamw", weight_decay=1e-2,
                         scheduler=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10))


@program("h2_healthy_xgb_regressor", "xgboost", (), "XGBRegressor depth 4, learning rate 0.1, 120 rounds on friedman1")
def h2_healthy_xgb_regressor(seed: int) -> Result:
    return xgb_run(seed, friedman(seed), 120, sklearn=True, objective="reg:squarederror", eval_metric="rmse", max_depth=4,
                   learning_rate=0.1)


@program("h2_healthy_residual_layernorm", "torch", (), "residual MLP (4 blocks, LayerNorm) on make_gaussian_quantiles")
def h2_healthy_residual(seed: int) -> Result:
    _seed(seed)
    return torch_loop(residual_mlp(6, 64, 4, 3), quantiles(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("h2_healthy_blobs_sgd_nesterov", "torch", (), "MLP on overlapping make_blobs, SGD momentum 0.9, batch 16")
def h2_healthy_blobs_sgd(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([12, 64, 5]), blobs(seed, std=3.0), seed=seed, steps=STEPS, lr=0.02, optimizer="sgd", batch=16)
