"""Helpers shared by the subcommands: options generated from TrainParams, data options,
progress display and small checks done before long work starts."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from ..errors import DataFormatError, ParameterError
from .. import params as _params
from ..params import TrainParams

log = logging.getLogger("headstart.cli")

# --------------------------------------------------------------------------- training options
#: option strings of a TrainParams field when they differ from ``--field-name``
OPTION_NAMES: dict[str, tuple[str, ...]] = {
    "C": ("--C", "-C"),
    "aop_s": ("--aop-s", "--s"),
    "aop_t": ("--aop-t", "--t"),
    "hash_functions": ("--hash-functions", "--hash-repeat"),   # --hash-repeat: DiSMEC++'s name
    # the field is not called 'transform': scikit-learn takes an estimator with a
    # 'transform' attribute for a transformer
    "feature_transform": ("--transform", "--feature-transform"),
}
#: fields whose values come from a registry (one module per strategy: adding one there
#: adds it here)
_CHOICES = {"loss": _params.loss_names, "init": _params.init_names, "regularizer": _params.regularizer_names,
            "weighting": _params.weighting_names, "feature_transform": lambda: _params.TRANSFORMS,
            "l1_solver": lambda: _params.L1_SOLVERS, "l2_solver": lambda: _params.L2_SOLVERS,
            "share_lanes": lambda: _params.SHARE_LANES}
_METAVARS = {"pretrained": "MODEL_DIR", "C": "C"}


def option_strings(name: str) -> tuple[str, ...]:
    """Command-line spellings of the TrainParams field ``name`` (first is canonical)."""
    return OPTION_NAMES.get(name, ("--" + name.replace("_", "-"),))


def field_kind(f) -> type:
    """bool, int, float or str: the type of a TrainParams field, from its default."""
    d = f.default
    if d is None and str(f.type).startswith("float"):
        return float
    if isinstance(d, bool):
        return bool
    if isinstance(d, int):
        return int
    if isinstance(d, float):
        return float
    return str


def _number(kind: type):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    parse.__name__ = kind.__name__
    return parse


# DiSMEC++'s --timeout units (src/train.cpp: ms, s, sec, m, min, h), and days
_UNITS = {"ms": 1e-3, "sec": 1.0, "min": 60.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(text: str) -> float:
    """Seconds of '90', '90s', '30m', '2h' or '1d' (DiSMEC++ gives --timeout with a unit:
    its '500ms', '10sec' and '5min' too)."""
    t = text.strip().lower()
    unit = next((u for u in _UNITS if t.endswith(u)), "")   # longest units first
    try:
        return float(t[:len(t) - len(unit)]) * _UNITS.get(unit, 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or a duration like 90s, 30m, 2h, 1d; got {text!r}") from None


def add_train_params(parser: argparse.ArgumentParser) -> None:
    """One option per TrainParams field; help and default come from the field itself.

    Defaults are ``SUPPRESS``ed so that :func:`resolve_params` can tell which options
    were given explicitly (they override a ``--params`` file).
    """
    group = parser.add_argument_group(
        "training parameters", "same names and defaults as headstart.TrainParams; explicit "
        "options override --params FILE")
    for f in fields(TrainParams):
        kind = field_kind(f)
        default = f.default if f.default is not MISSING else None
        text = f.metadata.get("help", "")
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
        if kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
            kw["help"] = f"{text} (default: {'on' if default else 'off'})"
        else:
            kw["type"] = _duration if f.name == "timeout" else _number(kind) if kind in (int, float) else str
            kw["help"] = text if "(default:" in text else f"{text} (default: {default})"
            if f.name in _CHOICES:
                kw["choices"] = _CHOICES[f.name]()
            kw["metavar"] = _METAVARS.get(f.name, f.name.upper() if f.name not in _CHOICES else None)
            if kw["metavar"] is None:
                del kw["metavar"]
        group.add_argument(*option_strings(f.name), **kw)
    group.add_argument("--params", metavar="FILE", help="read parameters from a JSON object "
                       "(as written by --print-params); explicit options override it")
    group.add_argument("--liblinear", metavar="OPTIONS", help="LIBLINEAR's train options as one string, "
                       "e.g. --liblinear=\"-s 2 -c 4 -B 1\": its solver, C, tolerance, class weights and bias "
                       "(headstart/liblinear.py); overrides --params FILE, explicit options override it")
    group.add_argument("--print-params", action="store_true",
                       help="print the effective parameters as JSON and exit")


def add_memory_check(group, verb: str = "train") -> None:
    """``--no-memory-check`` for a command that trains (:func:`check_training_memory`)."""
    group.add_argument("--no-memory-check", action="store_true",
                       help=f"{verb} even when the estimated memory need exceeds the available memory "
                            "(docs/robustness.md)")


#: the parts of a training's memory estimate that a Dask run's client holds itself
_CLIENT_PARTS = ("statistics", "label arrays")


def check_training_memory(args: argparse.Namespace, params, X, Y, what: str, *, first: int = 0,
                          count: int | None = None, collect: bool = True, trajectories: bool = False,
                          chunk_size: int | None = None, copies: float = 0.0, own_data: bool = True,
                          only: tuple[str, ...] | None = None, extra: dict[str, int] | None = None,
                          models: int = 1, fewer_labels: str = "") -> None:
    """Refuse (ResourceError, exit 2) a training that would not fit in memory, before it
    allocates anything of the label space (headstart.resources).

    The estimate is :func:`headstart.resources.training_memory_for` of ``count`` labels
    from ``first`` on X, Y (already in memory, so not counted) plus ``copies`` times the
    data's bytes for the copies a command makes of it (cross-validation's fold rows);
    ``own_data``: the trainer may renumber X in place (else it counts a copy).  ``only``:
    count these parts of the estimate alone (where the rest does not model the command's
    training: a lower bound, never a refusal of what fits); ``extra``: more parts;
    ``models``: trained models held at once (cross-validation's folds), their weights.
    ``fewer_labels``: how this command trains fewer labels (its option), advised where
    what grows with the labels is a large part of the need, as fewer threads are where
    what grows with the threads is (helper-120: "use fewer --threads" at --threads 1,
    where the labels' statistics were most of it).
    Every command that trains checks this way: a file declaring 2e9 labels needs ~16 GB
    for Y's column pointer alone, and before stop 84 cv, thresholds and tree met that as
    the kernel's out-of-memory kill (exit 137) instead of this message.
    """
    client = bool(getattr(args, "scheduler", None) or getattr(args, "dask_workers", None))
    if client:
        # On Dask the workers train, each within its own memory; what grows with the
        # labels is this process's too: every label's statistics and arrays come back to
        # the client (a file declaring 2e8 labels grew it past 15 GB until the kernel
        # killed it, exit 137, after 4.5 min; 2e7 labels peaked at 7.2 GB against this
        # estimate's 7.1 GiB).  So those parts are checked here -- a lower bound of the
        # client's need, never a refusal of what fits -- and the workers' are not.
        only = tuple(k for k in (only or _CLIENT_PARTS) if k in _CLIENT_PARTS)
        what += " on Dask (this process's part: the labels' statistics and arrays)"
    from .. import resources
    from .._threads import resolve_threads

    est = resources.training_memory_for(X, Y, params, count, collect=collect, chunk_size=chunk_size,
                                        own_data=own_data, trajectories=trajectories, first_label=first)
    parts = dict(est.parts) if only is None else {k: v for k, v in est.parts.items() if k in only + ("data",)}
    parts.update(extra or {})
    if models > 1 and "weights" in parts:
        parts["weights"] *= models
    if copies > 0:
        parts["data copies"] = parts.get("data copies", 0) + int(copies * parts.get("data", 0))
    notes = ("the workers' memory is not checked here",) if client else est.notes
    est = resources.MemoryEstimate(parts, notes, est.details)
    need = est.without("data")  # the data is in memory already
    log.info("estimated memory need %s beyond the data (%s; %s)", resources.format_bytes(need), est.describe(),
             "; ".join(est.notes))
    if getattr(args, "no_memory_check", False):
        return
    threads = 1 if client else resolve_threads(params.threads)
    per_thread = sum(parts.get(k, 0) for k in ("workspaces", "records", "chunk buffers"))
    per_label = sum(parts.get(k, 0) for k in ("statistics", "label arrays", "weights", "shortlist"))
    tips = [tip for tip, share in (("fewer --threads", per_thread if threads > 1 else 0),
                                   (fewer_labels, per_label if fewer_labels else 0)) if 4 * share >= need]
    resources.check_memory(need, what, breakdown=est.describe(skip=("data",)) + "; " + "; ".join(est.notes),
                           option="--no-memory-check", advice="use " + ", or ".join(tips) if tips else "",
                           threads=threads)


#: exit code of a training command whose time budget (--timeout) ran out before every
#: label was trained: the model directory holds the finished labels and ``--resume``
#: completes it.  Not 0, so that a job script can tell (``until headstart train ...
#: --resume; do ...``); not 1 or 2, which are failures.
EXIT_INCOMPLETE = 3


def _read_params_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except json.JSONDecodeError as e:
        raise ParameterError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except UnicodeDecodeError:
        raise ParameterError(f"{path}: parameters file is not UTF-8 text") from None
    except OSError as e:
        raise ParameterError(f"{path}: cannot read parameters: {e.strerror}") from None
    if not isinstance(d, dict):
        raise ParameterError(f"{path}: parameters must be a JSON object, got {type(d).__name__}")
    known = {f.name for f in fields(TrainParams)}
    unknown = sorted(set(d) - known)
    if unknown and isinstance(d.get("params"), dict) and "shards" in d:
        # a model's manifest.json: what a user reaches for to train 'like that model'
        raise ParameterError(f"{path} is a model's manifest, not a parameters file: its training parameters are "
                             "its \"params\" object; save that object alone and give it to --params")
    if unknown:
        raise ParameterError(f"{path}: unknown parameter(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
    return d


def resolve_params(args: argparse.Namespace) -> TrainParams:
    """TrainParams from ``--params FILE`` (if any) updated by the explicit options."""
    values: dict[str, Any] = {}
    from_file: set[str] = set()     # the parameters whose value is the --params file's
    if getattr(args, "params", None):
        values.update(_read_params_file(args.params))
        from_file = set(values)
    if getattr(args, "liblinear", None) is not None:
        from ..liblinear import quiet, translate

        # headstart cv runs LIBLINEAR's -C and -v itself (liblinear.search)
        translated = translate(args.liblinear, search=getattr(args, "liblinear_search", False))
        values.update(translated)
        from_file -= set(translated)
        if quiet(args.liblinear):
            args.quiet = True
    cli = [f.name for f in fields(TrainParams) if hasattr(args, f.name)]   # given explicitly
    values.update({name: getattr(args, name) for name in cli})
    # a pretrained model directory implies the pretrained initialisation, a cost file
    # the weighting by files -- unless the command line says otherwise (a --params file
    # written by --print-params names every parameter, the defaults too)
    from_file -= set(cli)
    values = _params.implied_choices(values, cli)
    try:
        params = TrainParams.from_dict(values)
    except ParameterError as e:
        bad = re.match(r"parameter (\w+) ", str(e))
        if bad and bad.group(1) in from_file:   # the file's value: name the file (helper-102)
            raise ParameterError(f"{args.params}: {_option_wording(str(e))}") from None
        raise ParameterError(_option_wording(str(e))) from None
    # commands that run other initialisers than --init (experiment --inits, per-part
    # starts of shortlist-train): the starts' options are theirs
    other_inits = any(getattr(args, a, None) for a in ("inits", "init_sparse", "init_dense"))
    for name, by, choices, decided in _params.unused_parameters(params, cli):
        if decided == "init" and other_inits:
            continue
        what = _params.unused_message(params, name, by, choices, decided, lambda n: option_strings(n)[0])
        if name in _params.UNUSED_IS_AN_ERROR:
            raise ParameterError(what)
        log.warning("%s: ignored", what)
    if getattr(args, "liblinear", None) is not None:
        from ..liblinear import unread_class_weights

        for what in unread_class_weights(args.liblinear, params, cli, lambda n: option_strings(n)[0]):
            log.warning("%s: ignored", what)
    return params


def params_unless_printed(args: argparse.Namespace) -> TrainParams | None:
    """The training parameters of the options, or None when ``--print-params`` asked
    only to print them (then they have been printed and the command is done)."""
    params = resolve_params(args)
    if args.print_params:
        print(params.to_json())
        return None
    return params


def require(args: argparse.Namespace, *given: tuple[str, Any]) -> None:
    """argparse's 'the following arguments are required' for every (name, value) whose
    value is None or empty; checked here, not by argparse, because ``--print-params``
    needs none of them."""
    missing = [name for name, value in given if value is None or value == ""]
    if missing:
        args._parser.error("the following arguments are required: " + ", ".join(missing))


def _option_wording(message: str) -> str:
    """'parameter aop_t must ...' -> 'parameter aop_t (--aop-t) must ...'."""
    for f in fields(TrainParams):
        prefix = f"parameter {f.name} "
        if message.startswith(prefix):
            return f"parameter {f.name} ({option_strings(f.name)[0]}) " + message[len(prefix):]
    return message


# --------------------------------------------------------------------------- data options
DATA_FORMATS = ("auto", "xmc", "libsvm", "slice")


def add_data_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("data format")
    g.add_argument("--format", dest="data_format", choices=DATA_FORMATS, default="auto",
                   help="xmc: XMC repository text (header 'n d L'); libsvm: multi-label svmlight "
                        "(no header); slice: dense features (.npy, or DiSMEC++'s text matrix 'n d' + rows) + "
                        "--labels FILE; auto: .npy or a first line of two integers is slice, of three integers "
                        "xmc, else libsvm (default: auto)")
    g.add_argument("--one-based", action="store_true",
                   help="xmc: feature indices start at 1 (default: 0-based, as in the XMC repository)")
    g.add_argument("--one-based-labels", action="store_true",
                   help="xmc: label ids start at 1 (default: 0-based); with --one-based, DiSMEC++'s "
                        "--xmc-one-based-index")
    g.add_argument("--zero-based", action="store_true",
                   help="libsvm: feature indices start at 0 (default: 1-based, the svmlight convention)")
    g.add_argument("--labels", metavar="FILE", dest="labels_file",
                   help="slice: the label file that goes with the dense features")


def check_labelled_rows(path: str, Y, args: argparse.Namespace) -> None:
    """With --remove-no-label-data, refuse a file none of whose rows has a label here, where
    the file is known (the library's own check, in estimator.prepare_data, cannot name it)."""
    import numpy as np

    if getattr(args, "remove_no_label_data", False) and not np.diff(Y.indptr).any():
        raise DataFormatError(f"--remove-no-label-data leaves no training row: none of the {Y.shape[0]} rows has "
                              "a label", path)


def labels_word(n: int) -> str:
    """"1 label", "2 labels"."""
    return f"{n} label{'' if n == 1 else 's'}"


def trained_range_words(trained: int, first: int, count: int) -> str:
    """"45 labels [0, 45)" when the run trained the whole range, "20 labels of [0, 45)"
    when it trained part of it (helper-89: "45 labels of [0, 45)" read as a part)."""
    span = f"[{first}, {first + count})"
    return f"{labels_word(trained)} {span}" if trained == count else f"{labels_word(trained)} of {span}"


def read_training_data(path: str, args: argparse.Namespace, params):
    """:func:`read_dataset` for a command that trains with ``params``: dense (slice)
    features become the CSR matrix the kernels read right here, so the dense array is not
    kept beside its copy for the whole run (a third of the data's memory,
    docs/robustness.md).  With feature hashing the raw feature ids may go up to 2^63 - 2
    (:func:`wide_ids`)."""
    args.wide_ids = params.hash_buckets > 0
    X, Y = read_dataset(path, args)
    if X.shape[0] == 0:    # (before the label count: a comment-only libsvm file has 0 of both)
        raise no_instances(path, args, "train on")
    if Y.shape[1] == 0:      # a model of no labels could never predict anything
        raise DataFormatError("the data has no labels (a label count of 0): there is nothing to train", path)
    if X.shape[1] == 0:      # (the library says so too, but without the file)
        raise DataFormatError("the data has no features (a feature count of 0): there is nothing to learn from",
                              path)
    check_labelled_rows(path, Y, args)
    if not hasattr(X, "tocsr"):
        from ..validation import check_features

        X = check_features(X)
    if X.shape[0] and not X.nnz:
        # as a feature count of 0: every label would learn its bias alone (helper-80: the
        # all-pruned warning then advised --normalize, which cannot help)
        raise DataFormatError(f"the data has no feature values (all {X.shape[0]} instances are empty rows): there is "
                              "nothing to learn but the bias, which scores every instance alike", path)
    return X, Y


def wide_ids(args: argparse.Namespace) -> bool:
    """Whether DATA's feature ids are read as raw ids up to 2^63 - 2 (int64; the readers'
    ``wide_ids``), not int32 ones: set by the command when the features are hashed (a model
    with --hash-buckets, whose raw ids are only keys of the hash, e.g. 64-bit hashes of
    tokens) or not used at all."""
    return bool(getattr(args, "wide_ids", False))


_MAIN = object()   # read_dataset's labels_file: the command's --labels


def read_dataset(path: str, args: argparse.Namespace, n_features: int | None = None,
                 n_labels: int | None = None, labels_file: Any = _MAIN, labels_option: str = "--labels"):
    """:func:`_read_dataset`, its errors on a LibMultiLabel raw-text file pointing to the
    command that makes features of it (helper-51: only the reader's token error)."""
    try:
        return _read_dataset(path, args, n_features, n_labels, labels_file, labels_option)
    except DataFormatError as e:
        if e.path != str(path) or not _looks_like_raw_text(path):
            raise
        token = f" (token {e.token!r})" if e.token is not None else ""
        raise DataFormatError(f"{e.message}{token}; this looks like LibMultiLabel's raw text ('labels<TAB>text'): "
                              "make tf-idf features with 'headstart convert IN OUT --fit-vectorizer DIR' first",
                              e.path, e.line, e.column) from None


def _looks_like_raw_text(path: str) -> bool:
    """The first line is '[id<TAB>]labels<TAB>text' with labels holding no ':'."""
    from ..io._common import first_line

    try:
        fields = first_line(path).decode("utf-8", "replace").rstrip("\r").split("\t")
    except (OSError, DataFormatError, EOFError):
        return False
    return len(fields) in (2, 3) and ":" not in fields[-2] and bool(fields[-1].strip())


def _read_dataset(path: str, args: argparse.Namespace, n_features: int | None = None,
                  n_labels: int | None = None, labels_file: Any = _MAIN, labels_option: str = "--labels"):
    """(X, Y) of a data file through headstart.io, as the data options say.

    ``n_features``/``n_labels`` fix the widths of libsvm data (which has no header).
    ``labels_file``: the label file of a .npy file other than the command's main data
    (evaluate --train-labels, shortlist --test-labels; default: --labels), which would
    otherwise make every file of the command read as slice data.
    """
    from .. import io as hio

    fmt = getattr(args, "data_format", "auto")
    if labels_file is _MAIN:
        labels_file = getattr(args, "labels_file", None)
    if fmt == "auto":
        fmt = hio.detect_format(path)
    if fmt == "slice":
        if not labels_file:
            if not getattr(args, "labels_unused", False):
                raise ParameterError(f"{path}: dense features (slice format) need their label "
                                     f"file: add {labels_option} FILE")
            return _without_labels(hio.read_dense_features(path), n_labels)
        return hio.read_slice(path, labels_file)
    if labels_file:
        raise ParameterError(f"--labels is only for the slice format (dense features), not {fmt}")
    if fmt == "xmc":
        if getattr(args, "zero_based", False):
            raise ParameterError("--zero-based is for libsvm files; xmc files are 0-based unless --one-based")
        return hio.read_xmc(path, one_based=getattr(args, "one_based", False),
                            one_based_labels=getattr(args, "one_based_labels", False),
                            dtype=getattr(args, "read_dtype", "float32"), wide_ids=wide_ids(args))
    if getattr(args, "one_based", False):
        raise ParameterError("--one-based is for xmc files; libsvm files are 1-based unless --zero-based")
    if getattr(args, "one_based_labels", False):
        raise ParameterError(f"--one-based-labels is for xmc files, not {fmt}")
    # libsvm has no header: read at the width its ids reach, then fit the model's
    # (``n_features``): fewer ids are the file's, more are features training never saw
    from ..validation import model_width

    zero = getattr(args, "zero_based", False)
    wide = wide_ids(args)
    if getattr(args, "labels_unused", False):
        # prediction: the labels are read for their syntax only, whatever their ids
        X, _ = hio.read_libsvm(path, zero_based=zero, wide_ids=wide)
        return _without_labels(model_width(X, n_features, path), n_labels)
    if n_labels is not None and getattr(args, "labels_beyond_model", False):
        if int(n_labels) == 1:
            # a binary model's test file may hold '+1' lines only, written '1' (no '-1' marks
            # it binary): read at the model's one label first, which reads such a file as
            # LIBLINEAR does; a '1' there is otherwise a second label, beyond the model's
            try:
                X, Y = hio.read_libsvm(path, n_labels=1, zero_based=zero, wide_ids=wide)
                return model_width(X, n_features, path), Y
            except DataFormatError:
                pass
        X, Y = hio.read_libsvm(path, zero_based=zero, wide_ids=wide)
        return model_width(X, n_features, path), _label_width(Y, int(n_labels), path)
    X, Y = hio.read_libsvm(path, n_labels=n_labels, zero_based=zero, dtype=getattr(args, "read_dtype", "float32"),
                           wide_ids=wide)
    return model_width(X, n_features, path), Y


def labels_may_widen(args, width: int, label_space: int) -> bool:
    """Whether DATA's labels, ``width`` ids, may reach beyond ``label_space`` (the model's or
    a predictions file's): a libsvm file's ids are whatever its rows hold, so labels only
    the test split has are kept as misses (:func:`_label_width`); an xmc header declares
    its label space, which must match."""
    return width > label_space and data_format(args.data, args) != "xmc"


def _label_width(Y, n_labels: int, path: str):
    """Y (CSR) over at least the model's ``n_labels`` labels, for evaluation.  A libsvm
    file's label ids are whatever its rows hold, so test rows may name labels no training
    row had (a rare label seen only in the test split): they stay, as positives no model
    ranks, so recall and nDCG count them as misses -- the XMC convention (the metrics of
    the XMC repository's tools are over the test matrix's labels).  LibMultiLabel drops
    them instead, with a warning, which raises recall.  Said once, with the counts."""
    import numpy as np
    import scipy.sparse as sp

    width = max(Y.shape[1], n_labels)
    if Y.shape[1] > n_labels:
        beyond = Y.indices >= n_labels
        log.warning("%s: %d positive(s) of %d label id(s) beyond the model's %d labels (no training row had them): "
                    "kept as labels never predicted, so they count as misses in recall and nDCG (LibMultiLabel "
                    "drops them)", path, int(np.count_nonzero(beyond)), np.unique(Y.indices[beyond]).size, n_labels)
    return sp.csr_matrix((Y.data, Y.indices, Y.indptr), shape=(Y.shape[0], width))


def _without_labels(X, n_labels: int | None):
    """(X, an empty label matrix of n_labels columns): what prediction reads ('labels_unused')."""
    import numpy as np
    import scipy.sparse as sp

    return X, sp.csr_matrix((X.shape[0], n_labels or 0), dtype=np.float32)


def sniff_kind(path: str, gz: bool = True) -> str | None:
    """What headstart file ``path`` looks like, for messages about a file given where
    another kind was expected: "first-stage" (a directory), "model-part" (a file inside a
    model directory), "npz" (a numpy archive), "dismec-model", "json" (another JSON
    object), "named" (predictions or decisions with label names),
    "decisions" (header 'n L': also a shortlist), "thresholds" (one number per line),
    "data" (header of 3, lines starting with labels), "predictions" (header of 3,
    'label:score' tokens only), or None.  ``gz``: also look into gzip files."""
    import gzip

    p = Path(path)
    if p.is_dir():
        return "first-stage" if (p / "first_stage.json").is_file() else None
    if model_dir_of(path) is not None:
        return "model-part"
    try:
        with open(p, "rb") as fh:
            head = fh.read(4096)
        if head[:2] == b"\x1f\x8b":
            if not gz:
                return None
            with gzip.open(p, "rb") as fh:
                head = fh.read(4096)
    except (OSError, EOFError):
        return None
    if head[:4] == b"PK\x03\x04":
        # an .npz by its name, as the readers tell them apart (io/_common.compression);
        # any other zip is left to the reader, which names it zip-compressed data
        return "npz" if p.name.lower().endswith(".npz") else None
    text = head.decode("utf-8", "replace").lstrip()
    if text.startswith("{") and '"num-features"' in text and '"files"' in text:
        return "dismec-model"
    if text.startswith("{"):
        return "json"
    lines = text.splitlines()
    if len(head) == 4096:
        lines = lines[:-1]   # the last line may be cut off
    # a label vector headstart wrote starts with '# headstart {JSON}' (io/labelvec.py), which
    # says what it is even where every value is an integer (helper-89: info read the file
    # 'headstart thresholds' wrote as data, "label id 0.64... is not an integer")
    said = bool(lines) and lines[0].startswith("# headstart ")
    values = lines[1:] if said else lines
    if values and all(len(ln.split()) == 1 and _is_number(ln) for ln in values) \
            and (said or any(not ln.strip().lstrip("+-").isdigit() for ln in values)):
        return "thresholds"
    first = lines[0].split() if lines else []
    named = any("\t" in ln for ln in lines[1:4]) or any(
        ":" in t and not t.rsplit(":", 1)[0].isdigit() for ln in lines[1:4] for t in ln.split())
    if len(first) in (2, 3) and all(t.isdigit() for t in first) and named:
        return "named"
    # without a header ('predict --header none', LibMultiLabel's layout): only 'name:score'
    # tokens from the first line on (tabs alone would not tell it from a data file)
    pairs = [t.rsplit(":", 1) for ln in lines[:3] for t in ln.split()]
    if first and not all(t.isdigit() for t in first) and all(
            len(p) == 2 and p[0] and ":" not in p[0] and _is_number(p[1]) for p in pairs) and any(
            not p[0].isdigit() for p in pairs):
        return "named"
    if len(first) == 2 and all(t.isdigit() for t in first):
        return "decisions"
    body = [ln.split() for ln in lines[1:4] if ln.strip()]
    if len(first) != 3 or not body:
        return None
    if any(":" not in b[0] for b in body):
        return "data"
    if all(t.count(":") == 1 and "," not in t for b in body for t in b) \
            and not any(ln.startswith(" ") for ln in lines[1:4]):
        return "predictions"
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def model_dir_of(path: str) -> str | None:
    """The model directory a file lies in (its folder or, for a shard, the folder above
    holds a manifest) and that is one of its own files (JSON, .npz, .npy), or None: a data
    file kept beside a model is still a data file."""
    p = Path(path)
    if not p.is_file() or p.suffix not in (".json", ".npz", ".npy"):
        return None
    for up in (p.parent, p.parent.parent):
        if (up / "manifest.json").is_file():
            return str(up)
    return None


def said_nothing_left(args: argparse.Namespace, r, first: int, count: int) -> bool:
    """For a resumed sharded run that found every label finished: say so (instead of a
    work summary of earlier runs, whose statistics a model may or may not keep) and
    return True."""
    if r.trained_labels or not r.already_finished or r.missing:
        return False
    say(args, f"nothing to train: all {r.already_finished} labels of [{first}, {first + count}) were finished "
              f"before, {r.nnz} nonzero weights -> {args.output}")
    return True


@contextlib.contextmanager
def shards_kept_on_interrupt(command: str, output: str):
    """On Ctrl-C during sharded training, say that the shards written so far are kept
    (each is complete before it is listed, docs/distributed.md) and how to go on, then
    let the interrupt end the command (exit 130)."""
    try:
        yield
    except KeyboardInterrupt:
        done = _finished_labels(output)
        if not done:
            log.warning("interrupted before any shard was finished: no trained label is kept in %s", output)
        else:
            log.warning("interrupted: the shards finished so far (%d labels) are kept in %s; continue with: "
                        "headstart %s ... -o %s --resume", done, output, command, output)
        raise


def _finished_labels(output: str) -> int | None:
    """How many labels the shards listed in ``output``'s manifest cover, or None when it
    holds no manifest yet (interrupted before the first shard) or none that can be read:
    said on Ctrl-C, where a second error must not hide the interrupt."""
    from ..model.ranges import finished_ranges_of

    try:
        m = json.loads((Path(output) / "manifest.json").read_text())
        return sum(b - a for a, b in finished_ranges_of(m))
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- checks
def check_output_dir(path: str, keep_unfinished: bool = False, sharded: str = "", resume: bool = False,
                     ensemble: bool = False) -> None:
    """Fail before training when ``path`` cannot become a model directory (a directory
    holding files headstart did not write is never replaced: :func:`.model.writer.refuse_foreign`;
    with ``resume`` a model there is continued in place, deleting nothing of the user's); with
    ``keep_unfinished`` (commands that write a new model whole: tree, merge, import-dismec)
    also when it holds a model a time budget or a kill left unfinished, which only
    'train --resume' completes (train and shortlist-train check that themselves, since
    they may resume it).  ``ensemble`` (the command writes an ensemble of label trees):
    an ensemble headstart wrote there may be replaced too, by the ensemble's own rules
    (:func:`headstart.tree.ensemble.check_replaceable`: nothing else in it).  ``sharded``
    (what makes a run write shards into ``path`` as they finish, without --resume): also
    when ``path`` holds any model, since the run would delete it before the new one is
    complete -- the unsharded path replaces a model only once the new one is whole."""
    from ..errors import ModelFormatError

    p = Path(path)
    if not p.exists():
        if not p.parent.is_dir():
            why = "is not a directory" if p.parent.exists() else "does not exist"
            raise ModelFormatError(f"{path}: parent directory {p.parent} {why}")
        _check_writable(p.parent, path, "the model directory")
        return
    if not p.is_dir():
        raise ModelFormatError(f"{path}: exists and is not a directory; refusing to replace it")
    if ensemble and not (p / "manifest.json").exists():
        # (a model there is the writer's business, below: an ensemble replaces a finished one)
        from ..tree.ensemble import check_replaceable

        check_replaceable(p.absolute())
    elif not (resume and (p / "manifest.json").is_file()):
        from ..model.writer import refuse_foreign

        refuse_foreign(p)
    if sharded and (p / "manifest.json").is_file():
        raise ModelFormatError(f"{path}: a model is there, and {sharded} writes the new model into the directory "
                               "shard by shard, which would delete it before the new one is complete: continue "
                               "it with --resume, remove it, or write to another directory")
    # shards go into the directory; a whole model is built beside it and renamed over it
    _check_writable(p, path, "the model directory")
    _check_writable(p.parent if str(p.parent) else Path("."), path, "the model directory")
    if keep_unfinished and (p / "manifest.json").is_file():
        from ..model.writer import refuse_unfinished

        refuse_unfinished(p, whole_space=False, resume="'headstart train ... --resume'")


#: the options that name files a command reads: an output must not replace one of them
INPUT_OPTIONS = ("train", "test", "data", "input", "labels_file", "train_labels", "test_labels", "label_names", "params",
                 "predictions", "shortlist", "thresholds", "dense", "weights_pos_file", "weights_neg_file")


def check_output_file(path: str, what: str, args: argparse.Namespace | None = None,
                      model_dir: str | None = None) -> None:
    """Fail before any work when ``path`` cannot become the ``what`` file, or (with the
    command's ``args``) is one of the files the command reads: the atomic write would
    replace the user's data with the output; or lies in ``model_dir``, the model
    directory the command writes (its manifest, shards: the model's own files)."""
    from ..io.atomic import regular_target, warn_file_leftovers

    if path == "-":
        raise ParameterError(f"-: the {what} is written atomically to a path, not to standard output: give a "
                             "file path")
    p = Path(path)
    if p.is_dir():
        raise ParameterError(f"{path}: {what} is a directory")
    if args is not None:
        for name in INPUT_OPTIONS + ("model",):
            given = getattr(args, name, None)
            if not isinstance(given, (str, os.PathLike)) or not os.path.exists(given):
                continue
            if os.path.isdir(given) and Path(os.path.realpath(given)) in Path(os.path.realpath(p)).parents:
                # a model directory, a vectorizer's: a file inside it is part of the input
                raise ParameterError(f"{path}: the {what} would be written into {given}, an input of this "
                                     "command; write it elsewhere")
            if p.exists() and os.path.samefile(given, path):
                raise ParameterError(f"{path}: the {what} would replace an input of this command ({given}); "
                                     "write it elsewhere")
    if model_dir is not None:
        out = Path(os.path.realpath(model_dir))
        if out == Path(os.path.realpath(p)) or out in Path(os.path.realpath(p)).parents:
            raise ParameterError(f"{path}: the {what} would be written into {model_dir}, the model directory this "
                                 "command writes; write it elsewhere")
    # where the atomic write will create its file: beside a symbolic link's target (-o
    # /dev/fd/1 redirected to a file writes in that file's directory, not in /dev/fd);
    # regular_target also refuses a FIFO, a device or a socket before any work
    target = Path(regular_target(path))
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        why = "is not a directory" if parent.exists() else "does not exist"
        raise ParameterError(f"{path}: cannot write the {what}: {parent} {why}")
    _check_writable(parent, path, f"the {what}", name=target.name)
    warn_file_leftovers(path)


def _check_writable(directory: Path, path: str, what: str, name: str | None = None) -> None:
    """Before hours of work: a file is written atomically, as a temporary file in its
    directory renamed over the target, so the directory itself must take new files (a
    read-only mount, a directory without write permission, /proc fail here, not at the
    end).  Checked by creating and removing a file there, as the write will (``name``:
    the file's, default ``path``'s last part)."""
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ParameterError(f"{path}: cannot write {what}: {directory} is not writable")
    from ..io.atomic import check_can_create

    try:   # the mode bits do not tell all: root passes them, /proc takes no files at all
        check_can_create(directory / (name or Path(path).name))
    except OSError as e:
        raise ParameterError(f"{path}: cannot write {what}: {e.strerror}") from None


# --------------------------------------------------------------------------- progress
class ProgressBar:
    """Labels (or rows) done / total with rate and time left, on stderr when it is a
    terminal; silent otherwise.  ``advance`` may be called from worker threads."""

    def __init__(self, total: int, description: str, unit: str = "labels", enabled: bool = True):
        self.total = int(total)
        self.description = description
        self.unit = unit
        self.enabled = enabled and _stderr_is_tty()
        self._progress = None
        self._task = None

    def __enter__(self) -> "ProgressBar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            unit = self.unit
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn(unit), TextColumn("{task.fields[rate]}"), TextColumn("elapsed"),
                TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task(self.description, total=self.total, rate="")
        return self

    def set_total(self, total: int) -> None:
        """A total known only once the work has started (a tree's number of problems)."""
        self.total = int(total)
        if self._progress is not None:
            self._progress.update(self._task, total=self.total)

    def advance(self, n: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)
            speed = self._progress.tasks[0].speed if self._progress.tasks else None
            if speed:
                self._progress.update(self._task, rate=f"{speed:,.0f}/s")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def _stderr_is_tty() -> bool:
    if os.environ.get("HEADSTART_PROGRESS") == "1":  # for testing the display
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def say(args: argparse.Namespace, text: str) -> None:
    """An informational line on stdout, unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(text, flush=True)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def no_instances(path: str, args: argparse.Namespace, what: str) -> DataFormatError:
    """The error for DATA without a single instance, whatever a command would do with
    them (``what``: "predict", "train on" ...): an empty predictions file or model,
    written silently, is no answer (helper-80: a comment-only libsvm test file).  An
    empty file is the readers' error already; what else holds no instance is said."""
    why = {"xmc": "its header announces 0 points", "libsvm": "no data rows, only comments and blank lines",
           "slice": "0 rows"}.get(data_format(path, args), "no rows")
    return DataFormatError(f"the data has no instances ({why}): there is nothing to {what}", path)


def data_format(path: str, args: argparse.Namespace) -> str:
    """The format DATA is read in: --format, or the one detected."""
    from .. import io as hio

    fmt = getattr(args, "data_format", "auto")
    if fmt == "auto" and not getattr(args, "labels_file", None):
        fmt = hio.detect_format(path)
    return fmt


class RowLocator:
    """Errors about an instance of a block of DATA (a transform's domain, tf-idf's counts:
    ``DataFormatError.row``, 0-based in the block) re-raised about the file: its path and
    the instance's place in the whole file -- the line for XMC text (one line per
    instance after the header), the 0-based instance otherwise -- whatever the block
    size.  ``with locator.block(n): ...`` around the work on each block, in order."""

    def __init__(self, path: str, args: argparse.Namespace):
        self.path = path
        self.lines = data_format(path, args) == "xmc"
        self.first = 0

    @contextlib.contextmanager
    def block(self, rows: int):
        first = self.first
        self.first += int(rows)
        try:
            yield
        except DataFormatError as e:
            if e.row is None or e.path is not None:
                raise
            r = first + e.row
            raise DataFormatError(e.message, self.path, line=r + 2 if self.lines else None, token=e.token,
                                  row=None if self.lines else r) from None


def announced_rows(path: str, args: argparse.Namespace) -> int | None:
    """The rows an XMC file's header or slice features announce (their readers check
    them), else None: a predictions file can then be written with its final header at
    once (libsvm files announce nothing: their header is padded and rewritten)."""
    from .. import io as hio
    from ..io import slice as hslice

    fmt = data_format(path, args)
    if fmt == "xmc":
        return hio.read_xmc_header(path, wide_ids(args))[0]
    slice_ = fmt == "slice" or (fmt == "auto" and getattr(args, "labels_file", None))   # (--labels: slice)
    return hslice.announced_rows(path) if slice_ else None


def iter_batches(path: str, args: argparse.Namespace, chunk_rows: int, n_features: int | None = None,
                 n_labels: int | None = None):
    """``(X, Y)`` blocks of at most ``chunk_rows`` rows.  XMC text is streamed (only one
    block in memory); the other formats are read whole and cut into blocks."""
    from .. import io as hio

    fmt = data_format(path, args)
    if fmt == "xmc":
        if getattr(args, "zero_based", False):
            raise ParameterError("--zero-based is for libsvm files; xmc files are 0-based unless --one-based")
        yield from hio.iter_xmc_chunks(path, chunk_rows=chunk_rows, one_based=getattr(args, "one_based", False),
                                       one_based_labels=getattr(args, "one_based_labels", False),
                                       wide_ids=wide_ids(args))
        return
    X, Y = read_dataset(path, args, n_features=n_features, n_labels=n_labels)
    for r0 in range(0, X.shape[0], chunk_rows):
        yield X[r0:r0 + chunk_rows], Y[r0:r0 + chunk_rows]
