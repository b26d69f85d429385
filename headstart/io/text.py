"""Raw text data in LibMultiLabel's format, turned into tf-idf features and label ids.

LibMultiLabel (its linear methods) reads text files of one instance per line::

    [id<TAB>]label label ...<TAB>text of the instance

(two or three tab-separated fields; the labels are names separated by spaces; no
quoting), maps label names to ids in sorted order (scikit-learn's MultiLabelBinarizer)
and makes tf-idf features with scikit-learn's ``TfidfVectorizer``.  :class:`TextVectorizer`
does the same here, so that ``headstart convert --fit-vectorizer`` turns such files into
the XMC format every other command reads, and ``--vectorizer`` turns test files into the
same feature and label space (labels of a test file unseen in training are dropped and
counted, LibMultiLabel's default).

The vectorizer is saved without pickle, as a directory: ``vectorizer.json`` (the
``TfidfVectorizer`` settings, which are plain values) with the vocabulary (feature id i
is ``vocabulary[i]``), ``idf.npy`` and ``labels.txt`` (label id i is line i + 1, the
same layout as the XMC repository's label-name files).  Loading rebuilds a
``TfidfVectorizer`` with that vocabulary and idf, so a test file gets exactly the
features the fitted one would give.  scikit-learn is imported only here (the ``sklearn``
extra).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, MissingExtraError, ParameterError
from ._common import open_stream
from .atomic import atomic_directory, replace_refusal

#: TfidfVectorizer settings a vectorizer may be fitted with (all plain JSON values)
SETTINGS = ("lowercase", "ngram_range", "min_df", "max_df", "max_features", "sublinear_tf", "stop_words",
            "token_pattern", "norm", "smooth_idf")
FORMAT = "headstart-text-vectorizer"
VERSION = 1
#: a vectorizer directory's files, its index first (nothing else is written there)
VECTORIZER_FILES = ("vectorizer.json", "idf.npy", "labels.txt")


@dataclass
class TextData:
    """A text file's instances: label names per instance and the texts."""

    labels: list[list[str]]
    texts: list[str]
    path: str = ""


def read_text(path) -> TextData:
    """Read a LibMultiLabel text file (gzip detected by its magic bytes).  Errors name
    the file and line: a line with other than 2 or 3 tab-separated fields, or with
    another count than the first line's, text that is not UTF-8.

    The first line fixes the layout for the file, as in LibMultiLabel's reader (pandas
    takes the columns from it): a line with another count is almost always a tab inside
    a text, which would make its labels an id and its first words labels -- pandas skips
    such a line with a warning, we refuse it (helper-51: it was read that way silently).
    A UTF-8 byte-order mark is no part of the first label."""
    labels: list[list[str]] = []
    texts: list[str] = []
    layout = None       # (field count, line) of the first line
    with open_stream(path) as s:
        for number, raw in enumerate(iter(s.readline, b""), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataFormatError(f"not UTF-8 text (byte {e.start + 1} of the line)", path, number) from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if not line:
                continue        # (LibMultiLabel's reader, pandas, skips empty lines too)
            fields_ = line.split("\t")
            if len(fields_) not in (2, 3):
                raise DataFormatError(f"{len(fields_)} tab-separated fields, expected 2 (labels, text) or 3 "
                                      "(id, labels, text)", path, number)
            if layout is None:
                layout = (len(fields_), number)
            elif len(fields_) != layout[0]:
                raise DataFormatError(f"{len(fields_)} tab-separated fields where line {layout[1]} has {layout[0]} "
                                      "(every line of a file has an id, or none): a tab inside the text? "
                                      "(LibMultiLabel's reader skips such a line)", path, number)
            labels.append(fields_[-2].split())
            texts.append(fields_[-1])
    if not texts:
        raise DataFormatError("no instances: expected lines '[id<TAB>]labels<TAB>text'", path)
    return TextData(labels, texts, str(path))


def _sklearn_vectorizer(**kw):
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError:
        raise MissingExtraError("text data needs scikit-learn: pip install 'headstart[sklearn]'") from None
    return TfidfVectorizer(dtype=np.float32, **kw)


@dataclass
class TextVectorizer:
    """tf-idf features and label ids of text data, fitted on a training file."""

    settings: dict
    vocabulary: list[str]
    idf: np.ndarray
    label_names: list[str]
    _tfidf: object = field(default=None, repr=False)

    # --- fitting and applying ------------------------------------------------------
    @classmethod
    def fit(cls, data: TextData, **settings) -> "TextVectorizer":
        """Fit the vocabulary and idf on ``data``'s texts (TfidfVectorizer's defaults,
        as LibMultiLabel's, unless ``settings`` say otherwise); the label names are the
        sorted names of ``data``'s labels."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ParameterError(f"unknown tf-idf setting(s) {', '.join(unknown)}; known: {', '.join(SETTINGS)}")
        if "ngram_range" in settings:
            settings["ngram_range"] = tuple(settings["ngram_range"])
        tfidf = _sklearn_vectorizer(**settings)
        try:
            tfidf.fit(data.texts)
        except ValueError as e:      # e.g. "empty vocabulary"
            raise DataFormatError(f"cannot make tf-idf features: {e}", data.path or None) from None
        params = tfidf.get_params()
        kept = {k: (list(params[k]) if isinstance(params[k], tuple) else params[k]) for k in SETTINGS}
        vocab = [None] * len(tfidf.vocabulary_)
        for term, j in tfidf.vocabulary_.items():
            vocab[j] = term
        names = sorted({name for row in data.labels for name in row})
        return cls(kept, vocab, np.asarray(tfidf.idf_, dtype=np.float64), names, tfidf)

    def transform(self, data: TextData) -> tuple[sp.csr_matrix, sp.csr_matrix, int]:
        """(X float32 CSR of tf-idf features, Y CSR of label ids, the number of label
        occurrences dropped because the name is not among the fitted labels)."""
        X = sp.csr_matrix(self._vectorizer().transform(data.texts), dtype=np.float32)
        X.sort_indices()
        ids = {name: j for j, name in enumerate(self.label_names)}
        indptr = np.zeros(len(data.labels) + 1, dtype=np.int64)
        indices: list[int] = []
        dropped = 0
        for i, row in enumerate(data.labels):
            known = sorted({ids[name] for name in row if name in ids})
            dropped += sum(1 for name in row if name not in ids)
            indices.extend(known)
            indptr[i + 1] = len(indices)
        Y = sp.csr_matrix((np.ones(len(indices), dtype=np.float32), np.asarray(indices, dtype=np.int32), indptr),
                          shape=(len(data.labels), len(self.label_names)))
        return X, Y, dropped

    def _vectorizer(self):
        if self._tfidf is None:
            kw = dict(self.settings)
            kw["ngram_range"] = tuple(kw["ngram_range"])
            tfidf = _sklearn_vectorizer(vocabulary={t: j for j, t in enumerate(self.vocabulary)}, **kw)
            tfidf.idf_ = self.idf
            self._tfidf = tfidf
        return self._tfidf

    # --- saving and loading (no pickle) ------------------------------------------------
    def save(self, directory) -> None:
        """Write the vectorizer as a new directory, atomically (it appears whole or not at
        all).  An existing directory is replaced only when it is empty or a vectorizer
        headstart wrote, holding nothing else (ParameterError otherwise): replacing
        deletes it whole, and a user's files must never go with it."""
        why = replace_refusal(directory, "a headstart text vectorizer", VECTORIZER_FILES[0], VECTORIZER_FILES)
        if why:
            raise ParameterError(why)
        with atomic_directory(directory) as tmp:
            self.write_into(tmp)

    def write_into(self, tmp: Path) -> None:
        """The vectorizer's files (:data:`VECTORIZER_FILES`) in the (new, empty) directory ``tmp``."""
        meta_name, idf_name, labels_name = VECTORIZER_FILES
        meta = {"format": FORMAT, "version": VERSION, "settings": self.settings, "vocabulary": self.vocabulary}
        (tmp / meta_name).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        np.save(tmp / idf_name, self.idf, allow_pickle=False)
        (tmp / labels_name).write_text("".join(f"{name}\n" for name in self.label_names), encoding="utf-8")

    @classmethod
    def load(cls, directory) -> "TextVectorizer":
        d = Path(directory)
        if not d.is_dir():
            raise DataFormatError("no such text vectorizer directory (made by 'headstart convert "
                                  "--fit-vectorizer')", directory)
        meta_path, idf_path, labels_path = (d / name for name in VECTORIZER_FILES)
        part = meta_path
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            part = idf_path
            idf = np.load(part, allow_pickle=False)
            part = labels_path
            names = part.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError as e:
            raise DataFormatError(f"not a text vectorizer directory (made by 'headstart convert "
                                  f"--fit-vectorizer'): {os.path.basename(e.filename)} is missing", directory) from None
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as e:
            raise DataFormatError(f"text vectorizer cannot be read: {e}", part) from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise DataFormatError(f"not a text vectorizer of this version ({FORMAT} {VERSION})", meta_path)
        vocab, settings = meta.get("vocabulary"), meta.get("settings")
        ngrams = settings.get("ngram_range") if isinstance(settings, dict) else None
        if (not isinstance(vocab, list) or not all(isinstance(t, str) for t in vocab) or not isinstance(settings, dict)
                or set(settings) != set(SETTINGS) or not isinstance(ngrams, list) or len(ngrams) != 2
                or not all(isinstance(x, int) and x >= 1 for x in ngrams)):
            raise DataFormatError("text vectorizer: vocabulary or settings malformed", meta_path)
        if idf.ndim != 1 or idf.size != len(vocab):
            raise DataFormatError(f"{idf_path.name} holds {idf.size} values for a vocabulary of {len(vocab)} terms",
                                  idf_path)
        return cls(settings, vocab, idf.astype(np.float64), names)
