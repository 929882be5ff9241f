"""Checks of settings and arguments, shared by the settings dataclasses and the entry points.

Each check refuses a bad value with a one-line reason naming the setting: a
:class:`TypeError` for the wrong kind of value (a float where an int belongs, a bool where a
number belongs), a :class:`ValueError` for a value out of range (negative, NaN, infinite, too
large). Settings dataclasses call them in ``__post_init__``; functions call them up front.

Example:
    >>> check_int("max_iters", 100, minimum=1)
    100
    >>> check_int("max_iters", -5, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: max_iters must be >= 1, got -5
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import reprlib
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "MAX_LAYERS",
    "MAX_WIDTH",
    "check_bool",
    "check_choice",
    "check_device",
    "check_float",
    "check_generator",
    "check_int",
    "check_kind",
    "check_map_location",
    "check_tensor",
    "check_threads",
    "check_values",
    "intra_op_threads",
    "short_repr",
]

MAX_WIDTH = 1 << 16
"""The largest layer width, latent size, mixture size or bin count a model config accepts."""

MAX_LAYERS = 16
"""The largest number of layers (or blocks, transforms) a model config accepts."""


def short_repr(value: Any) -> str:
    """``repr(value)`` cut short (nested or long values from a crafted file stay one short line;
    a tensor's rows too).

    Example:
        >>> short_repr(list(range(100)))
        '[0, 1, 2, 3, 4, 5, ...]'
    """
    return reprlib.repr(value).replace("\n", " ")


def check_int(name: str, value: Any, minimum: int = 0, maximum: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``[minimum, maximum]``.

    Raises:
        TypeError: not an int.
        ValueError: out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {short_repr(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    # typeshed declares numbers.Integral.__lt__ but no __gt__ (an int has both)
    if maximum is not None and value > maximum:  # type: ignore[operator]
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_float(
    name: str,
    value: Any,
    minimum: float = -math.inf,
    maximum: float = math.inf,
    *,
    positive: bool = False,
) -> float:
    """``value`` as a float if it is a finite real number in ``[minimum, maximum]`` (``> 0``
    too with ``positive``).

    Raises:
        TypeError: not a real number (bools are refused).
        ValueError: NaN, infinite or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {short_repr(value)}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond a float's range
        raise ValueError(f"{name} must be finite, got {short_repr(value)}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum}], got {value}")
    return value


def check_choice(name: str, value: Any, choices: Collection[str]) -> str:
    """``value`` if it is one of the strings ``choices``.

    Raises:
        ValueError: anything else (the message lists the choices).
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {short_repr(value)}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool.

    Raises:
        TypeError: anything else (``0``, ``"yes"``).
    """
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {type(value).__name__} {short_repr(value)}"
        )
    return value


def check_kind(name: str, value: Any, kind: Any, what: str | None = None,
               optional: bool = False) -> Any:  # fmt: skip
    """``value`` if it is an instance of ``kind`` (a class or a union), or ``None`` where
    ``optional``.

    Args:
        name: the argument's name, for the message.
        value: the argument.
        kind: what ``isinstance`` accepts.
        what: the kind in words (default ``kind``'s name with an article).
        optional: whether ``None`` passes.

    Raises:
        TypeError: anything else, naming the kind it got.

    Example:
        >>> check_kind("model", 3, dict, "a dict of settings")
        Traceback (most recent call last):
        ...
        TypeError: model must be a dict of settings, got int
    """
    if (value is None and optional) or isinstance(value, kind):
        return value
    if what is None:
        label = getattr(kind, "__name__", str(kind))
        what = f"{'an' if label[:1].lower() in 'aeiou' else 'a'} {label}"
    raise TypeError(f"{name} must be {what}{' or None' if optional else ''}, "
                    f"got {type(value).__name__}")  # fmt: skip


def check_generator(name: str, value: Any) -> Any:
    """``value`` if it is ``None`` or a ``torch.Generator``.

    Raises:
        TypeError: anything else (a seed such as ``5``: pass
            ``torch.Generator().manual_seed(5)``).
    """
    import torch

    if value is not None and not isinstance(value, torch.Generator):
        raise TypeError(
            f"{name} must be a torch.Generator or None, got {type(value).__name__} "
            f"{short_repr(value)} (torch.Generator().manual_seed(seed) makes one)"
        )
    return value


def check_threads(name: str, value: Any) -> int:
    """``value`` if it is a thread count this machine can run: an int in ``[1, cores]``
    (:func:`os.cpu_count`). More threads than cores only slow torch down, and a huge count
    makes OpenMP fail to create them, killing the interpreter.

    Raises:
        TypeError: not an int.
        ValueError: below 1 or above the number of cores (the message says how many).
    """
    cores = os.cpu_count() or 1
    value = check_int(name, value, 1)
    if value > cores:
        raise ValueError(f"{name} must be at most {cores}, the cores of this machine; got {value}")
    return value


@contextlib.contextmanager
def intra_op_threads(n: int | None, name: str = "num_threads") -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads, then restore the previous number.

    ``None`` leaves torch's setting alone: nothing is set process-wide unless asked for.

    Raises:
        TypeError, ValueError: ``n`` is not ``None`` nor a valid :func:`check_threads` count.
    """
    if n is not None:
        check_threads(name, n)
    previous = torch_threads()
    if n is None or n == previous:
        yield
        return
    _set_threads(n)
    try:
        yield
    finally:
        _set_threads(previous)


def torch_threads() -> int:
    """torch's intra-op thread count (imported here so that this module stays import-light)."""
    import torch

    return torch.get_num_threads()


def _set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def check_map_location(name: str, value: Any) -> Any:
    """``value`` if ``torch.load`` may take it as a ``map_location`` torchik can run with:
    ``None``, a dict, a callable, or a device :func:`check_device` accepts.

    Raises:
        ValueError: a device this machine lacks or torchik cannot run on (``meta``).
        TypeError: anything else.
    """
    import torch

    if isinstance(value, str | torch.device):
        check_device(name, value)
    elif not (value is None or isinstance(value, dict) or callable(value)):
        raise TypeError(f"{name} must be a device, a dict or a callable, got "
                        f"{type(value).__name__} {short_repr(value)}")  # fmt: skip
    return value


def check_device(name: str, device: Any) -> torch.device:
    """``device`` as a ``torch.device`` if this machine can run torchik there: ``cpu``,
    ``cuda``/``cuda:N`` with such a GPU, ``mps`` where available (torch is imported here, so
    that this module stays import-light).

    Example:
        >>> check_device("device", "cpu")
        device(type='cpu')
        >>> check_device("device", "banana")
        Traceback (most recent call last):
        ...
        ValueError: device 'banana' is not a device (use cpu, cuda, cuda:N or mps)

    Raises:
        TypeError: not a ``str`` nor a ``torch.device``.
        ValueError: unknown, or absent here (no CUDA GPU, no such GPU index, no MPS).
    """
    import torch

    if not isinstance(device, str | torch.device):
        raise TypeError(f"{name} must be a str or a torch.device, got {short_repr(device)}")
    text = str(device)
    try:
        out = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"{name} {text!r} is not a device (use cpu, cuda, cuda:N or mps)"
        ) from None
    if out.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{name} {text!r}: no CUDA GPU is available here")
        if out.index is not None and out.index >= count:
            raise ValueError(f"{name} {text!r}: this machine has {count} CUDA GPU(s)")
    elif out.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name} {text!r}: MPS is not available here")
    elif out.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{name} {text!r} cannot run torchik (use cpu, cuda, cuda:N or mps)")
    return out


def check_tensor(
    name: str,
    value: Any,
    shape: tuple[int | None, ...] = (),
    *,
    min_dims: int = 0,
    dtype: torch.dtype | None = None,
    batch: bool = True,
) -> torch.Tensor:
    """``value`` if it is a tensor with values (not on the meta device) whose last dimensions
    are ``shape`` (``None``: any size), with at least ``min_dims`` dimensions, of ``dtype``
    (``None``: any floating-point dtype); ``batch=False``: no dimension before ``shape`` (a
    mask or limits ``(D,)``). The one check of a tensor argument of a metric or an entry point,
    before torch meets it (whose messages name no argument, or span lines).

    Example:
        >>> import torch
        >>> check_tensor("q", torch.zeros(2, 7), (7,)).shape
        torch.Size([2, 7])
        >>> check_tensor("q", torch.zeros(2, 6), (7,))
        Traceback (most recent call last):
        ...
        ValueError: q must have shape (..., 7), got (2, 6)

    Raises:
        TypeError: not a tensor, or of another dtype.
        ValueError: on the meta device, or of another shape.
    """
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__} "
                        f"{short_repr(value)}")  # fmt: skip
    if dtype is None and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
    if dtype is not None and value.dtype != dtype:
        raise TypeError(f"{name} must be a {dtype} tensor, got {value.dtype}")
    check_values(name, value)
    dims = max(min_dims, len(shape))
    if (
        value.dim() < dims
        or (not batch and value.dim() != len(shape))
        or not all(
            w is None or w == g
            for w, g in zip(shape, value.shape[value.dim() - len(shape) :], strict=True)
        )
    ):
        sizes = ", ".join(["..."] * batch + ["*" if w is None else str(w) for w in shape])
        want = f"({sizes}{',' if len(shape) == 1 and not batch else ''})"
        least = f" and {dims} dimensions at least" if batch and dims > len(shape) else ""
        raise ValueError(f"{name} must have shape {want}{least}, got {tuple(value.shape)}")
    return value


def check_values(name: str, value: Any) -> None:
    """A tensor on the meta device has a shape but no values to compute with: refused, one
    line naming it (torch's NotImplementedError otherwise); anything else passes."""
    device = getattr(value, "device", None)
    if getattr(device, "type", None) == "meta":
        raise ValueError(f"{name} is on the meta device: it has a shape but no values")
