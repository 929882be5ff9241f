"""Path following: many smooth joint trajectories through a sequence of end-effector targets.

A model that samples joint by joint (:meth:`torchik.models.IKNet.sample_within`) follows a
path by drawing, at every step, each joint from its distribution restricted to within ``radius``
of the same joint at the previous step (Eq. 15 of the Neural IK paper). No joint of a sampled
path can therefore move more than ``radius`` between two steps, and every path is a different
draw: :func:`follow_path` returns many of them at once. :func:`refine_path` polishes every step
with numerical IK seeded by the sampled path, within ``radius`` of the polished previous step
so that the bound on the jumps survives; :func:`sequential_ik_path` is the classic
baseline (numerical IK at each step, seeded by the previous solution);
:func:`make_smooth_targets` makes test paths by moving the arm smoothly.

Example:
    >>> import torch, torchik
    >>> robot = torchik.load_robot("snake2", dtype=torch.float64)
    >>> q_true, targets = make_smooth_targets(robot, n_paths=1, steps=20)
    >>> baseline = sequential_ik_path(robot, targets[0], start=q_true[0, 0])
    >>> baseline.q.shape, bool(baseline.mean_error.max() < 1e-3)
    (torch.Size([1, 20, 2]), True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from torchik.checks import check_float, check_tensor
from torchik.geometry.joints import joint_distance, wrap_angle
from torchik.ik.solve import solve_ik
from torchik.learn.metrics import position_error
from torchik.robot.robot import Robot

__all__ = [
    "PathResult",
    "DISTINCT_TOL",
    "count_distinct_paths",
    "follow_path",
    "joint_jumps",
    "make_smooth_targets",
    "path_distance",
    "refine_path",
    "sequential_ik_path",
]


# ---------------------------------------------------------------------------- metrics
def joint_jumps(q: Tensor, continuous: Tensor) -> Tensor:
    """``(..., S - 1, D)`` absolute joint changes between consecutive steps of paths
    ``q (..., S, D)``; continuous joints' changes wrapped to ``[0, pi]``.

    Raises:
        ValueError: ``q`` of fewer than 2 dimensions, ``continuous`` not ``(D,)``.
        TypeError: ``q`` not a floating-point tensor, ``continuous`` not bool.
    """
    _check_paths(q, continuous, 2)
    diff = q[..., 1:, :] - q[..., :-1, :]
    return torch.where(continuous.to(q.device), wrap_angle(diff), diff).abs()


DISTINCT_TOL = 0.5
"""Default of :func:`count_distinct_paths`: two paths whose joints are on average less than
0.5 rad (or m) apart, over the steps, count as one."""


def path_distance(a: Tensor, b: Tensor, continuous: Tensor) -> Tensor:
    """``(...)`` mean over the steps of the joint-space distance between paths ``a (..., S, D)``
    and ``b`` (broadcast; continuous joints wrapped, see :func:`torchik.ik.joint_distance`).

    Raises:
        ValueError: paths of fewer than 2 dimensions, of other sizes ``D`` or shapes that do
            not broadcast, ``continuous`` not ``(D,)``.
        TypeError: paths not floating-point tensors, ``continuous`` not bool.
    """
    _check_paths(a, continuous, 2, "a")
    check_tensor("b", b, (a.shape[-1],), min_dims=2)
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise ValueError(f"paths a {tuple(a.shape)} and b {tuple(b.shape)} do not "
                         "broadcast") from None  # fmt: skip
    return joint_distance(a, b, continuous.to(a.device)).mean(dim=-1)


def _check_paths(q: Tensor, continuous: Tensor, dims: int, name: str = "q") -> None:
    """``q (..., D)`` paths of ``dims`` dimensions at least and ``continuous (D,)`` bool."""
    check_tensor(name, q, min_dims=dims)
    check_tensor("continuous", continuous, (q.shape[-1],), dtype=torch.bool, batch=False)


def count_distinct_paths(q: Tensor, continuous: Tensor, tol: float = DISTINCT_TOL) -> int:
    """Number of paths ``q (P, S, D)`` at least ``tol`` from every path kept before them.

    The distance of two paths is :func:`path_distance`, the mean over the steps of their
    joint-space distance: paths that differ only by per-step noise (windowed samples of the same
    motion) are one path, paths that differ along most of their length are distinct. Paths are
    kept greedily in order, so the count is that of a ``tol``-separated subset (rad or m).

    Raises:
        ValueError: ``q`` not ``(P, S, D)``, ``continuous`` not ``(D,)``, ``tol`` negative.
        TypeError: ``q`` not a floating-point tensor, ``continuous`` not bool, ``tol`` not a
            number.
    """
    _check_paths(q, continuous, 3)
    if q.dim() != 3:
        raise ValueError(f"q must be (P, S, D) paths, got {tuple(q.shape)}")
    tol = check_float("tol", tol, 0.0)
    dist = path_distance(q[:, None], q[None, :], continuous)
    kept = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device)
    for i in range(q.shape[0]):
        kept[i] = not bool((dist[i] < tol)[kept].any())
    return int(kept.sum())


@dataclass
class PathResult:
    """Joint paths and their quality.

    Attributes:
        q: ``(P, S, D)`` joint paths (P paths of S steps).
        position_error: ``(P, S)`` distance (m) of the end link to each step's target.
        continuous: ``(D,)`` bool mask of continuous joints (for the jumps).
        radius: the window radius the paths were sampled with, if any.
        success: ``(P, S)`` bool, the step's error within ``tol_position`` (the solver's own
            verdict where a numerical solver produced the step); ``None`` if not measured.
        tol_position: the tolerance (m) of ``success``, if measured.
    """

    q: Tensor
    position_error: Tensor
    continuous: Tensor
    radius: float | None = None
    success: Tensor | None = None
    tol_position: float | None = None

    @classmethod
    def measure(
        cls,
        robot: Robot,
        link: str,
        targets: Tensor,
        q: Tensor,
        radius: float | None = None,
        *,
        tol_position: float | None = None,
        success: Tensor | None = None,
    ) -> PathResult:
        """Errors of paths ``q (P, S, D)`` against ``targets (S, 3)`` (FK in ``robot``'s dtype);
        ``success`` as given, else ``position_error <= tol_position`` where a tolerance is."""
        error = position_error(robot, q, targets.to(robot.dtype), link)
        if success is None and tol_position is not None:
            success = error <= tol_position
        return cls(q, error, robot.continuous.cpu(), radius, success, tol_position)

    @property
    def mean_error(self) -> Tensor:
        """``(P,)`` mean position error of each path (m)."""
        return self.position_error.mean(dim=-1)

    @property
    def jumps(self) -> Tensor:
        """``(P, S - 1, D)`` absolute joint changes between steps (see :func:`joint_jumps`)."""
        return joint_jumps(self.q, self.continuous)

    @property
    def max_jump(self) -> Tensor:
        """``(P,)`` largest change of any joint between two steps of each path (0 for one
        step)."""
        jumps = self.jumps.flatten(1)
        return jumps.amax(dim=-1) if jumps.shape[-1] else jumps.new_zeros(jumps.shape[0])

    @property
    def mean_jump(self) -> Tensor:
        """``(P,)`` mean absolute change of a joint between two steps of each path (0 for one
        step)."""
        jumps = self.jumps.flatten(1)
        return jumps.mean(dim=-1) if jumps.shape[-1] else jumps.new_zeros(jumps.shape[0])

    def distinct(self, tol: float = DISTINCT_TOL) -> int:
        """Number of distinct paths (see :func:`count_distinct_paths`)."""
        return count_distinct_paths(self.q, self.continuous, tol)

    def summary(self, tol: float = DISTINCT_TOL) -> dict[str, float]:
        """Plain numbers: mean / best / worst of the per-path mean errors (m), largest and
        mean joint jump, the number of distinct paths, the worst error of any step
        (``worst_step_error``, m: one unreachable step shows here, not in the means) and the
        share of steps within tolerance (``within_tol``, NaN where ``success`` is not known)."""
        mean = self.mean_error
        within = math.nan if self.success is None else self.success.double().mean().item()
        return {
            "paths": self.q.shape[0],
            "mean_error": mean.mean().item(),
            "best_error": mean.min().item(),
            "worst_error": mean.max().item(),
            "max_jump": self.max_jump.max().item(),
            "mean_jump": self.mean_jump.mean().item(),
            "distinct": self.distinct(tol),
            "worst_step_error": self.position_error.max().item(),
            "within_tol": within,
        }


# ---------------------------------------------------------------------------- test paths
def make_smooth_targets(
    robot: Robot,
    link: str | None = None,
    steps: int = 50,
    n_paths: int = 1,
    max_move: float = 1.0,
    margin: float = 0.1,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Smooth random joint paths within the limits and the end-link positions along them.

    Each path moves every joint from a random start to a random end at most ``max_move`` away
    (both at least ``margin`` of the range inside the limits) with the smooth profile
    ``(1 - cos(pi s)) / 2``, ``s`` from 0 to 1: no joint moves more than
    ``max_move * pi / (2 (steps - 1))`` per step.

    Args:
        robot: the robot.
        link: the end link (default: :func:`torchik.ik.solve.default_link`).
        steps: steps per path (``>= 2``).
        n_paths: number of paths.
        max_move: largest change of a joint over the path (rad or m).
        margin: fraction of each joint's range kept free at both ends.
        generator: random generator (CPU).

    Returns:
        ``q (n_paths, steps, D)`` and ``targets (n_paths, steps, 3)``, in the robot's dtype.

    Raises:
        TypeError: ``steps`` or ``n_paths`` not an int, ``max_move`` or ``margin`` not a
            number, ``generator`` not a ``torch.Generator``, ``link`` not a str.
        ValueError: ``steps < 2``, ``n_paths < 1``, more than ``MAX_CONFIGURATIONS``
            configurations in all (:data:`torchik.robot.configuration.MAX_CONFIGURATIONS`),
            ``max_move`` negative or not finite, ``margin`` out of ``[0, 0.5)``, a generator
            of another device than the CPU.
    """
    from torchik.checks import check_float, check_generator, check_int
    from torchik.ik.solve import default_link
    from torchik.robot.configuration import MAX_CONFIGURATIONS

    check_int("steps", steps, 2, MAX_CONFIGURATIONS)
    check_int("n_paths", n_paths, 1, MAX_CONFIGURATIONS // steps)
    check_float("max_move", max_move, 0.0)
    if not check_float("margin", margin, 0.0, 0.5) < 0.5:
        raise ValueError(f"margin must be < 0.5, a fraction kept free at both ends, got {margin}")
    check_generator("generator", generator)
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator, got one on {generator.device}")
    if link is not None and not isinstance(link, str):
        raise TypeError(f"link must be a link name (str) or None, got {type(link).__name__}")
    link = default_link(robot) if link is None else link
    lower, upper = robot.lower.cpu().double(), robot.upper.cpu().double()
    lo, hi = lower + margin * (upper - lower), upper - margin * (upper - lower)
    u = torch.rand(2, n_paths, robot.dof, generator=generator, dtype=torch.float64)
    start = lo + u[0] * (hi - lo)
    end = torch.minimum(torch.maximum(start + max_move * (2 * u[1] - 1), lo), hi)
    s = torch.linspace(0.0, 1.0, steps, dtype=torch.float64)
    profile = (0.5 * (1.0 - torch.cos(math.pi * s)))[:, None]
    q = (start[:, None] + (end - start)[:, None] * profile).to(robot.lower)
    with torch.no_grad():
        return q, robot.link_positions(q, link)


# ---------------------------------------------------------------------------- following
def _fk_robot(model, robot: Robot | None) -> Robot:
    """``robot``, or the bundled robot the model was trained for (checked by hash)."""
    from torchik.learn.spec import robot_hash
    from torchik.robot.robot import load_robot

    if robot is None:
        try:
            robot = load_robot(model.spec.robot, dtype=torch.float64)
        except (ValueError, TypeError) as err:
            raise ValueError(f"pass robot=...: {err}") from err
    if robot_hash(robot) != model.spec.robot_hash:
        raise ValueError(f"robot {robot.name!r} is not the robot the model was trained for")
    return robot


def _first_step(model, target: Tensor, rows: int, start, radius, generator) -> Tensor:
    """``rows`` samples for the first target, free or within ``radius`` of ``start``."""
    if start is None:
        return model.sample(target, rows, generator=generator)
    center = torch.as_tensor(start).to(target).reshape(-1, model.spec.dof)
    center = center.repeat(rows // center.shape[0], 1)
    return model.sample_within(target, rows, center, radius, generator=generator)


def _check_follow(robot: Robot, n_paths: int, radius, start, candidates: int) -> None:
    """follow_path's arguments, each refused in one line naming it."""
    from torchik.checks import check_int
    from torchik.robot.configuration import MAX_CONFIGURATIONS

    check_int("n_paths", n_paths, 1, MAX_CONFIGURATIONS)
    check_int("candidates", candidates, 1, MAX_CONFIGURATIONS // n_paths)
    d = robot.dof
    try:
        shape = torch.as_tensor(radius, dtype=torch.float64).shape
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"radius must be a number or a ({d},) tensor, got "
                        f"{type(radius).__name__}") from None  # fmt: skip
    if shape not in ((), (d,)):
        raise ValueError(f"radius must be a number or ({d},), one per joint, got {tuple(shape)}")
    if start is None:
        return
    try:
        q = torch.as_tensor(start).detach().to("cpu", torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"start must be a ({d},) or ({n_paths}, {d}) tensor, got "
                        f"{type(start).__name__}") from None  # fmt: skip
    rows = q.numel() // d if q.dim() in (1, 2) and q.shape[-1] == d else 0
    if not rows or n_paths % rows:  # (k, D) with P a multiple of k is taken, as refine_path does
        raise ValueError(f"start must have shape ({d},) or ({n_paths}, {d}), got {tuple(q.shape)}")
    lower, upper = robot.lower.cpu().double(), robot.upper.cpu().double()
    outside = ((q < lower - 1e-6) | (q > upper + 1e-6) | q.isnan()) & ~robot.continuous.cpu()
    if outside.any():
        names = [robot.joint_names[j] for j in outside.reshape(-1, d).any(dim=0).nonzero()[:, 0]]
        raise ValueError(f"start must be within the joint limits (step 0 stays within radius "
                         f"of it); outside them: {', '.join(names)}")  # fmt: skip


def _best_candidates(q: Tensor, robot: Robot, link: str, target: Tensor, n_paths: int) -> Tensor:
    """The candidate of each path (``q (m * P, D)``, candidate-major) nearest its target."""
    q = q.reshape(-1, n_paths, q.shape[-1])
    error = position_error(robot, q, target.to(robot.dtype), link)
    return q.gather(0, error.argmin(dim=0)[None, :, None].expand(1, *q.shape[1:]))[0]


@torch.no_grad()
def follow_path(
    model,
    targets: Tensor,
    n_paths: int,
    radius: float | Tensor,
    start: Tensor | None = None,
    refine: bool = False,
    robot: Robot | None = None,
    *,
    candidates: int = 1,
    tol_position: float = 1e-5,
    generator: torch.Generator | None = None,
) -> PathResult:
    """``n_paths`` smooth joint paths through ``targets`` by windowed sampling (Eq. 15).

    Step 0 is sampled freely (or within ``radius`` of ``start``); step ``t`` draws every joint
    within ``radius`` of the same path's step ``t - 1`` (joint by joint, see
    :meth:`~torchik.models.IKNet.sample_within`), so no joint jumps by more than ``radius``.

    Args:
        model: a model with ``sample`` and ``sample_within`` (e.g. :class:`~torchik.models.IKNet`).
        targets: ``(S, T)`` targets of the model's kind (positions ``(S, 3)``).
        n_paths: paths ``P`` to draw.
        radius: window half-width (rad or m): a number or ``(D,)``.
        start: ``(D,)`` or ``(P, D)`` configuration the paths start near, within the joint
            limits (continuous joints excepted).
        refine: polish every step with :func:`refine_path` within ``radius`` of the refined
            previous step (and of ``start``): the jumps stay bounded by ``radius``.
        robot: the robot for the errors (default: the bundled robot named by the model's spec).
        candidates: draw this many windowed samples per path and step and keep the one nearest
            the target (1: plain sampling, no kinematics in the loop).
        tol_position: a step succeeds within this distance of its target (m); with
            ``refine`` it is also where the solver stops (see :func:`refine_path`).
        generator: random generator on the model's device.

    Returns:
        A :class:`PathResult` with ``q (P, S, D)`` and ``success (P, S)``.

    Raises:
        TypeError: ``model`` has no ``sample_within`` (only IKNet models follow paths),
            arguments of the wrong kind.
        ValueError: ``n_paths`` or ``candidates`` below 1, ``radius`` not a number or
            ``(D,)``, ``start`` not ``(D,)`` or ``(P, D)`` or outside the joint limits (the
            joints are named; a start beyond them could not be kept within ``radius`` of step 0).
    """
    from torchik.learn.data import decode_target

    if not callable(getattr(model, "sample_within", None)):
        raise TypeError(
            f"follow_path needs a model that samples within a window (sample_within): IKNet "
            f"models do (e.g. load_pretrained('digit_arm_iknet')), a "
            f"{getattr(model, 'family', type(model).__name__)!r} model does not"
        )
    robot, link = _fk_robot(model, robot), model.spec.link
    _check_follow(robot, n_paths, radius, start, candidates)
    targets = targets.to(model.target_mean)
    position, _ = decode_target(targets, model.spec.targets)
    rows = n_paths * candidates

    def keep(q: Tensor, step: int) -> Tensor:
        return _best_candidates(q, robot, link, position[step], n_paths) if candidates > 1 else q

    path = [keep(_first_step(model, targets[0], rows, start, radius, generator), 0)]
    for step in range(1, targets.shape[0]):
        center = path[-1].repeat(candidates, 1)
        q = model.sample_within(targets[step], rows, center, radius, generator=generator)
        path.append(keep(q, step))
    q = torch.stack(path, dim=1)
    if refine:
        return refine_path(robot, position, q, link, radius=radius, start=start,
                           tol_position=tol_position)  # fmt: skip
    r = float(radius) if torch.as_tensor(radius).dim() == 0 else None
    return PathResult.measure(robot, link, position, q, r, tol_position=tol_position)


def refine_path(
    robot: Robot,
    targets: Tensor,
    paths: Tensor,
    link: str | None = None,
    *,
    radius: float | Tensor | None = None,
    start: Tensor | None = None,
    both_ways: bool = True,
    tol_position: float = 1e-5,
    max_iters: int = 30,
    generator: torch.Generator | None = None,
) -> PathResult:
    """Every step of ``paths (P, S, D)`` polished by Levenberg-Marquardt seeded with it.

    Position-only LM takes minimum-norm damped steps from the seed, so a refined step stays
    close to its sample (the 4-joint Digit arm keeps its redundancy where the path put it).

    Without ``radius`` every step is refined on its own, all at once, with no restarts: the
    refined paths are exact but their jumps are not bounded. With ``radius`` the steps are
    refined in order, all paths together: step ``t`` is solved within the box
    ``q_{t-1} ± radius`` (intersected with the joint limits; ``q_{t-1}`` the path's refined
    previous step, see ``lower``/``upper`` of :func:`~torchik.ik.solve_ik`), seeded with the
    sampled step moved into the box and, where that stalls, with random restarts inside the
    box. No joint then jumps by more than ``radius`` (continuous joints compared wrapped); a
    step the box cannot reach keeps the nearest point found in it.

    A path that starts on a branch of solutions that ends (the arm runs into a joint limit)
    gets stuck there in order of time, and one whose branch begins later gets stuck in reverse
    order. With ``both_ways`` each path is also refined from the last step back to the first
    and the direction with the lower mean error is kept; both are bounded by ``radius``.

    Args:
        robot: the robot.
        targets: ``(S, 3)`` positions.
        paths: ``(P, S, D)`` seeds.
        link: the end link (default: :func:`torchik.ik.solve.default_link`).
        radius: largest joint change between steps (rad or m): a number or ``(D,)``; ``None``:
            unconstrained.
        start: ``(D,)`` or ``(P, D)``: with ``radius``, step 0 is also kept within ``radius``
            of it (and the paths are refined forwards only); ``None``: step 0 is free.
        both_ways: with ``radius``, also refine backwards and keep the better direction.
        tol_position: LM stops a step within this distance (m).
        max_iters: LM iterations per step.
        generator: random generator for the restarts (on the robot's device).

    Returns:
        A :class:`PathResult` of the refined paths (with ``radius`` recorded if a number) and
        the solver's ``success`` of every step (within ``tol_position``).
    """
    from torchik.ik.solve import default_link

    link = default_link(robot) if link is None else link
    seeds, targets = paths.to(robot.dtype), targets.to(robot.dtype)
    solve = partial(
        solve_ik, robot, link=link, position_only=True, tol_position=tol_position,
        max_iters=max_iters, generator=generator,
    )  # fmt: skip
    if radius is None:
        goal = targets.expand(*paths.shape[:-1], 3)
        result = solve(goal, seeds=seeds[..., None, :], restarts=False)
        success = result.success[..., 0]
        return PathResult.measure(robot, link, targets, result.q[..., 0, :],
                                  tol_position=tol_position, success=success)  # fmt: skip
    r = torch.as_tensor(radius, dtype=seeds.dtype, device=seeds.device)  # 0.1 as float64
    q, error, success = _refine_in_order(solve, targets, seeds, r, start)
    if both_ways and start is None:
        q_back, error_back, success_back = _refine_in_order(
            solve, targets.flip(0), seeds.flip(1), r, None
        )
        backwards = (error_back.mean(dim=-1) < error.mean(dim=-1))[:, None]
        q = torch.where(backwards[..., None], q_back.flip(1), q)
        success = torch.where(backwards, success_back.flip(1), success)
    scalar = float(radius) if r.dim() == 0 else None
    return PathResult.measure(robot, link, targets, q, scalar, tol_position=tol_position,
                              success=success)  # fmt: skip


def _refine_in_order(solve, targets: Tensor, seeds: Tensor, radius: Tensor, start):
    """Steps refined one after the other, each within ``radius`` of the one before (step 0
    within ``radius`` of ``start`` if given); ``q (P, S, D)``, errors and successes ``(P, S)``."""
    n_paths, previous = seeds.shape[0], None
    if start is not None:  # (D,) or (k, D) with P a multiple of k, as in follow_path
        start = start.to(seeds).reshape(-1, seeds.shape[-1])
        previous = start.repeat(n_paths // start.shape[0], 1)
    path, error, success = [], [], []
    for step, target in enumerate(targets):
        box = {} if previous is None else {"lower": previous - radius, "upper": previous + radius}
        result = solve(target.expand(n_paths, 3), seeds=seeds[:, step, None], restarts=True, **box)
        previous = result.q[:, 0]
        path.append(previous)
        error.append(result.position_error[:, 0])
        success.append(result.success[:, 0])
    return torch.stack(path, dim=1), torch.stack(error, dim=1), torch.stack(success, dim=1)


def sequential_ik_path(
    robot: Robot,
    targets: Tensor,
    start: Tensor,
    link: str | None = None,
    *,
    tol_position: float = 1e-5,
    max_iters: int = 60,
) -> PathResult:
    """The baseline: numerical IK at each step, seeded by the previous step's solution.

    Args:
        robot: the robot.
        targets: ``(S, 3)`` positions.
        start: ``(D,)`` or ``(P, D)`` seed of the first step (one path per row).
        link: the end link (default: :func:`torchik.ik.solve.default_link`).
        tol_position: LM stops within this distance (m).
        max_iters: LM iterations per step.

    Returns:
        A :class:`PathResult` with ``q (P, S, D)`` and the solver's ``success (P, S)`` of
        every step (within ``tol_position``).

    Raises:
        ValueError: ``targets`` not ``(S, 3)`` with ``S >= 1``, ``start`` not ``(D,)`` or
            ``(P, D)``, an unknown link, bad solver settings.
        TypeError: arguments of the wrong kind.
    """
    from torchik.ik.solve import default_link

    link = default_link(robot) if link is None else link
    check_tensor("targets", targets, (3,))
    check_tensor("start", start, (robot.dof,))
    if targets.dim() != 2 or not len(targets) or start.dim() > 2:
        raise ValueError(f"targets must be (S, 3) with S >= 1 and start (D,) or (P, D), got "
                         f"{tuple(targets.shape)} and {tuple(start.shape)}")  # fmt: skip
    q = start.to(robot.dtype).reshape(-1, robot.dof)
    targets = targets.to(robot.dtype)
    path, success = [], []
    for target in targets:
        result = solve_ik(
            robot, target.expand(q.shape[0], 3), link, position_only=True, seeds=q[:, None],
            restarts=False, tol_position=tol_position, max_iters=max_iters,
        )  # fmt: skip
        q = result.q[:, 0]
        path.append(q)
        success.append(result.success[:, 0])
    q, done = torch.stack(path, dim=1), torch.stack(success, dim=1)
    return PathResult.measure(robot, link, targets, q, tol_position=tol_position, success=done)
