"""``headstart compile [training options]``: compile the kernels ahead, into numba's cache.

Why a command.  headstart's kernels are numba functions compiled on first use for the
run's types and cached on disk (docs/design.md, "The first run"); a process that finds
them cached starts at once.  Every new environment pays the compilation once -- a
container image, a Dask worker without a shared cache, a CI job -- and where that
happens in the middle of the first real run, the run waits for it.  This command does it
ahead, like building a compiled extension at install time: it runs ``train``,
``predict`` and ``evaluate`` on a tiny generated data set with the given training
options (so exactly the specialisations those options need are compiled, with the first
run's helper process on the second core), and reads the same data as libsvm text.
``make venv`` runs it with the demo's options; run it in an image build or on each
Dask worker (``client.run``) with your own.

What it cannot do: options that change the kernels' types (another loss, regulariser,
initialiser or post-processing) compile their own specialisations, so compile with the
options you will train with (several times for several option sets: each adds to the
cache).  Nothing here is needed for correctness; a cache that is missing or stale (numba
keys it on the source files) is simply rebuilt on first use.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from . import common

NAME = "compile"
HELP = "compile the kernels for these training options ahead (numba's cache), e.g. at install time"
DESCRIPTION = """\
Compile headstart's kernels for 'headstart train' with the given training options, and for
'predict' and 'evaluate', into numba's on-disk cache, by running them on a tiny generated
data set.  Later processes load the compiled kernels instead of compiling them on their
first run.  Run it once per environment (an image build, each Dask worker without a shared
cache) and once per set of options that changes the loss, regulariser, initialiser or
post-processing."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_train_params(p)


def tiny_data(rows: int = 96, features: int = 48, labels: int = 12, seed: int = 0):
    """A small (X, Y) with every label having positives and negatives."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    Y = sp.lil_matrix((rows, labels), dtype=np.float32)
    X = sp.lil_matrix((rows, features), dtype=np.float32)
    for i in range(rows):
        for j in {i % labels, *rng.choice(labels, size=rng.integers(0, 3), replace=False).tolist()}:
            Y[i, j] = 1
        feats = rng.choice(features, size=int(rng.integers(1, 9)), replace=False)
        X[i, feats] = rng.random(feats.size) + 0.05
    return X.tocsr(), Y.tocsr()


def run(args: argparse.Namespace) -> int:
    from ..errors import ParameterError
    from ..io import read_libsvm, write_xmc
    from .main import main

    params = common.resolve_params(args)
    if args.print_params:
        print(params.to_json())
        return 0
    # these read files sized for the user's data, which the tiny set cannot match; their
    # kernels compile on the first real run
    if params.init == "pretrained" or params.weighting == "file":
        raise ParameterError("headstart compile cannot compile for --init pretrained or --weighting file (they "
                             "read files sized for your data); compile for the other options and let the first "
                             "run compile the rest")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="headstart-compile-") as tmp:
        folder = Path(tmp)
        X, Y = tiny_data()
        train, test = folder / "train.txt", folder / "test.txt"
        write_xmc(train, X, Y)
        write_xmc(test, X[::2], Y[::2])
        (folder / "params.json").write_text(params.to_json())
        model, pred = str(folder / "model"), str(folder / "pred.txt")
        steps = (["train", str(train), "-o", model, "--params", str(folder / "params.json"), "-q"],
                 ["predict", model, str(test), "-o", pred, "-k", "5", "-q"],
                 ["evaluate", "--predictions", pred, str(test), "--train", str(train), "-q"])
        for argv in steps:
            # the tiny set's metrics and warnings mean nothing (e.g. "mostly a zero start"
            # on its 12 random labels); errors still show
            logging.disable(logging.WARNING)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    rc = main(argv)
            finally:
                logging.disable(logging.NOTSET)
            if rc != 0:
                common.say(args, f"compiling failed in 'headstart {argv[0]}' (exit {rc})")
                return rc
        # the libsvm reader's kernels too: libsvm text is the XMC body with 1-based features
        write_xmc(folder / "one_based.txt", X, Y, one_based=True)
        (folder / "train.svm").write_text((folder / "one_based.txt").read_text().split("\n", 1)[1])
        read_libsvm(folder / "train.svm")
    common.say(args, f"compiled headstart's kernels for 'headstart train' with {_described(params)}, 'predict' "
                     f"and 'evaluate' in {time.perf_counter() - t0:.1f} s (numba's cache; later runs load them)")
    return 0


def _described(params) -> str:
    return f"loss {params.loss}, regularizer {params.regularizer}, init {params.init}"
