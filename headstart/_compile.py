"""Numba code-generation settings for headstart's own kernels, and only for them.

Numba turns off LLVM's SLP vectoriser by default (numba PR #8852, after miscompilations
in older LLVM versions).  The hottest kernel here, the lane sweep over X
(:func:`headstart.training.kernel.lanes_scores`), is exactly SLP's pattern: one
independent accumulator per lane fed by adjacent loads, which SLP packs into vector
multiply/adds.  SLP packs isomorphic operations without reordering any sum, so every
result stays bit-identical to the scalar code (``tests/test_imports.py`` compares the
vectorised sweep with scipy's product bit for bit).

Measured on this machine (AMD EPYC with AVX-512, numba 0.68.1, 16 lanes; code of
commit 5ebc119 plus this module; the machine was shared with other jobs, so minima and
CPU times): one sweep over debian-deps' 39061 training rows takes 2.1 ms with SLP and
5.0 ms without (minimum of 300 sweeps, three processes each); training labels 0:1000
on one thread takes 3.9 s of CPU time with SLP and 5.0 s without (medians of five
runs), the same weights.  Re-checked with the code of main 433dba7 (load average 8):
2.5 ms vs 5.1 ms.  The compiled sweep has 20 packed (zmm) multiplies and adds with SLP
and none without; ``tests/test_imports.py`` checks that they are there and
that the sweep still equals scipy's product bit for bit.

How it is scoped.  Numba reads ``numba.core.config.SLP_VECTORIZE`` whenever it builds
LLVM's optimisation pipeline for a library it compiles; the switch is process-wide,
and so is the environment variable ``NUMBA_SLP_VECTORIZE`` that sets it.  Importing a
library must not change how the user's own Numba code is compiled, so neither is
touched for the process.  Instead a listener on Numba's documented event API
(``numba.core.event``, event ``"numba:compile"``, which every dispatcher compilation
that misses the cache emits) turns the switch on for exactly the duration of the
compilation of a function defined in this package, and restores the previous value
when it ends.  Compilations nest (a kernel compiles the kernels it calls, and Numba
compiles its own helpers, e.g. overloads of numpy functions, on the way): the switch
follows the function being compiled, so Numba's helpers get Numba's setting and their
machine code, cached in the process and shared with the user's code, is the same as
without headstart.  Headstart's kernel still vectorises the helpers it inlines, in its
own final optimisation.  Every compilation runs under Numba's global compiler lock,
so no other thread compiles while the switch is on.

While the same compilations run, numba's note that an object-mode block (the clock
read in :func:`headstart._clock.now` where the C library's clock cannot be called
directly) does not run in parallel despite
``nogil=True`` is silenced (intended: the block holds the GIL for about a microsecond),
with :class:`warnings.catch_warnings`, so the filter exists only then.

What remains in the process after ``import headstart``: one listener in
``numba.core.event``'s registry and four cache locators at the front of Numba's list
(below), all of which change nothing for functions defined outside headstart; ``os.environ``, ``numba.core.config`` and the warning filters are unchanged
(``tests/test_imports.py``).  A user who sets ``NUMBA_SLP_VECTORIZE`` chooses for every
function, headstart's included: then no listener is installed.  Kernels loaded from
Numba's cache are not compiled again, so they keep the code they were compiled with.

Cache freshness.  Numba's on-disk cache of a function is valid while *its own* source
file is unchanged (a hash of the file).  But a compiled kernel contains the code of every
jitted function it calls, from other files too, and the layout of the tuples they pass
around: after a change to ``objective/rowspan.py`` alone, ``shortlist/training.py``'s
``train_chunk`` was loaded from the cache with the old code and crashed (2026-11-28).  A
``git pull`` that changes some files of a checkout does exactly that to a user.  So the
freshness stamp of headstart's functions also covers every source file of the package
(:class:`_PackageStamp`): any change to headstart recompiles its kernels, once.  It is
done with locator classes put first in Numba's list, which decline every function not
defined in this package (Numba then asks its own locators, as before), and which keep
Numba's cache places (``NUMBA_CACHE_DIR``, the ``__pycache__`` next to the source, the
user-wide directory) and file names.

Where none of those can be written (a read-only install, e.g. a system-wide one or a
container's, run by a user whose home directory cannot be written either), Numba has no
locator for a function with ``cache=True`` and raises ``RuntimeError: cannot cache
function`` while the function is *defined*: ``import headstart`` itself failed so (helper
hA, 2026-12-02).  A fourth locator, last, then caches headstart's kernels in a directory
of this user's in the temporary directory (``tempfile.gettempdir()``, so ``TMPDIR``):
``headstart-numba-cache-UID``, made mode 0700 and used only while it is a real directory
of this user's that nobody else can write (Numba unpickles what it loads from a cache, so
another user's files there would run their code); otherwise a directory of this
process's own, removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import stat
import tempfile
import types as _pytypes
import warnings
from pathlib import Path

import numba

#: The oldest numba this module works with: it subclasses numba's public cache locator
#: classes (``UserProvidedCacheLocator`` etc., named with a leading underscore before
#: 0.62) and reuses its memoised content hash of a source file (``_hash_source_file``,
#: new in 0.68; 0.67 has neither it nor content stamps).  With an older numba ``import
#: headstart`` failed with an AttributeError from numba's internals (helper hA,
#: 2026-12-02, numba 0.59.1 and 0.67.0, both allowed by the old ``numba>=0.59``); it now
#: says what it needs.  pyproject.toml's lower bound is the same (tests/test_imports.py).
MIN_NUMBA = (0, 68)


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as '0.68.1' or '0.69.0dev0'."""
    import re

    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


if _release(numba.__version__) < MIN_NUMBA:
    raise ImportError(f"headstart needs numba >= {'.'.join(map(str, MIN_NUMBA))}, found numba "
                      f"{numba.__version__}: pip install 'numba>={'.'.join(map(str, MIN_NUMBA))}'")

from numba.core import caching, config, event  # noqa: E402
from numba.core.errors import NumbaWarning  # noqa: E402

_PACKAGE = __name__.rpartition(".")[0]
_OBJMODE_NOTE = "Code running in object mode won't allow parallel execution"


def is_headstart_function(dispatcher) -> bool:
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


class HeadstartCodegen(event.Listener):
    """SLP vectorisation (and the objmode note silenced) while a headstart function compiles."""

    def __init__(self) -> None:
        self._saved: list[int] = []     # SLP_VECTORIZE before each open compilation, innermost last
        self._quiet: warnings.catch_warnings | None = None

    def on_start(self, ev: event.Event) -> None:
        outside = self._saved[0] if self._saved else config.SLP_VECTORIZE
        self._saved.append(config.SLP_VECTORIZE)
        ours = is_headstart_function((ev.data or {}).get("dispatcher"))
        config.SLP_VECTORIZE = 1 if ours else outside
        if ours and self._quiet is None:
            self._quiet = warnings.catch_warnings()
            self._quiet.__enter__()
            warnings.filterwarnings("ignore", message=_OBJMODE_NOTE, category=NumbaWarning)
            self._quiet_depth = len(self._saved)

    def on_end(self, ev: event.Event) -> None:
        if not self._saved:             # a compilation that started before the listener existed
            return
        if self._quiet is not None and len(self._saved) == self._quiet_depth:
            quiet, self._quiet = self._quiet, None
            quiet.__exit__(None, None, None)
        config.SLP_VECTORIZE = self._saved.pop()


_listener: HeadstartCodegen | None = None


def configure() -> None:
    """Install the listener once per process, unless the user chose NUMBA_SLP_VECTORIZE."""
    global _listener
    if _listener is not None or "NUMBA_SLP_VECTORIZE" in os.environ:
        return
    _listener = HeadstartCodegen()
    event.register("numba:compile", _listener)


configure()


_ROOT = Path(__file__).resolve().parent


def package_digest(root: Path = _ROOT) -> bytes:
    """A hash of the contents of every ``.py`` file under ``root`` (headstart's package
    directory), in path order; the content hashes are Numba's own, memoised on each file's
    modification time and size, so a process computes them once."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(str(path.relative_to(root)).encode())
        h.update(caching._hash_source_file(str(path), st.st_mtime, st.st_size))
    return h.digest()


@functools.lru_cache(maxsize=None)
def _digest_once() -> bytes:
    return package_digest()


def in_package(py_file: str, root: Path = _ROOT) -> bool:
    try:
        return Path(py_file).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False


class _PackageStamp:
    """A Numba cache locator for headstart's functions only, whose freshness stamp is the
    source file's and the whole package's (see the module text)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not in_package(py_file):
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return super().get_source_stamp(), _digest_once()


class _PackageUserDir(_PackageStamp, caching.UserProvidedCacheLocator):
    pass


class _PackageInTree(_PackageStamp, caching.InTreeCacheLocator):
    pass


class _PackageUserWide(_PackageStamp, caching.UserWideCacheLocator):
    pass


TEMP_CACHE_PREFIX = "headstart-numba-cache-"


@functools.lru_cache(maxsize=None)
def temp_cache_root() -> str | None:
    """The cache directory of the last resort (see the module text): ``TMP/headstart-numba-
    cache-UID`` when it is this user's own directory closed to others, else a new directory
    of this process's (removed at exit); None when no temporary directory can be written."""
    try:
        base = tempfile.gettempdir()
    except OSError:         # (FileNotFoundError: no usable temporary directory)
        return None
    uid = os.getuid() if hasattr(os, "getuid") else None
    shared = os.path.join(base, TEMP_CACHE_PREFIX + (str(uid) if uid is not None else "user"))
    try:
        os.mkdir(shared, 0o700)
    except OSError:
        pass                # there already (or not writable: checked below)
    try:
        st = os.lstat(shared)
        if stat.S_ISDIR(st.st_mode) and (uid is None or (st.st_uid == uid and not st.st_mode & 0o077)):
            return shared
    except OSError:
        pass
    try:
        own = tempfile.mkdtemp(prefix=TEMP_CACHE_PREFIX)
    except OSError:
        return None
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    return own


class _PackageTemp(_PackageStamp, caching.UserWideCacheLocator):
    """The last resort: :func:`temp_cache_root`, when no place of Numba's can be written."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(temp_cache_root(), self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        # other functions first declined: their cache is not headstart's to place (and no
        # directory is made for them)
        if not in_package(py_file) or temp_cache_root() is None:
            return None
        return super().from_function(py_func, py_file)


PACKAGE_LOCATORS = (_PackageUserDir, _PackageInTree, _PackageUserWide, _PackageTemp)


def install_cache_locators() -> None:
    """Put the package locators first in Numba's list, once per process, in Numba's own
    order (user directory, then in-tree, then user-wide), then the temporary directory."""
    classes = caching.CacheImpl._locator_classes
    if classes[: len(PACKAGE_LOCATORS)] != list(PACKAGE_LOCATORS):
        classes[:0] = PACKAGE_LOCATORS


install_cache_locators()


# --- kernels without numba's wrappers where no Python code calls them --------------------
#
# Numba gives every compiled specialisation two wrappers besides its native function: a
# CPython one, which unboxes every argument from Python objects (a namedtuple of arrays
# field by field, with error paths), and a C one (for ``cfunc``-style calls).  A call from
# compiled code uses neither: it calls the native function, linked into the caller.  Yet
# both are generated, optimised and turned into machine code for every specialisation,
# and with the kernels' arguments (Problem, State, Workspace: about 30 arrays) they were
# about a third of a first run's compile time (measured 2026-11-29: ``headstart train`` on
# the shipped bibtex with an empty cache, 33.1 s before and 22.7 s after; with
# ``--l2-solver dual`` 59.3 and 43.8 s; the same models bit for bit).  Numba
# leaves them out with the jit options ``no_cpython_wrapper`` / ``no_cfunc_wrapper``,
# but a specialisation without them must never be called from Python (it crashes).  So a
# kernel is two dispatchers of one function: the module attribute, an ordinary one
# with the wrappers, for calls from Python, and ``.nested``, without them, which is what
# compiled code sees (numba types a global through its ``_numba_type_``).  A kernel
# called from both compiles each variant once; they are cached under different names
# (qualname + ``.nested``), so a cache never hands a Python call the wrapper-less code.

try:        # numba's dispatcher internals (used with numba 0.68); without them: plain numba.njit
    from numba.core import types as _types
    from numba.core.registry import CPUDispatcher as _CPUDispatcher
except ImportError:         # pragma: no cover
    _CPUDispatcher = None

NESTED_SUFFIX = ".nested"


def _nested_dispatcher(fn, options: dict, cache: bool) -> _CPUDispatcher:
    f = _pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    f.__qualname__ = fn.__qualname__ + NESTED_SUFFIX
    f.__kwdefaults__ = fn.__kwdefaults__
    f.__doc__ = fn.__doc__
    return _dispatcher(_Nested, f, {**options, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}, cache)


def _dispatcher(cls, fn, options: dict, cache: bool):
    """A ``cls`` dispatcher of ``fn`` as ``numba.njit(**options, cache=cache)`` makes one."""
    disp = cls(py_func=fn, locals={}, targetoptions={**options, "nopython": True})
    if cache:
        disp.enable_caching()
    return disp


class _Nested(_CPUDispatcher or object):
    """The wrapper-less dispatcher: compiled code calls its native function; a call from
    Python would crash the process, so it is refused."""

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.py_func.__qualname__} is compiled for calls from compiled code only; "
                        "call the kernel itself")


class Kernel(_CPUDispatcher or object):
    """A numba dispatcher for calls from Python whose compiled callers call ``.nested``."""

    @property
    def nested(self) -> _CPUDispatcher:
        n = self.__dict__.get("_nested")
        if n is None:   # (a dispatcher rebuilt by unpickling)
            options = {k: v for k, v in self.targetoptions.items() if k != "nopython"}
            n = self._nested = _nested_dispatcher(self.py_func, options,
                                                  type(self._cache).__name__ != "NullCache")
        return n

    @property
    def _numba_type_(self):
        return _types.Dispatcher(self.nested)


def njit(fn=None, **options):
    """``numba.njit`` for headstart's kernels (see above).  Functions numba inlines into
    their callers (``inline="always"``) stay ordinary dispatchers."""
    import numba

    if fn is None:
        return lambda f: njit(f, **options)
    if options.get("inline", "never") != "never" or config.DISABLE_JIT or _CPUDispatcher is None:
        return numba.njit(**options)(fn)
    cache = bool(options.pop("cache", False))
    try:
        disp = _dispatcher(Kernel, fn, options, cache)
        disp._nested = _nested_dispatcher(fn, options, cache)
    except (TypeError, AttributeError):     # pragma: no cover  (a numba whose internals moved)
        return numba.njit(**options, cache=cache)(fn)
    return disp
