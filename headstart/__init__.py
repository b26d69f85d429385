"""headstart: fast one-vs-all training for extreme multi-label classification."""
__version__ = "0.1.0"
