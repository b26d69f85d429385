"""``headstart convert IN OUT``: between the XMC, libsvm and slice layouts."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from ..errors import DataFormatError, ParameterError
from . import common

NAME = "convert"
HELP = "convert a data file to the XMC format, libsvm or the slice layout"
DESCRIPTION = """\
Read IN in any supported format (see --format) and write OUT as XMC repository text
(default; gzip-compressed if OUT ends in .gz), with --to libsvm as multi-label libsvm text
(1-based features, no header), or with --to slice as dense features OUT (.npy) plus the
label file --out-labels.  Output files are written atomically.  Feature values pass
through float32, the precision headstart trains with (about 7 significant digits:
3.14159265358979 is written 3.1415927, counts above 2^24 lose their last digits), unless
--float64: XMC or libsvm text in and out then keeps 17 significant digits (the slice
layout's .npy is float32).

Raw text in LibMultiLabel's format ('[id<TAB>]label label ...<TAB>text' per line): with
--fit-vectorizer DIR, IN is read as text, tf-idf features and label ids are fitted on it
(scikit-learn's TfidfVectorizer, the headstart[sklearn] extra) and saved in DIR; with
--vectorizer DIR a test file gets the same features and labels (labels unseen in
training are dropped and counted).  DIR/labels.txt names label id i on line i + 1."""

TARGETS = ("xmc", "libsvm", "slice")

log = logging.getLogger("headstart.cli.convert")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="IN", help="data file to read")
    p.add_argument("output", metavar="OUT", help="file to write")
    g = p.add_argument_group("output")
    g.add_argument("--to", choices=TARGETS, default=None,
                   help="output format (default: slice for an OUT ending in .npy, else xmc)")
    g.add_argument("--out-one-based", action="store_true",
                   help="xmc output: write feature indices starting at 1 (default: 0-based)")
    g.add_argument("--out-one-based-labels", action="store_true",
                   help="xmc output: write label ids starting at 1 (with --out-one-based: the files of "
                        "DiSMEC++'s --xmc-one-based-index)")
    g.add_argument("--out-labels", metavar="FILE", help="slice output: the label file to write")
    g.add_argument("--float64", action="store_true",
                   help="read and write XMC / libsvm feature values as float64 (17 significant digits) instead "
                        "of float32, for other tools (headstart itself trains in float32)")
    t = p.add_argument_group("raw text input (LibMultiLabel's format)")
    t.add_argument("--fit-vectorizer", metavar="DIR", help="read IN as text, fit tf-idf features and label ids on "
                   "it and save them in the new directory DIR")
    t.add_argument("--vectorizer", metavar="DIR", help="read IN as text with the features and labels of DIR "
                   "(made by --fit-vectorizer on the training file)")
    t.add_argument("--ngram-max", type=common._number(int), default=1, metavar="N",
                   help="--fit-vectorizer: word n-grams for n = 1..N (default: 1)")
    t.add_argument("--min-df", type=common._number(int), default=1, metavar="N",
                   help="--fit-vectorizer: keep terms in at least N instances (default: 1)")
    t.add_argument("--max-features", type=common._number(int), default=None, metavar="N",
                   help="--fit-vectorizer: keep the N most frequent terms (default: all)")
    t.add_argument("--sublinear-tf", action="store_true", help="--fit-vectorizer: term frequency 1 + log(tf)")
    common.add_data_options(p)


def _fitting_option(args) -> str | None:
    """The first text-fitting option given (they shape --fit-vectorizer's features)."""
    for option, given in (("--ngram-max", args.ngram_max != 1), ("--min-df", args.min_df != 1),
                          ("--max-features", args.max_features is not None), ("--sublinear-tf", args.sublinear_tf)):
        if given:
            return option
    return None


def _text_dataset(args):
    """(X, Y) of a LibMultiLabel text file, fitting and saving the vectorizer or applying one."""
    from ..io.text import TextVectorizer, read_text

    if args.fit_vectorizer and args.vectorizer:
        raise ParameterError("give --fit-vectorizer DIR (training text) or --vectorizer DIR (test text), not both")
    for option, given in (("--format", args.data_format != "auto"), ("--one-based", args.one_based),
                          ("--one-based-labels", args.one_based_labels), ("--zero-based", args.zero_based),
                          ("--labels", bool(args.labels_file))):
        if given:
            raise ParameterError(f"{option} is for numeric data; IN is read as LibMultiLabel text here")
    if args.vectorizer:
        # the fitting options shape the feature space, which --vectorizer takes from DIR
        # as it was fitted; silently ignoring one would give other features than asked
        option = _fitting_option(args)
        if option:
            raise ParameterError(f"{option} is for --fit-vectorizer; --vectorizer {args.vectorizer} applies "
                                 "the features fitted there")
    if args.fit_vectorizer and os.path.exists(args.fit_vectorizer):
        raise ParameterError(f"{args.fit_vectorizer}: exists; --fit-vectorizer writes a new directory "
                             "(--vectorizer applies an existing one)")
    if args.fit_vectorizer:
        # before the work, as every output (helper-89: a read-only parent failed at the end
        # with exit 1)
        parent = Path(args.fit_vectorizer).parent
        if not parent.is_dir():
            raise ParameterError(f"{args.fit_vectorizer}: parent directory {parent} "
                                 f"{'is not a directory' if parent.exists() else 'does not exist'}")
        common._check_writable(parent, args.fit_vectorizer, "the vectorizer directory")
    for name in ("ngram_max", "min_df"):
        if getattr(args, name) < 1:
            raise ParameterError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.max_features is not None and args.max_features < 1:
        raise ParameterError(f"--max-features must be >= 1, got {args.max_features}")
    data = read_text(args.input)
    if args.fit_vectorizer:
        vec = TextVectorizer.fit(data, ngram_range=(1, args.ngram_max), min_df=args.min_df,
                                 max_features=args.max_features, sublinear_tf=args.sublinear_tf)
    else:
        vec = TextVectorizer.load(args.vectorizer)
    X, Y, dropped = vec.transform(data)
    if dropped:
        log.warning("%s: %d label occurrence(s) with names not among the %d training labels dropped",
                    args.input, dropped, len(vec.label_names))
    return X, Y, vec


def _write(hio, args, X, Y) -> None:
    if args.to == "xmc":
        hio.write_xmc(args.output, X, Y, one_based=args.out_one_based, one_based_labels=args.out_one_based_labels)
    elif args.to == "libsvm":
        hio.write_libsvm(args.output, X, Y)
        # libsvm has no header: a reader sees only the widths the ids reach
        if hasattr(X, "indices"):
            used_f = int(X.indices.max()) + 1 if X.nnz else 0
        else:   # dense (slice) features: the last column with a nonzero (a reduction, no n x d copy)
            import numpy as np

            nz = np.flatnonzero(np.abs(X).max(axis=0)) if X.size else np.zeros(0, dtype=np.int64)
            used_f = int(nz[-1]) + 1 if nz.size else 0
        used_l = int(Y.indices.max()) + 1 if Y.nnz else 0
        if used_f < X.shape[1] or used_l < Y.shape[1]:
            log.warning("%s: libsvm keeps no header: read back, it has %d feature(s) and %d label(s) (the ids "
                        "it uses), not %d and %d; --to xmc keeps the counts", args.output, used_f, used_l,
                        X.shape[1], Y.shape[1])
    else:
        from ..resources import available_memory

        # the slice layout is dense: n x d float32, held twice while it is written
        need, free = 8 * X.shape[0] * X.shape[1], available_memory()
        if free is not None and need > free:
            raise DataFormatError(f"dense features of {X.shape[0]} x {X.shape[1]} need {common.human_bytes(need)} "
                                  f"to write, more than the {common.human_bytes(free)} available: the slice layout "
                                  "is for dense data; keep this file sparse (--to xmc or libsvm)", args.input)
        hio.write_slice(args.output, args.out_labels, X, Y)


def run(args: argparse.Namespace) -> int:
    from .. import io as hio

    npy = str(args.output).endswith(".npy")
    if args.to is None:
        args.to = "slice" if npy else "xmc"
    elif npy and args.to != "slice":
        # every reader takes a .npy name for dense features (helper-49: text was written there)
        raise ParameterError(f"OUT {args.output} ends in .npy, the slice layout's features, but --to {args.to} "
                             "writes text: name it otherwise, or use --to slice --out-labels FILE")
    if args.to == "slice" and not args.out_labels:
        raise ParameterError("--to slice writes two files: give the label file with --out-labels FILE")
    if args.to != "slice" and args.out_labels:
        raise ParameterError("--out-labels is only for --to slice")
    if args.out_labels and os.path.realpath(args.out_labels) == os.path.realpath(args.output):
        # helper-57: the label text replaced the features just written, and convert said "wrote"
        raise ParameterError(f"--out-labels {args.out_labels} is OUT {args.output}: the features and the labels "
                             "are two files; name the label file otherwise")
    if args.float64:
        # (helper-57: values always passed through float32; the readers and writers take
        # float64, the command did not)
        if args.to == "slice":
            raise ParameterError("--float64 is for --to xmc or libsvm: the slice layout's .npy is float32")
        if args.fit_vectorizer or args.vectorizer:
            raise ParameterError("--float64 is for numeric input; the tf-idf of raw text is float32")
        if common.data_format(args.input, args) == "slice":
            raise ParameterError(f"--float64: {args.input} is dense float32 features (slice layout): nothing to keep")
        args.read_dtype = "float64"
    for out in [args.output] + ([args.out_labels] if args.out_labels else []):
        common.check_output_file(out, "output file", args)
    vec = None
    if args.fit_vectorizer or args.vectorizer:
        X, Y, vec = _text_dataset(args)
    else:
        option = _fitting_option(args)
        if option:     # helper-51: ignored without a word on numeric data
            raise ParameterError(f"{option} is for LibMultiLabel text read with --fit-vectorizer DIR; IN is read "
                                 "as numeric data here")
        X, Y = common.read_dataset(args.input, args)
    for option, given in (("--out-one-based", args.out_one_based), ("--out-one-based-labels",
                                                                     args.out_one_based_labels)):
        if given and args.to != "xmc":
            raise ParameterError(f"{option} is only for --to xmc (libsvm's features are 1-based, its labels "
                                 "0-based as headstart reads them)")
    if args.fit_vectorizer:
        # the vectorizer's directory appears after the data files, and not at all when
        # writing them fails (the data files are atomic each)
        from ..io.atomic import atomic_directory

        with atomic_directory(args.fit_vectorizer) as tmp:
            vec.write_into(tmp)
            _write(hio, args, X, Y)
    else:
        _write(hio, args, X, Y)
    common.say(args, f"wrote {X.shape[0]} instances, {X.shape[1]} features, {Y.shape[1]} labels "
                     f"-> {args.output}" + (f" + {args.out_labels}" if args.out_labels else ""))
    return 0
