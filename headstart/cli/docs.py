"""Documentation generated from the code: ``python -m headstart.cli.docs`` prints the
README's table of training options (one row per TrainParams field, with its default)."""

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


if __name__ == "__main__":
    print(options_table())
