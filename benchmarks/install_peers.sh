#!/usr/bin/env bash
# Install the peers compared by benchmarks/compare.py into the project's venv (PyPI only).
# They are not dependencies of headstart; a missing one is reported as "not-installed".
#
#   bash benchmarks/install_peers.sh            # all peers
#   PY=.venv/bin/python bash benchmarks/install_peers.sh
#
# Versions seen working (2026-11): scikit-learn 1.9.1, napkinxc 0.7.2, omikuji 0.5.2,
# libmultilabel 0.10.0, libpecos 1.2.8, with numpy 2.4.6 and scipy 1.17.1.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
status=0
step() { echo "+ $*"; "$@" || { echo "FAILED: $*"; status=1; }; }

step "$PY" -m pip install --quiet 'liblinear-official>=2.45' scikit-learn napkinxc omikuji
# libmultilabel needs liblinear-multicore, which ships the same `liblinear` module as
# liblinear-official and would replace the reference: install it without dependencies and
# add the ones it imports (train_1vsrest strips -m, so the official build works).
step "$PY" -m pip install --quiet --no-deps libmultilabel
step "$PY" -m pip install --quiet pandas sparsekmeans psutil tqdm PyYAML
# libpecos pins numpy<2, scipy<1.14 and pulls torch/transformers for XR-Transformer; XR-Linear
# only needs its ctypes core, which works with numpy 2.
step "$PY" -m pip install --quiet --no-deps libpecos
"$PY" - <<'PY'
import importlib
for mod in ("liblinear", "sklearn", "napkinxc", "omikuji", "libmultilabel.linear", "pecos.xmc.xlinear.model"):
    try:
        importlib.import_module(mod)
        print(f"ok       {mod}")
    except Exception as e:  # noqa: BLE001
        print(f"missing  {mod}: {type(e).__name__}: {e}")
PY
exit $status
