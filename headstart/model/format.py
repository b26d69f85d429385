"""The on-disk model format: a directory of checksummed, sharded ``.npz`` files.

Layout of a model directory::

    manifest.json                  what is in the directory; the single source of truth
    preprocessing.npz              ``normalize`` (bool) and, for tf-idf, ``idf`` (float32), or
                                   where most features have idf 0 its nonzeros: ``idf_ids``
                                   (int64, increasing) and ``idf_values`` (float32)
    label_counts.npz               ``label_counts`` (int64, label_space) when known
    shards/labels-AAAAAAA-BBBBBBB.npz   weights of labels AAAAAAA..BBBBBBB (inclusive)

``manifest.json``::

    {"format": "headstart-model", "version": 1,
     "n_features": F, "label_space": L, "n_train": N,
     "params": {... TrainParams.to_dict() ...},
     "preprocessing": {"normalize": bool, "tfidf": bool},
     "shards": [{"file": "shards/labels-0000000-0000159.npz", "first_label": 0,
                 "num_labels": 160, "nnz": 1234, "sha256": "..."}, ...],
     "extra_files": {"preprocessing.npz": "<sha256>", "label_counts.npz": "<sha256>"},
     "data_sha256": "..."}          # optional: the preprocessed training data's digest

``data_sha256`` (written by ``headstart train`` and the sharded trainer) lets resuming and
merging refuse a model trained on other data of the same shapes and label counts; a
model without it (written before it existed, or by :func:`save_model`) is not checked.

A shard holds the CSR arrays of its labels (``indptr`` int64, ``indices`` int32,
``data`` float32), ``intercept`` (float32), ``shape`` (int64 ``[num_labels, n_features]``)
and ``first_label`` (int64 scalar).

Safety rules
------------
* Nothing is ever unpickled or evaluated: every ``.npz`` is opened with
  ``allow_pickle=False`` and an object array is reported as an error.  File names in the
  manifest must match the shard naming pattern, so a manifest cannot point outside the
  directory.
* Every file is checked against the sha256 in the manifest before it is parsed (the
  bytes that are hashed are the bytes that are parsed), then its arrays are checked:
  keys, dtypes, shapes, CSR structure (monotone ``indptr``, sorted unique column indices
  within ``[0, n_features)``) and finiteness.
* Writes are atomic (:mod:`headstart.io.atomic`).  Single files are written to a
  temporary name in the same directory, fsync'ed and ``os.replace``'d.  Whole models (:func:`save_model`,
  :func:`merge_models`, :meth:`ModelWriter.create`) are built in a temporary sibling
  directory and renamed into place; replacing an existing model renames the old one
  aside first and deletes it after the new one is in place (a crash in that instant
  leaves the old model as ``.NAME.old-*`` next to the target, never a mixed directory).
* The ``shards`` list of the manifest decides which labels are finished.
  :meth:`ModelWriter.add_shard` writes the shard file first and the manifest last, so a
  crash in between leaves an unlisted file, which readers ignore and
  :meth:`ModelWriter.open` deletes.

Gaps
----
A model whose shards do not cover ``[0, label_space)`` (an interrupted training run, or
one piece of a distributed run) has *gaps*.  :func:`load_model` refuses it unless
``allow_gaps=True``; then the returned model spans from the first to the last covered
label, labels inside holes get an empty weight row and intercept 0, and the model gets
an attribute ``missing_ranges`` (list of ``(start, stop)`` global label ranges not
covered in ``[0, label_space)``).  Prediction (:mod:`headstart.prediction`) never
returns a label listed there, and :func:`save_model` does not write them as shards.

Where each part lives
---------------------
:mod:`.archive` (checksummed ``.npz`` files), :mod:`.manifest` (schema, validation,
writing), :mod:`.ranges` (label ranges and gaps), :mod:`.shards` (shard files),
:mod:`.extras` (preprocessing and label counts), :mod:`.reader` (:func:`load_model`),
:mod:`.writer` (:func:`save_model`, :class:`ModelWriter`), :mod:`.merge`
(:func:`merge_models`).  This module gathers their public names.
"""

from .extras import read_extras
from .manifest import (EXTRA_FILES, FORMAT_NAME, FORMAT_VERSION, IGNORED_PARAMS, LABEL_COUNTS_FILE, MANIFEST,
                       MAX_DIM, OPTIONAL_MANIFEST_KEYS, PREPROCESSING_FILE, SHARD_DIR, params_difference,
                       read_manifest, shard_file_name)
from .merge import merge_models
from .ranges import Range, finished_ranges_of, missing_ranges_of
from .reader import load_model
from .shards import iter_shards
from .writer import ModelWriter, save_model

__all__ = ["EXTRA_FILES", "FORMAT_NAME", "FORMAT_VERSION", "IGNORED_PARAMS", "LABEL_COUNTS_FILE", "MANIFEST",
           "MAX_DIM", "OPTIONAL_MANIFEST_KEYS", "PREPROCESSING_FILE", "SHARD_DIR", "ModelWriter", "Range", "finished_ranges_of",
           "iter_shards", "load_model", "merge_models", "missing_ranges_of", "params_difference",
           "read_extras", "read_manifest", "save_model", "shard_file_name"]
