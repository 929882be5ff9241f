"""Search spaces of :mod:`torchik.tune`: typed parameters, each family's default space, and the
small JSON/YAML file a user overrides it with.

A space maps a setting's name (a field of the family's ``Config`` or of
:class:`~torchik.train.TrainConfig`) to a :class:`Float`, :class:`Int` or :class:`Choice`. The
override file maps names to one of::

    {"lr": {"low": 1e-4, "high": 1e-2, "log": true},      # Float (Int when both bounds are ints)
     "width": {"choices": [128, 256, 512]},                # Choice
     "depth": [2, 3, 4],                                   # Choice, short form
     "beta": 0.01,                                         # fixed: no longer searched
     "latent": null}                                       # dropped: the config's own value

Example:
    >>> space = parse_space({"lr": {"low": 1e-4, "high": 1e-2, "log": True}}, "cvae")
    >>> space["lr"]
    Float(low=0.0001, high=0.01, log=True)
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchik.files import read_text

__all__ = [
    "Choice",
    "Float",
    "Int",
    "Param",
    "default_space",
    "parse_space",
    "read_mapping",
    "read_space",
    "space_to_json",
    "split_params",
    "suggest",
]


@dataclass(frozen=True)
class Float:
    """A real setting in ``[low, high]``; ``log`` draws it log-uniformly (``low > 0``)."""

    low: float
    high: float
    log: bool = False


@dataclass(frozen=True)
class Int:
    """An integer setting in ``[low, high]`` (both included); ``log`` as for :class:`Float`."""

    low: int
    high: int
    log: bool = False


@dataclass(frozen=True)
class Choice:
    """One of ``choices`` (numbers, strings or booleans)."""

    choices: tuple


Param = Float | Int | Choice

_TRAIN_SPACE: dict[str, Param] = {
    "lr": Float(1e-4, 1e-2, log=True),
    "weight_decay": Float(1e-6, 1e-3, log=True),
}
_FAMILY_SPACES: dict[str, dict[str, Param]] = {
    # the cVAE-vs-INN report's spaces, with widths as choices so that TPE can rank them; the
    # cVAE's prior (standard, as in the report, or conditional on the target) is torchik's
    "cvae": {
        "width": Choice((128, 256, 384, 512)),
        "depth": Int(2, 6),
        "latent": Choice((2, 4, 8)),
        "beta": Float(1e-3, 0.1, log=True),
        "prior": Choice(("standard", "conditional")),
    },
    "inn": {
        "width": Choice((64, 128, 192, 256)),
        "depth": Int(1, 4),
        "blocks": Int(4, 10),
        "latent": Choice((2, 4, 8)),
    },
    "mdn": {"width": Choice((128, 256, 512)), "depth": Int(2, 5), "components": Int(4, 32)},
    "flow": {"width": Choice((64, 128, 256)), "depth": Int(1, 3), "transforms": Int(2, 8)},
    "iknet": {"primary_width": Choice((128, 256, 512)), "components": Choice((10, 25, 50))},
    "mlp": {"width": Choice((256, 512, 1024)), "depth": Int(2, 5)},
    "fm": {"width": Choice((128, 256, 512)), "blocks": Int(2, 5)},
    "rnn": {"hidden": Choice((64, 128, 256)), "width": Choice((64, 128, 256))},
}
_FIXED_TRAIN = ("device", "progress", "seed", "steps", "val_every", "val_targets", "log_every")
"""TrainConfig fields a study sets itself (its budget and seed), never searched."""


def _config_classes(family: str) -> tuple[type, type]:
    from torchik.models.registry import families
    from torchik.train.engine import TrainConfig

    known = families()
    if family not in known:
        raise ValueError(f"unknown model family {family!r}; choose one of {sorted(known)}")
    return known[family].Config, TrainConfig


def _names(family: str) -> tuple[set[str], set[str]]:
    """``(model config fields, searchable TrainConfig fields)`` of ``family``."""
    model, train = _config_classes(family)
    fields = {f.name for f in dataclasses.fields(train)} - set(_FIXED_TRAIN)
    return {f.name for f in dataclasses.fields(model)}, fields


def default_space(family: str) -> dict[str, Param]:
    """The family's default space: its model settings and the training ``lr`` and
    ``weight_decay`` (a family without its own entry searches those two only)."""
    model_fields, _ = _names(family)
    own = {k: v for k, v in _FAMILY_SPACES.get(family, {}).items() if k in model_fields}
    return {**own, **_TRAIN_SPACE}


def _param(name: str, spec: Any) -> Param | Any:
    """One entry of an override file as a :class:`Param` (or a fixed value)."""
    if isinstance(spec, list | tuple):
        spec = {"choices": spec}
    if not isinstance(spec, dict):
        return spec
    if "choices" in spec:
        if set(spec) != {"choices"} or not spec["choices"]:
            raise ValueError(f"search space: {name!r} needs a non-empty list of choices only")
        return Choice(tuple(spec["choices"]))
    if set(spec) - {"low", "high", "log"} or not {"low", "high"} <= set(spec):
        raise ValueError(
            f"search space: {name!r} must be {{'low': ..., 'high': ..., 'log': bool}}, "
            f"{{'choices': [...]}}, a list, a value or null; got {spec!r}"
        )
    low, high, log = spec["low"], spec["high"], bool(spec.get("log", False))
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high))
    return Int(low, high, log) if ints else Float(float(low), float(high), log)


def _check(name: str, param: Param) -> None:
    if isinstance(param, Choice):
        return
    low, high = param.low, param.high
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ValueError(f"search space: {name!r} has an empty range [{low}, {high}]")
    if param.log and low <= 0:
        raise ValueError(f"search space: {name!r} is log-uniform, so its low must be > 0")


def parse_space(
    overrides: dict[str, Any], family: str, base: dict[str, Param] | None = None
) -> dict[str, Param | Any]:
    """``base`` (default: :func:`default_space`) with ``overrides`` applied (module notes).

    Raises:
        ValueError: an unknown setting name, a malformed entry, an empty range, or a fixed
            value or choice that the family's config or ``TrainConfig`` refuses.
    """
    if not isinstance(overrides, dict):
        raise ValueError("a search-space file must hold a mapping of setting names")
    model_fields, train_fields = _names(family)
    unknown = sorted(set(overrides) - model_fields - train_fields)
    if unknown:
        known = ", ".join(sorted(model_fields | train_fields))
        raise ValueError(
            f"search space: unknown setting {unknown[0]!r} for {family}; known: {known}"
        )
    space = dict(default_space(family) if base is None else base)
    for name, spec in overrides.items():
        if spec is None:
            space.pop(name, None)
            continue
        space[name] = _param(name, spec)
    for name, param in space.items():
        if isinstance(param, Float | Int | Choice):
            _check(name, param)
    _check_values(space, family)
    return space


def _check_values(space: dict[str, Param | Any], family: str) -> None:
    """The fixed values (together) and each choice's options as the family's config or
    :class:`~torchik.train.TrainConfig` checks them, up front: a trial would otherwise find a
    refused value out only when it builds its config (every trial of a fixed one)."""
    model_cls, train_cls = _config_classes(family)
    model_fields, _ = _names(family)
    for cls, mine in ((model_cls, lambda k: k in model_fields),
                      (train_cls, lambda k: k not in model_fields)):  # fmt: skip
        fixed = {k: v for k, v in space.items() if mine(k) and not isinstance(v, Param)}
        _build(cls, fixed, None)
        for name, param in space.items():
            if mine(name) and isinstance(param, Choice):
                for option in param.choices:
                    _build(cls, {**fixed, name: option}, name)


def _build(cls: type, values: dict[str, Any], choice: str | None) -> None:
    """``cls(**values)``, its refusal as the search space's; for a ``choice``'s option, only
    a refusal of that setting (another setting's default may not suit the option alone)."""
    try:
        cls(**values)
    except (TypeError, ValueError) as err:
        if choice is not None and not str(err).startswith(choice):
            return
        what = f"choice of {choice!r}" if choice is not None else "fixed value"
        raise ValueError(f"search space: a {what} is refused: {err}") from None


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping in a JSON file, or in a YAML file (``.yaml``/``.yml``, needs PyYAML)."""
    path = Path(path)
    text = read_text(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ImportError("reading YAML needs PyYAML: pip install pyyaml") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: not valid YAML ({type(err).__name__})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err.msg}, line {err.lineno})") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of setting names, got {type(data).__name__}")
    return data


def read_space(path: str | Path, family: str) -> dict[str, Param | Any]:
    """:func:`parse_space` of the mapping in a JSON or YAML file (:func:`read_mapping`)."""
    return parse_space(read_mapping(path), family)


def space_to_json(space: dict[str, Param | Any]) -> dict[str, Any]:
    """The space in the file format (readable back by :func:`parse_space`)."""
    out: dict[str, Any] = {}
    for name, param in space.items():
        if isinstance(param, Choice):
            out[name] = {"choices": list(param.choices)}
        elif isinstance(param, Float | Int):
            out[name] = {"low": param.low, "high": param.high, "log": param.log}
        else:
            out[name] = param
    return out


def suggest(trial: Any, space: dict[str, Param | Any]) -> dict[str, Any]:
    """One setting per entry of ``space``, drawn by an ``optuna.Trial`` (fixed values as they
    are)."""
    out = {}
    for name, p in space.items():
        if isinstance(p, Float):
            out[name] = trial.suggest_float(name, p.low, p.high, log=p.log)
        elif isinstance(p, Int):
            out[name] = trial.suggest_int(name, p.low, p.high, log=p.log)
        elif isinstance(p, Choice):
            out[name] = trial.suggest_categorical(name, p.choices)
        else:
            out[name] = p
    return out


def split_params(family: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model config kwargs, TrainConfig kwargs)`` of a flat mapping of settings."""
    model_fields, _ = _names(family)
    model = {k: v for k, v in params.items() if k in model_fields}
    return model, {k: v for k, v in params.items() if k not in model_fields}
