"""Datasets for learned IK: sample joints, run forward kinematics, save, load and split.

A dataset is pairs ``(q, target)``: ``q (N, D)`` joint configurations and ``target (N, T)`` the
encoded poses of an end link (see :func:`encode_target`). Forward kinematics runs in float64 on
the CPU; both tensors are stored as float32.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from torchik._version import __version__
from torchik.checks import check_device, check_int, check_tensor, short_repr
from torchik.files import atomic_save, load_tensors
from torchik.geometry.rotations import rotmat_to_6d, sixd_to_rotmat
from torchik.geometry.transforms import pose_to_matrix
from torchik.learn.spec import TARGET_DIMS, ProblemSpec, robot_hash
from torchik.robot.configuration import MAX_CONFIGURATIONS

if TYPE_CHECKING:
    from torchik.robot.robot import Robot

__all__ = [
    "DATA_FORMAT_VERSION",
    "as_target",
    "FKStream",
    "IKDataset",
    "decode_target",
    "encode_target",
    "load_dataset",
    "make_dataset",
]

DATA_FORMAT_VERSION = 1
"""Version of the layout that :meth:`IKDataset.save` writes."""

MAX_SEED = 2**63 - 1
"""The largest seed of a stream (a ``torch.Generator`` takes 64 bits)."""

_CHUNK = 65536  # FK batch: bounds peak memory (~L * 16 doubles per row) at any n


# ---------------------------------------------------------------------------- targets
def encode_target(pose: Tensor, kind: str) -> Tensor:
    """End-link poses as model targets.

    Args:
        pose: ``(..., 4, 4)`` homogeneous transforms ``T_root_link``.
        kind: ``"position"`` -> ``(..., 3)``; ``"pose"`` -> ``(..., 9)``, the position then
            :func:`torchik.geometry.rotmat_to_6d`; ``"planar"`` -> ``(..., 2)``, x and y.

    Returns:
        ``(..., T)``.

    Raises:
        ValueError: an unknown ``kind``, ``pose`` not ``(..., 4, 4)``.
        TypeError: ``pose`` not a floating-point tensor.
    """
    _target_size(kind)
    check_tensor("pose", pose, (4, 4))
    if kind == "position":
        return pose[..., :3, 3]
    if kind == "pose":
        return torch.cat((pose[..., :3, 3], rotmat_to_6d(pose[..., :3, :3])), dim=-1)
    if kind == "planar":
        return pose[..., :2, 3]
    raise ValueError(f"kind must be 'position', 'pose' or 'planar', got {kind!r}")


def as_target(target: Tensor, kind: str) -> Tensor:
    """Model targets of ``kind`` from what a user holds: poses ``(..., 4, 4)`` are encoded
    (:func:`encode_target`), positions ``(..., 3)`` serve position targets (and planar ones,
    their x and y), and targets already encoded ``(..., T)`` pass through.

    Args:
        target: poses, positions or encoded targets.
        kind: ``"position"``, ``"pose"`` or ``"planar"``.

    Returns:
        ``(..., T)``.

    Raises:
        ValueError: positions for pose targets (a rotation is needed), or a shape that is none
            of these.

    Example:
        >>> as_target(torch.eye(4).expand(2, 4, 4), "position")
        tensor([[0., 0., 0.],
                [0., 0., 0.]])
    """
    size = _target_size(kind)
    check_tensor("target", target, min_dims=1)
    if target.dim() >= 2 and target.shape[-2:] == (4, 4):
        return encode_target(target, kind)
    if target.dim() >= 1 and target.shape[-1] == size:
        return target
    if kind == "planar" and target.dim() >= 1 and target.shape[-1] == 3:
        return target[..., :2]
    want = {"position": "(..., 3) positions", "pose": "(..., 9) pose targets",
            "planar": "(..., 2) or (..., 3) points"}[kind]  # fmt: skip
    raise ValueError(
        f"{kind} targets must be (..., 4, 4) poses or {want}, got shape {tuple(target.shape)}"
    )


def decode_target(target: Tensor, kind: str) -> tuple[Tensor, Tensor | None]:
    """Inverse of :func:`encode_target`: ``(position (..., 3), rotmat (..., 3, 3) or None)``.

    Planar targets get ``z = 0``; only ``"pose"`` targets have a rotation (orthonormalised by
    :func:`torchik.geometry.sixd_to_rotmat`, so any network output decodes to a rotation).

    Raises:
        ValueError: an unknown ``kind``, ``target`` not ``(..., T)`` of its size.
        TypeError: ``target`` not a floating-point tensor.
    """
    check_tensor("target", target, (_target_size(kind),))
    if kind == "position":
        return target, None
    if kind == "pose":
        return target[..., :3], sixd_to_rotmat(target[..., 3:9])
    if kind == "planar":
        return torch.cat((target, torch.zeros_like(target[..., :1])), dim=-1), None
    raise ValueError(f"kind must be 'position', 'pose' or 'planar', got {kind!r}")


def _target_size(kind: Any) -> int:
    """``T`` of targets of ``kind`` (:data:`~torchik.learn.spec.TARGET_DIMS`), or one line."""
    if not isinstance(kind, str) or kind not in TARGET_DIMS:
        raise ValueError(f"kind must be 'position', 'pose' or 'planar', got {short_repr(kind)}")
    return TARGET_DIMS[kind]


def decode_pose(target: Tensor) -> Tensor:
    """``"pose"`` targets ``(..., 9)`` -> homogeneous transforms ``(..., 4, 4)``."""
    position, rotmat = decode_target(target, "pose")
    assert rotmat is not None  # "pose" targets carry one
    return pose_to_matrix(position, rotmat)


# ---------------------------------------------------------------------------- the dataset
@dataclass
class IKDataset:
    """Pairs of joints and targets for one robot, link and target kind.

    Attributes:
        q: ``(N, D)`` joint values (float32).
        target: ``(N, T)`` encoded end-link poses (float32).
        spec: the :class:`torchik.learn.ProblemSpec` (robot, hash, link, target kind, limits).
        meta: plain-typed provenance: ``sampler``, ``std``, ``seed``, ``format_version``,
            ``created_by``, ``n_clamped`` and, for splits, ``split``.
    """

    q: Tensor
    target: Tensor
    spec: ProblemSpec
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.spec, ProblemSpec):
            raise TypeError(f"spec must be a ProblemSpec, got {type(self.spec).__name__}")
        check_tensor("q", self.q, min_dims=1)
        check_tensor("target", self.target, min_dims=1)
        if not isinstance(self.meta, dict):
            raise TypeError(f"meta must be a dict, got {type(self.meta).__name__}")
        n, t = self.q.shape[0], self.spec.target_dim
        if self.q.shape != (n, self.spec.dof) or self.target.shape != (n, t):
            raise ValueError(
                f"q {tuple(self.q.shape)} and target {tuple(self.target.shape)} must be "
                f"(N, {self.spec.dof}) and (N, {t})"
            )

    def __len__(self) -> int:
        return self.q.shape[0]

    def __repr__(self) -> str:
        """One line: rows, robot, link, target kind, shapes and provenance (not the tensors)."""
        meta = ", ".join(f"{k} {self.meta[k]}" for k in ("sampler", "seed") if k in self.meta)
        return (
            f"IKDataset({len(self)} rows of {self.spec.robot} {self.spec.link}, "
            f"{self.spec.targets} targets: q {tuple(self.q.shape)}, target "
            f"{tuple(self.target.shape)}, {self.q.dtype}" + (f"; {meta})" if meta else ")")
        )

    def subset(self, index: Tensor | slice, **meta: Any) -> IKDataset:
        """The rows ``index`` (a long or bool tensor) as a new dataset; ``meta`` is added."""
        return IKDataset(self.q[index], self.target[index], self.spec, {**self.meta, **meta})

    def split(
        self, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
    ) -> tuple[IKDataset, ...]:
        """Disjoint random parts of the rows, one per fraction.

        Part sizes are ``round(cumsum(fractions) * N)`` differences, so they never overlap and,
        when the fractions sum to 1, cover every row. The same ``seed`` gives the same parts.

        Returns:
            One :class:`IKDataset` per fraction (e.g. ``train, val, test``).
        """
        fractions = tuple(float(f) for f in fractions)
        if not fractions or min(fractions) < 0 or sum(fractions) > 1 + 1e-9:
            raise ValueError(f"fractions must be >= 0 and sum to at most 1, got {fractions}")
        order = torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        ends = [round(math.fsum(fractions[: i + 1]) * len(self)) for i in range(len(fractions))]
        starts = [0, *ends[:-1]]
        return tuple(
            self.subset(order[a:b], split={"part": i, "fractions": fractions, "seed": seed})
            for i, (a, b) in enumerate(zip(starts, ends, strict=True))
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the dataset (plain types and tensors, readable with ``weights_only=True``)."""
        atomic_save(
            {
                "format_version": DATA_FORMAT_VERSION,
                "kind": "torchik.IKDataset",
                "q": self.q.detach().cpu(),
                "target": self.target.detach().cpu(),
                "spec": dataclasses.asdict(self.spec),
                "meta": self.meta,
            },
            path,
        )


# ---------------------------------------------------------------------------- sampling
def _fk_copy(robot: Robot, dtype: torch.dtype, device: torch.device) -> Robot:
    """``robot`` in ``dtype`` on ``device``, rebuilt from its URDF when it is in another dtype
    (casting float32 constants up would keep their float32 rounding)."""
    from torchik.robot.robot import Robot

    if robot.dtype != dtype:
        robot = Robot(robot.model, dtype=dtype)
    return robot if robot.device == device else copy.deepcopy(robot).to(device)


def _sample_joints(
    robot: Robot,
    n: int,
    sampler: str,
    std: float | Sequence[float],
    gen: torch.Generator,
    count: bool = True,
) -> tuple[Tensor, int]:
    """``(n, D)`` joints in the robot's dtype, on the generator's device, and the number of
    entries clamped to the limits (``0`` without ``count``: counting waits for the device)."""
    lower, upper = robot.lower, robot.upper
    like: dict[str, Any] = {"generator": gen, "dtype": lower.dtype, "device": lower.device}
    if sampler == "uniform":
        return lower + torch.rand(n, robot.dof, **like) * (upper - lower), 0
    if sampler != "normal":
        raise ValueError(f"sampler must be 'uniform' or 'normal', got {sampler!r}")
    scale = torch.as_tensor(std, dtype=lower.dtype, device=lower.device).expand(robot.dof)
    q = torch.randn(n, robot.dof, **like) * scale
    clamped = torch.clamp(q, lower, upper)
    return clamped, int((clamped != q).sum()) if count else 0


def _check_std(std: float | Sequence[float], dof: int) -> None:
    """Refuse a ``std`` that is not one or ``dof`` finite numbers ``> 0``, whatever the sampler
    (the uniform sampler ignores it, but a negative or NaN one is a mistake all the same)."""
    try:
        if isinstance(std, bool):
            raise TypeError
        values = torch.as_tensor(std, dtype=torch.float64, device="cpu").detach()
    except (TypeError, ValueError, RuntimeError, NotImplementedError):  # a str, None, meta
        raise TypeError(
            f"std must be a number or a list of numbers, got {short_repr(std)}"
        ) from None
    if values.dim() > 1 or values.numel() not in (1, dof):
        raise ValueError(f"std must be one number or {dof} numbers, got {tuple(values.shape)}")
    if not bool(torch.isfinite(values).all() and (values > 0).all()):
        raise ValueError(f"std must be finite and > 0, got {values.tolist()}")


def _std_setting(sampler: str, std: float | Sequence[float], dof: int) -> Any:
    """The ``std`` that the joints are drawn with, in plain types: one float where every joint
    has the same, else one per joint; ``None`` for the uniform sampler, which has none."""
    if sampler != "normal":
        return None
    values = torch.as_tensor(std, dtype=torch.float64, device="cpu").expand(dof).tolist()
    return values[0] if len(set(values)) == 1 else values


def make_dataset(
    robot: Robot,
    n: int,
    link: str | None = None,
    sampler: str = "uniform",
    std: float | Sequence[float] = 0.2,
    targets: str = "position",
    seed: int = 0,
) -> IKDataset:
    """Sample ``n`` joint configurations and their end-link targets.

    Args:
        robot: the robot (any dtype or device; FK runs on a float64 CPU copy).
        n: number of samples.
        link: the end link (default :func:`torchik.description.default_end_link`).
        sampler: ``"uniform"`` within the limits, or ``"normal"``: ``N(0, std^2)`` per joint,
            **clamped** to the limits (the count is ``meta["n_clamped"]``; the benchmark priors
            sit far inside their robots' limits, so there it is 0).
        std: the normal sampler's standard deviation: one number or one per joint (e.g.
            :data:`torchik.description.RAIL_ARM_PRIOR_STD`); finite and ``> 0`` whatever
            the sampler (the uniform one ignores it).
        targets: ``"position"``, ``"pose"`` or ``"planar"`` (see :func:`encode_target`).
        seed: seeds a private generator (the global RNG is untouched).

    Returns:
        The :class:`IKDataset`, float32 on the CPU.

    Example:
        >>> data = make_dataset(torchik.load_robot("panda"), 1000, seed=0)
        >>> data.q.shape, data.target.shape
        (torch.Size([1000, 7]), torch.Size([1000, 3]))
    """
    spec = ProblemSpec.from_robot(robot, link, targets)
    check_int("n", n, 0, MAX_CONFIGURATIONS)
    check_int("seed", seed, 0, 2**64 - 1)  # torch's seeds
    _check_std(std, robot.dof)
    fk_robot = _fk_copy(robot, torch.float64, torch.device("cpu"))
    gen = torch.Generator().manual_seed(seed)
    q, n_clamped = _sample_joints(fk_robot, n, sampler, std, gen)
    target = torch.empty(n, spec.target_dim, dtype=torch.float32)
    with torch.no_grad():
        for start in range(0, n, _CHUNK):
            pose = fk_robot.forward_kinematics(q[start : start + _CHUNK], spec.link)
            target[start : start + _CHUNK] = encode_target(pose, targets)
    std_meta = float(std) if isinstance(std, int | float) else tuple(float(s) for s in std)
    meta = {
        "sampler": sampler,
        "std": std_meta if sampler == "normal" else None,
        "seed": seed,
        "format_version": DATA_FORMAT_VERSION,
        "created_by": f"torchik {__version__} make_dataset",
        "n_clamped": n_clamped,
    }
    return IKDataset(q.float(), target, spec, meta)


def load_dataset(path: str | os.PathLike, robot: Robot | None = None) -> IKDataset:
    """Read a dataset written by :meth:`IKDataset.save` (never executes pickled code).

    Args:
        path: the file.
        robot: if given, the dataset must have been made for it (same :func:`robot_hash`).

    Raises:
        ValueError: a corrupt or foreign file, a newer format, or another robot.
    """
    name = os.fspath(path)
    blob = load_tensors(name, "cpu", "torchik dataset")
    if not isinstance(blob, dict) or blob.get("kind") != "torchik.IKDataset":
        raise ValueError(f"{name!r} is not a torchik dataset")
    version = blob.get("format_version")
    if not isinstance(version, int) or version > DATA_FORMAT_VERSION:
        raise ValueError(f"{name!r} has dataset format {version!r}; this torchik reads up to 1")
    try:
        data = IKDataset(blob["q"], blob["target"], ProblemSpec(**blob["spec"]), blob["meta"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:  # q not a tensor
        raise ValueError(f"{name!r} is a damaged torchik dataset: {err}") from err
    if robot is not None and robot_hash(robot) != data.spec.robot_hash:
        differs = "; ".join(data.spec.differences(robot, data.spec.link))
        raise ValueError(
            f"{name!r} was made for robot {data.spec.robot!r}, not for this {robot.name!r} "
            f"({differs}): regenerate it"
        )
    return data


# ---------------------------------------------------------------------------- streaming
class FKStream:
    """An endless source of fresh training pairs, made by forward kinematics batch by batch on
    the training device: no data set in memory, never the same pair twice.

    Joints are drawn as in :func:`make_dataset` (uniform in the limits, or ``N(0, std^2)``
    clamped to them) from a private generator on ``device``; their targets come from FK in
    ``fk_dtype`` (float64 by default: exact to the last float32 digit) and are returned as
    float32. The same seed and device give the same batches; :meth:`state_dict` and
    :meth:`load_state_dict` carry the position in the stream (:func:`torchik.train.train` keeps
    it in its checkpoints, so a resumed run continues the same stream).

    Args:
        robot: the robot (any dtype or device; a copy in ``fk_dtype`` on ``device`` is kept).
        link: the end link (default: the robot's default end link).
        targets: ``"position"``, ``"pose"`` or ``"planar"`` (see :func:`encode_target`).
        sampler: ``"uniform"`` or ``"normal"``.
        std: the normal sampler's standard deviation (one number or one per joint; finite
            and ``> 0`` whatever the sampler: the uniform one ignores it).
        seed: seeds the stream's generator.
        device: where joints are drawn and FK runs (default: the robot's device).
        fk_dtype: the dtype of the FK.

    Example:
        >>> stream = FKStream(torchik.load_robot("panda"), seed=0)
        >>> q, target = stream.next(256)
        >>> q.shape, target.shape, stream.spec.link
        (torch.Size([256, 7]), torch.Size([256, 3]), 'panda_hand')
    """

    def __init__(
        self,
        robot: Robot,
        link: str | None = None,
        targets: str = "position",
        sampler: str = "uniform",
        std: float | Sequence[float] = 0.2,
        seed: int = 0,
        device: str | torch.device | None = None,
        fk_dtype: torch.dtype = torch.float64,
    ):
        self.spec = ProblemSpec.from_robot(robot, link, targets)
        if sampler not in ("uniform", "normal"):
            raise ValueError(f"sampler must be 'uniform' or 'normal', got {sampler!r}")
        _check_std(std, robot.dof)
        if fk_dtype not in (torch.float32, torch.float64):
            raise TypeError(f"fk_dtype must be torch.float32 or torch.float64, got {fk_dtype}")
        self.sampler, self.std, self.seed = sampler, std, check_int("seed", seed, 0, MAX_SEED)
        self._fk_dtype = fk_dtype
        device = robot.device if device is None else check_device("device", device)
        self._robot = _fk_copy(robot, fk_dtype, device)
        self.generator = torch.Generator(self.device).manual_seed(self.seed)
        self.drawn = 0

    @property
    def device(self) -> torch.device:
        """Where the pairs are made."""
        return self._robot.device

    def to(self, device: str | torch.device) -> FKStream:
        """The stream on ``device``, restarted at its seed (a generator cannot change device);
        ``self`` where it is there already."""
        device = check_device("device", device)
        if device == self.device or (device.index is None and device.type == self.device.type):
            return self
        new = copy.copy(self)
        new._robot = _fk_copy(self._robot, self._fk_dtype, device)
        new.generator, new.drawn = torch.Generator(device).manual_seed(self.seed), 0
        return new

    @torch.no_grad()
    def _make(self, n: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        q, _ = _sample_joints(self._robot, n, self.sampler, self.std, gen, count=False)
        pose = self._robot.forward_kinematics(q, self.spec.link)
        return q.float(), encode_target(pose, self.spec.targets).float()

    def next(self, batch_size: int) -> tuple[Tensor, Tensor]:
        """The next ``batch_size`` pairs: ``q (B, D)`` and ``target (B, T)``, float32."""
        check_int("batch_size", batch_size, 1)
        self.drawn += batch_size
        return self._make(batch_size, self.generator)

    def draw(self, n: int, seed: int) -> IKDataset:
        """``n`` pairs from a generator of their own (the stream does not move): a validation
        set, or the large draw that normalisation statistics come from.

        Returns:
            An :class:`IKDataset` on the CPU.
        """
        check_int("n", n, 1, MAX_CONFIGURATIONS)
        check_int("seed", seed, 0, MAX_SEED)
        gen = torch.Generator(self.device).manual_seed(int(seed))
        parts = [self._make(min(_CHUNK, n - start), gen) for start in range(0, n, _CHUNK)]
        q, target = (torch.cat(p).cpu() for p in zip(*parts, strict=True))
        meta = {"sampler": self.sampler, "seed": int(seed), "created_by": "FKStream.draw"}
        return IKDataset(q, target, self.spec, meta)

    def settings(self) -> dict[str, Any]:
        """What the pairs are drawn with, in plain types: ``seed``, ``sampler``, ``std`` (one
        number, or one per joint; ``None`` for the uniform sampler, which has none) and
        ``fk_dtype``."""
        std = _std_setting(self.sampler, self.std, self.spec.dof)
        return {"seed": self.seed, "sampler": self.sampler, "std": std,
                "fk_dtype": str(self._fk_dtype)}  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """The position in the stream and its :meth:`settings` (plain types, a CPU tensor)."""
        return {**self.settings(), "drawn": self.drawn, "generator": self.generator.get_state()}

    def other(self, state: dict[str, Any]) -> str | None:
        """Why :meth:`state_dict`'s ``state`` is another stream's than this one's: its first
        setting that differs, as ``"std 0.2, this one has 0.5"``; ``None`` where none does (a
        state of an older torchik has only the seed).

        Args:
            state: what :meth:`state_dict` returned.
        """
        for key, mine in self.settings().items():
            saved, plain = state.get(key), type(state.get(key)) is type(mine)
            if (key in state or key == "seed") and not (plain and saved == mine):
                shown = repr(saved) if plain else short_repr(saved)  # a crafted file's: short
                return f"{key} {shown}, this one has {mine!r}"
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where :meth:`state_dict` was taken (same settings and device type).

        Raises:
            ValueError: a state of another stream (:meth:`other` says why).
        """
        if (why := self.other(state)) is not None:
            raise ValueError(f"the saved stream has {why}")
        self.generator.set_state(state["generator"])
        self.drawn = int(state["drawn"])

    def __repr__(self) -> str:
        return (
            f"FKStream(robot={self.spec.robot!r}, link={self.spec.link!r}, "
            f"targets={self.spec.targets!r}, sampler={self.sampler!r}, seed={self.seed}, "
            f"device={str(self.device)!r}, drawn={self.drawn})"
        )
