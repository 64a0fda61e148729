"""tripwire with Keras 3: catch a diverging fit, then look at what was captured.

    KERAS_BACKEND=torch python examples/keras_quickstart.py [OUT_DIR]

Needs: pip install -e ".[keras]"   (in a clone: Keras, torch as its backend, scikit-learn for the data)

Trains a small MLP on scikit-learn's digits twice: once healthy, once with a learning rate far
too high. The built-in ``exploding_tensor`` rule stops the second fit at the first save step
(every 5 steps here) after a gradient or a loss turns NaN/Inf, naming the step where it did.
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402


def model(lr: float) -> keras.Model:
    keras.utils.set_random_seed(0)
    net = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(64, activation="relu", name="hidden"),
        keras.layers.Dense(10, name="logits"),
    ])
    net.compile(keras.optimizers.SGD(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
    return net


def main(out: str) -> None:
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    for label, lr in (("healthy", 0.05), ("diverging", 1e12)):
        cb = TripwireCallback(
            out_dir=os.path.join(out, label),
            save_interval=5,
            collections=["losses", "metrics", "weights", "gradients", "activations", "optimizer"],
            rules=[{"name": "exploding_tensor", "actions": ["log", "stop_training"]}],
        )
        history = model(lr).fit(x, y, batch_size=64, epochs=3, validation_split=0.2, verbose=0, callbacks=[cb])
        epochs = len(history.history["loss"])
        print(f"{label}: {epochs} epoch(s); stopped by: {cb.stopped_by or 'nothing'}")
        run = tripwire.open_run(os.path.join(out, label))
        steps, loss = run.series("loss")
        print(f"  run {run.status}, {len(run.tensor_names())} tensors; loss at steps {steps[:4].tolist()}: "
              f"{np.round(loss[:4], 3).tolist()}")
        steps, val = run.series("val_loss", mode="eval")
        print(f"  val_loss per epoch (eval steps {steps.tolist()}): {np.round(val, 3).tolist()}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tripwire-keras-"))
