"""headstart: fast one-vs-all training for extreme multi-label classification.

DiSMEC-style one-vs-all linear models trained with LIBLINEAR's Newton method, started
from the average-of-positives initialisation of Schultheis & Babbar, "Speeding-up
One-vs-All Training for Extreme Classification via Smart Initialization".
"""

from . import _compile  # noqa: F401  (numba settings, before any kernel compiles)
from .errors import DataFormatError, HeadstartError, ModelFormatError, ParameterError
from .estimator import OvAClassifier, load, precision_at_k_scorer
from .params import TrainParams

# The package's one version: pyproject.toml reads it (tool.setuptools.dynamic) as a
# literal, without importing headstart, so it stays a plain string.
__version__ = "0.1.0"


def __getattr__(name):
    # readers are imported lazily so that `import headstart` stays light
    if name in ("read_xmc", "read_libsvm", "read_slice", "read_data", "write_xmc"):
        from . import io

        return getattr(io, name)
    raise AttributeError(name)


__all__ = ["OvAClassifier", "TrainParams", "load", "precision_at_k_scorer", "read_xmc", "read_libsvm", "read_slice", "read_data",
           "write_xmc", "DataFormatError", "HeadstartError", "ModelFormatError", "ParameterError"]
