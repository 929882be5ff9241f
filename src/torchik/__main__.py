"""``python -m torchik``: the command line of :mod:`torchik.cli`, through the console script's
launcher (:func:`_torchik_cli.main`: Ctrl-C while :mod:`torchik.cli` imports is one line and
exit status 130).

Ctrl-C in the first seconds, while ``torchik/__init__`` imports torch, still ends in a
traceback: ``python -m torchik`` runs that ``__init__`` before any line of this module, and
only the ``torchik`` console script starts before it.
"""

import os
import sys

from _torchik_cli import main


def _exit(code: int) -> None:
    """Exit with ``code``. A ``torchrun`` worker (``torchik train --nproc N`` starts its workers
    as ``python -m torchik``) has left its process group and written its files by now; it skips
    the interpreter's teardown, where gloo's threads sometimes abort the process ("terminate
    called without an active exception", about 1 run in 10 on a loaded machine)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    _exit(main())
