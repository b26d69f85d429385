"""``python -m headstart`` runs the command line."""

from .cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
