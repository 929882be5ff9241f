"""The ``torchik`` command line: parses arguments, then calls the library.

Commands: ``info``, ``dataset``, ``train``, ``eval``, ``fit-sampler``, ``solve``, ``plot``,
``bench``, ``tune``, ``view``; run ``torchik COMMAND --help`` for each. A robot is a bundled
name (``panda``, ``ur5``, ``digit_arm``, ``snake2``, ``snake4``, ``rail_arm``, ``g1``),
``planar:L1,L2,...`` (a planar arm with those link lengths) or the path of a URDF or an MJCF
file (MJCF needs ``torchik[mjcf]``). Errors
print one line on stderr and exit with status 1 (2 for malformed arguments); they never print a
traceback. ``solve`` exits with 3
when no solution is within tolerance; an interrupted command (Ctrl-C) exits with 130.

Each command is a module of this package (:mod:`torchik.cli.info`, ...) with ``add_parser(sub)``
and ``run(args)``; what they share is in :mod:`torchik.cli.common`.

Example:
    $ torchik solve panda --position 0.4 0.1 0.5 -n 5
    $ python -m torchik.cli info ur5
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from torchik.cli import bench, dataset, eval, fit, info, plot, solve, train, tune, view
from torchik.cli.common import _ERRORS, _INTERRUPTED, _message, _Parser

__all__ = ["build_parser", "main"]

_COMMANDS = (info, dataset, train, eval, fit, solve, plot, bench, tune, view)


def build_parser() -> argparse.ArgumentParser:
    """The ``torchik`` argument parser."""
    text = __doc__.split("\n\n")[1].replace("\n", " ").replace("``", "")  # no RST in --help
    parser = _Parser(prog="torchik", description=text)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser


def _version() -> str:
    from torchik._version import __version__

    return f"torchik {__version__}"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr, like the errors (Python's shows the source line)."""
    print(f"torchik: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    with warnings.catch_warnings():  # restores Python's warning display after
        warnings.showwarning = _show_warning
        return _main(list(sys.argv[1:] if argv is None else argv))


def _main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["bench"]:  # argparse's REMAINDER would not pass on a leading --help
            return bench.run(argparse.Namespace(rest=argv[1:]))
        args = build_parser().parse_args(argv)
        args.argv = argv
        return args.func(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else 1
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("torchik: interrupted", file=sys.stderr)  # as _torchik_cli's, during the import
        return _INTERRUPTED
    except _ERRORS as err:
        print(f"torchik: error: {_message(err)}", file=sys.stderr)
        return 1
