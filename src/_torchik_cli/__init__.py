"""The ``torchik`` console script (pyproject's ``[project.scripts]``): :func:`main`.

Ctrl-C in a command's first seconds, while torch is imported, ends it as Ctrl-C does later:
``torchik: interrupted`` and exit status 130, not a traceback ending in ``KeyboardInterrupt``.
It is a package of its own because ``torchik``'s ``__init__`` imports torch before any module
of ``torchik`` runs; importing ``torchik`` stays free of side effects (no handler is installed).
"""

import sys

__all__ = ["main"]

_INTERRUPTED = 130  # 128 + SIGINT, as shells report it (torchik.cli.common._INTERRUPTED)


def main() -> int:
    """Import :mod:`torchik.cli` and run :func:`torchik.cli.main` on ``sys.argv[1:]``."""
    try:
        from torchik.cli import main as run
    except KeyboardInterrupt:
        print("torchik: interrupted", file=sys.stderr)
        return _INTERRUPTED
    return run()
