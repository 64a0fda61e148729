"""tripwire with ``xgboost.dask`` on a 3-worker local cluster.

    python examples/xgboost_dask.py           # cluster start-up plus a second of training

Needs: pip install -e ".[xgboost,dask]" (or ".[xgboost-cpu,dask]"; in a clone)

The callback is pickled to every worker; rank 0 captures and writes the run, every worker takes
the same stop decision at the same round, and the client reads the findings back from the run
directory.
"""

from __future__ import annotations

import tempfile

import numpy as np


def main() -> None:
    import dask.array as da
    from distributed import Client, LocalCluster
    from xgboost import dask as dxgb

    import tripwire
    from tripwire.integrations.xgboost import TripwireCallback

    with LocalCluster(n_workers=3, threads_per_worker=1, dashboard_address=":0") as cluster, Client(cluster) as client:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(3000, 10))
        y = ((X[:, 0] + rng.normal(scale=1.5, size=3000)) > 0).astype(float)
        dX, dy = da.from_array(X, chunks=(500, 10)), da.from_array(y, chunks=500)
        dtrain = dxgb.DaskDMatrix(client, dX[:2400], dy[:2400])
        dvalid = dxgb.DaskDMatrix(client, dX[2400:], dy[2400:])
        out_dir = tempfile.mkdtemp(prefix="tripwire-xgb-dask-")
        cb = TripwireCallback(out_dir=out_dir, save_interval=1,
                              collections=["metrics", "labels", "predictions"],
                              rules=[{"name": "tree_depth", "max_depth": 6, "actions": ["stop_training"]}])
        out = dxgb.train(client, {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 12},
                         dtrain, 50, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb])
        run = tripwire.open_run(out_dir)
        print(f"{out['booster'].num_boosted_rounds()} of 50 rounds on 3 workers; run status {run.status}, "
              f"written by ranks {run.workers}; validation labels gathered: {run.array('labels', 0, mode='eval').shape}")
        print(f"stopped by: {cb.stopped_by}")


if __name__ == "__main__":
    main()
