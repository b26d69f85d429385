"""Named exception types.

Everything headstart raises on purpose derives from :class:`HeadstartError`, so the
command line can tell a user's mistake (exit code 2, one clear line) from a bug
(exit code 1).  Each subclass also derives from ``ValueError`` so that callers of the
library that only know the standard hierarchy still catch it.
"""

from __future__ import annotations


class HeadstartError(Exception):
    """Base class of every error headstart raises deliberately."""


class ParameterError(HeadstartError, ValueError):
    """An option has a value outside its rule; the message names option, rule and value."""


class DataFormatError(HeadstartError, ValueError):
    """A data file (or in-memory matrix) is malformed.

    The location is kept in attributes so that tools can use it, and rendered as
    ``path:line:column: message`` like a compiler diagnostic.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 column: int | None = None, token: str | None = None, row: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.column = column
        self.token = token
        self.row = row      # 0-based instance of an in-memory matrix (or of a file without lines)
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        if self.row is not None and self.line is None:
            where += f"instance {self.row} (counting from 0): "
        text = where + self.message
        if self.token is not None:
            shown = self.token if len(self.token) <= 40 else self.token[:37] + "..."
            text += f" (token {shown!r})"
        return text


class ModelFormatError(HeadstartError, ValueError):
    """A model directory is missing, tampered with, truncated or does not fit the data."""


class ResourceError(HeadstartError, RuntimeError):
    """A resource the run needs is not available: the estimated memory exceeds what is
    available or allowed, or another run is writing the same model directory."""


class NotFittedError(HeadstartError, ValueError, AttributeError):
    """A model is used before it was fitted (the same bases as scikit-learn's NotFittedError)."""


class ConvergenceWarning(UserWarning):
    """The solver stopped before its stopping rule for some labels (iteration limit, line
    search failed): the same base as scikit-learn's ConvergenceWarning; when scikit-learn
    is loaded, ``OvAClassifier.fit`` warns with a subclass of both."""


class MissingExtraError(HeadstartError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def import_extra(module: str, extra: str, needed_for: str):
    """Import the optional ``module`` (part of the ``headstart[extra]`` extra) or raise
    :class:`MissingExtraError` saying what needs it and how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(f"{needed_for} needs {module.split('.')[0]}, which is not installed "
                                f"({e}): pip install 'headstart[{extra}]'") from None
