"""Documentation generated from the code: ``python -m headstart.cli.docs`` prints the
README's table of training options (one row per TrainParams field, with its default);
``python -m headstart.cli.docs --write README.md`` puts it in place of the table there
(after a new loss, regulariser, initialiser or parameter: a test checks the README's)."""

from __future__ import annotations

from dataclasses import fields

from ..params import TrainParams
from .common import _CHOICES, field_kind, option_strings


def default_text(f) -> str:
    """How the README shows a field's default."""
    if field_kind(f) is bool:
        return "on" if f.default else "off"
    return "none" if f.default is None else str(f.default)


def options_table() -> str:
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for f in fields(TrainParams):
        names = option_strings(f.name)
        opt = f"`{names[0]}`" + "".join(f" `{a}`" for a in names[1:] if a.startswith("--"))
        if field_kind(f) is bool:
            opt += f" / `--no-{names[0][2:]}`"
        text = " ".join(f.metadata.get("help", "").split()).replace("|", "\\|")
        if f.name in _CHOICES:      # the registries' names, so the table cannot go stale
            text += " -- one of " + ", ".join(f"`{c}`" for c in _CHOICES[f.name]())
        rows.append(f"| {opt} | `{default_text(f)}` | {text} |")
    return "\n".join(rows)


def write_table(path: str) -> bool:
    """Replace the options table of the Markdown file ``path`` (its lines from the
    table's header row to the first line that is not a table row) by the current one,
    atomically; False when it is current already."""
    from ..io.atomic import atomic_write

    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    header = options_table().split("\n", 1)[0]
    if header not in lines:
        raise SystemExit(f"{path}: no options table (a line '{header}') to replace")
    a = lines.index(header)
    b = a
    while b < len(lines) and lines[b].startswith("|"):
        b += 1
    new = lines[:a] + options_table().split("\n") + lines[b:]
    if new == lines:
        return False
    with atomic_write(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(new))
    return True


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write"] and len(sys.argv) == 3:
        print(f"{sys.argv[2]}: " + ("options table rewritten" if write_table(sys.argv[2]) else "up to date"))
    elif len(sys.argv) == 1:
        print(options_table())
    else:
        raise SystemExit("usage: python -m headstart.cli.docs [--write README.md]")
