"""The ``torchik`` command line: :func:`main` parses the arguments, then calls the library
(see :mod:`torchik.cli.entry`); each command is a module of this package."""

from torchik.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
