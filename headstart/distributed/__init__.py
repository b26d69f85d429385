"""Training and prediction past one process: sharded, resumable runs and a Dask backend.

* :func:`train_sharded` -- this machine's threads; every finished run of labels is
  written as a shard at once; ``resume=True`` trains only the labels without a shard.
* :func:`train_dask` -- the same over a Dask cluster (label-range tasks; the client is
  the only writer of the model directory).
* :func:`predict_dask` -- top-k prediction with blocks of instances spread over Dask
  workers.
* :func:`merge` -- combine model directories trained separately (e.g. batch jobs over
  ``--first-label/--num-labels``) into one model.

Dask is an optional extra (``pip install headstart[dask]``): it is imported only when
a Dask function is called, never by ``import headstart`` or ``import
headstart.distributed``.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..params import TrainParams
from .sharded import PreparedData, ShardedResult, plan_shards, prepare_data, read_stats, train_sharded


def train_model_dir(X: Any, Y: Any, params: TrainParams, model_dir: str | os.PathLike, *,
                    first_label: int = 0, num_labels: int | None = None, shard_size: int | None = None,
                    resume: bool = False, scheduler: str | None = None, dask_workers: int | None = None,
                    progress: Callable[[int], None] | None = None, overwrite: bool | str = "complete",
                    **kw: Any) -> ShardedResult:
    """What ``headstart train`` runs for sharded training: this machine's threads
    (:func:`train_sharded`), or Dask (:func:`train_dask`) when ``scheduler`` (address or
    scheduler file) or ``dask_workers`` (a LocalCluster of that many workers) is given.  By default an existing model is replaced only when it
    is complete (an unfinished one asks for ``resume``)."""
    own_data = kw.pop("own_data", False)
    common = dict(first_label=first_label, num_labels=num_labels, shard_size=shard_size, resume=resume,
                  overwrite=overwrite, progress=progress, **kw)
    if scheduler or dask_workers:
        from .dask_backend import train_dask

        return train_dask(X, Y, params, model_dir, scheduler=scheduler, n_workers=dask_workers, **common)
    return train_sharded(X, Y, params, model_dir, own_data=own_data, **common)


_DASK_NAMES = ("train_dask", "predict_dask", "dask_client", "DaskUnavailableError",
              "DistributedTrainingError", "iter_predict_dask")
_MERGE_NAMES = ("merge", "MergeResult")


def __getattr__(name: str):
    if name in _DASK_NAMES:
        from . import dask_backend

        return getattr(dask_backend, name)
    if name in _MERGE_NAMES:
        from . import merging as _merge

        return getattr(_merge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["train_sharded", "train_model_dir", "prepare_data", "plan_shards", "read_stats", "PreparedData",
           "ShardedResult", *_DASK_NAMES, *_MERGE_NAMES]
