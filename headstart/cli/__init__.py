"""The ``headstart`` command line: one module per subcommand, registered in :mod:`.main`.

Each subcommand module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``.  The modules only parse, call the library and write files; all
training, prediction and evaluation logic lives in the library.
"""
