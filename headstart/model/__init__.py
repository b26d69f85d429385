"""The in-memory model (:class:`OvAModel`) and its safe, sharded on-disk format."""

from .format import (ModelWriter, finished_ranges_of, iter_shards, load_model, merge_models, read_extras,
                     missing_ranges_of, params_difference, read_manifest, save_model)
from .model import OvAModel, Preprocessing

__all__ = ["OvAModel", "Preprocessing", "ModelWriter", "save_model", "load_model", "iter_shards",
           "read_manifest", "read_extras", "merge_models", "finished_ranges_of", "missing_ranges_of",
           "params_difference"]
