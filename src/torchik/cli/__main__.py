"""``python -m torchik.cli``: the command line of :mod:`torchik.cli`."""

import sys

from torchik.cli import main

if __name__ == "__main__":
    sys.exit(main())
