"""The package version, in a module of its own so that torchik's modules can name it without
importing ``torchik/__init__.py`` (which imports them)."""

__version__ = "0.1.0"
