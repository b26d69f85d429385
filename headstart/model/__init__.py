"""The in-memory model (:class:`OvAModel`) and its safe, sharded on-disk format
(described in :mod:`headstart.model.format`)."""

from .extras import read_extras
from .manifest import params_difference, read_manifest
from .merge import merge_models
from .model import OvAModel, Preprocessing
from .ranges import finished_ranges_of, missing_ranges_of
from .reader import load_model
from .shards import iter_shards
from .writer import ModelWriter, save_model

__all__ = ["OvAModel", "Preprocessing", "ModelWriter", "save_model", "load_model", "iter_shards",
           "read_manifest", "read_extras", "merge_models", "finished_ranges_of", "missing_ranges_of",
           "params_difference"]
