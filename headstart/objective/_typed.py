"""Compile-time strategies for the kernels: a parameter tuple whose *class* selects code.

A loss, a regulariser, an initialiser or a post-processor is a small ``NamedTuple`` of its
parameters.  Numba types a named tuple by its class, so a generic function such as
``losses.value(L, m)`` can be given one implementation per class with
:func:`implement`; the kernels call the generic function and numba compiles, for each
class that actually reaches them, a specialisation with the implementation inlined.

Why not integer codes with an ``if`` chain, or functions passed as arguments?  An ``if``
chain must list every strategy in one place (adding a loss would edit the dispatcher), and
numba cannot cache code that receives functions as run-time values (every process would
recompile).  Typed tuples keep both: a new strategy is one file that calls
:func:`implement`, and a kernel specialised for it is cached like any other (its cache
key is the tuple's class).  A run compiles only the strategies it uses.
"""

from __future__ import annotations

import inspect

from numba.core import types
from numba.extending import overload


def generic(name: str, doc: str, arity: int | None = None, returns: bool = False):
    """A generic function the kernels call; implementations are attached per class.
    ``arity``: the number of arguments every implementation takes; ``returns``: every
    implementation must return a value (checked when it is attached, :func:`implement`)."""

    def stub(*args):  # pragma: no cover - only ever called from compiled code
        raise NotImplementedError(f"{name} is implemented per strategy class inside numba kernels")

    stub.__name__ = name
    stub.__qualname__ = name
    stub.__doc__ = doc
    stub.arity = arity
    stub.returns = returns
    return stub


def _where(impl) -> str:
    code = getattr(impl, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(impl)


def _returns_nothing(impl) -> bool:
    """True when the source of the function ``impl`` has no ``return <value>`` of its
    own (numba would then return None, which a caller testing the result reads as
    False: a start written into w would be taken as done with a stale X w)."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(impl)))
    except (OSError, TypeError, SyntaxError):   # no source (built in, generated): not checked
        return False
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False                              # a lambda is its own return value
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return False
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return True


def implement(fn, cls, impl) -> None:
    """Attach ``impl`` (plain Python written in numba's subset, same arguments as ``fn``)
    as the implementation of the generic function ``fn`` for tuples of class ``cls``
    passed as the first argument.  A wrong number of arguments, or no return value where
    ``fn`` needs one, is refused here, naming the file and line -- inside a kernel it
    would surface as a long numba typing error pointing at the caller (helper-55)."""
    names = list(inspect.signature(impl).parameters)
    arity = getattr(fn, "arity", None)
    if arity is not None and len(names) != arity:
        raise TypeError(f"{_where(impl)}: the {fn.__name__} of {cls.__name__} takes {len(names)} argument(s) "
                        f"({', '.join(names)}) but {fn.__name__} is called with {arity}: "
                        f"{(fn.__doc__ or '').splitlines()[0]}")
    if getattr(fn, "returns", False) and _returns_nothing(impl):
        raise TypeError(f"{_where(impl)}: the {fn.__name__} of {cls.__name__} returns no value: "
                        f"{(fn.__doc__ or '').splitlines()[0]}")

    # numba matches the typing function's signature against the implementation's, so
    # the typing function is made with the implementation's own argument names
    src = (f"def typer({', '.join(names)}):\n"
           f"    if isinstance({names[0]}, BaseNamedTuple) and {names[0]}.instance_class is cls:\n"
           f"        return impl\n"
           f"    return None\n")
    scope = {"BaseNamedTuple": types.BaseNamedTuple, "cls": cls, "impl": impl}
    exec(src, scope)  # noqa: S102 - a fixed template over identifiers from a signature
    overload(fn, prefer_literal=False)(scope["typer"])


_DONE: set[tuple[int, type]] = set()


def implement_once(cls, impls: dict) -> None:
    """Attach several implementations for ``cls`` ({generic: impl}) unless already done:
    registries may declare several names (presets) for one parameter class."""
    for fn, impl in impls.items():
        key = (id(fn), cls)
        if key not in _DONE:
            implement(fn, cls, impl)
            _DONE.add(key)


def names_attribute(module: str, registry: dict, default: str):
    """A module ``__getattr__`` whose ``NAMES`` are the registry's names, ``default``
    first, read at each use: a strategy registered after the import (from outside the
    package) is a choice of TrainParams and the command line too."""

    def __getattr__(name: str):
        if name == "NAMES":
            return tuple(sorted(registry, key=lambda k: (k != default, k)))
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
