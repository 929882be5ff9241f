"""Out-of-range values for the public API beyond ``solve_ik`` (``tests/fuzz/solve_ik.py``).

Each call takes one public function or method and replaces one or two of its arguments with
values from pools of bad and edge values (negative, zero, NaN, infinite, huge, 1e300, wrong
types, a seed where a generator belongs, tensors of wrong shapes, dtypes or on the meta
device) on top of a valid call: ``random_configuration``, ``with_limits``, ``difference``,
``integrate``, ``forward_kinematics``, ``link_positions``, ``jacobian``, ``chain``,
``make_dataset``, a model's ``sample`` and ``log_prob``, ``TrainConfig``, ``TuneConfig``,
``load_robot``, an IK result's ``top``, ``nearest`` and ``distinct``, ``seeds_near``,
``away_from_limits``, a learned model's ``solve_with_model``, ``solutions_with_model`` and
``evaluate_model``, ``make_smooth_targets``, ``rejection_sample``, ``one_joint_posterior``,
``planar_arm_urdf``, the metrics and path metrics of :mod:`torchik.learn`
(:func:`_metric_calls`), and targets, data sets, streams, a robot's family and calibration,
``collect_solutions`` (:func:`_data_calls`); the first call of each is its valid call as it
is. Passing: a
result, or a one-line ValueError or TypeError, in under a second. Anything else (torch's
RuntimeError, an AttributeError, a multi-line message) is a finding.

``tests/fuzz/test_api.py`` runs a bounded sample in CI; ``make fuzz`` runs
``python -m tests.fuzz.api --n 5000`` and prints the table for ``benchmarks/results/fuzz.md``.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

SLOW_S = 1.0
NUMBERS = [-5, -1, 0, 1, 2, 10**9, 2**63, 1.5, -1e-3, 0.0, 1e300, math.nan, math.inf, -math.inf]
KINDS = ["3", None, True, [1], (1.0, 2.0, 3.0), torch.tensor(1.0), 5]


@cache
def _robot():
    import torchik

    return torchik.load_robot("panda")


@cache
def _model():
    from torchik.learn import make_dataset
    from torchik.models.mdn import MDN

    data = make_dataset(_robot(), 64, seed=0)
    torch.manual_seed(0)
    model = MDN(data.spec, MDN.tiny_config())
    model.set_normalization(data.q, data.target)
    return model.eval(), data


@cache
def _result():
    import torchik

    robot = _robot()
    targets = robot.forward_kinematics(robot.random_configuration(2), "panda_hand")
    return torchik.solve_ik(robot, targets, "panda_hand", num_seeds=3, early_stop=False)


def _tensors(rng: random.Random, size: int) -> list:
    shapes = [(size,), (2, size), (size - 1,), (2, size + 1), (0, size), (3, 2, size), ()]
    values: list[Any] = [torch.zeros(s) for s in shapes]
    values += [torch.full((2, size), math.nan), torch.zeros(2, size, dtype=torch.long)]
    values += [torch.zeros(2, size, dtype=torch.float64), torch.zeros(2, size, device="meta")]
    return values + [[0.0] * size, "q", None]


def _calls(rng: random.Random) -> dict[str, tuple[Callable, dict, dict]]:
    """name: (function, valid keyword arguments, pools of bad ones)."""
    from torchik.description import planar_arm_urdf
    from torchik.ik.wholebody import away_from_limits, seeds_near
    from torchik.learn import (
        evaluate_model,
        make_dataset,
        make_smooth_targets,
        one_joint_posterior,
        rejection_sample,
    )
    from torchik.models import solutions_with_model, solve_with_model
    from torchik.robot.robot import load_robot
    from torchik.train import TrainConfig
    from torchik.tune.study import TuneConfig

    robot, (model, data), result = _robot(), _model(), _result()
    q, bounds = robot.random_configuration(2), [(a, b) for a in NUMBERS for b in NUMBERS]
    links = ["nope", 3, "", ["x"], None, torch.zeros(2, 7)]
    return {
        "random_configuration": (robot.random_configuration, {"n": 2, "generator": None},
                                 {"n": NUMBERS + KINDS, "generator": NUMBERS + KINDS}),
        "with_limits": (lambda limits: robot.with_limits(limits),
                        {"limits": {"panda_joint1": (-1.0, 1.0)}},
                        {"limits": [{"panda_joint1": b} for b in rng.sample(bounds, 20) + KINDS]
                         + [{"nope": (0, 1)}, {"panda_joint1/qw": (0, 1)}, 5, None]}),
        "difference": (robot.difference, {"q0": q, "q1": q},
                       {"q0": _tensors(rng, 7), "q1": _tensors(rng, 7)}),
        "integrate": (robot.integrate, {"q": q, "v": q},
                      {"q": _tensors(rng, 7), "v": _tensors(rng, 7)}),
        "forward_kinematics": (robot.forward_kinematics, {"q": q, "link": "panda_hand"},
                               {"q": _tensors(rng, 7), "link": ["nope", 3, "", ["x"], [], None,
                                                                ("panda_hand", "nope")]}),
        "link_positions": (robot.link_positions, {"q": q, "link": "panda_hand"},
                           {"q": _tensors(rng, 7), "link": ["nope", 3, None, []]}),
        "jacobian": (robot.jacobian, {"q": q, "link": "panda_hand"},
                     {"q": _tensors(rng, 7), "link": links}),
        "chain": (robot.chain, {"base": "panda_link2", "link": "panda_hand"},
                  {"base": links + ["panda_hand", "panda_link0", "panda_link1", "panda_link3"],
                   "link": links + ["panda_link0", "panda_link5", "panda_link7", "panda_hand"]}),
        "IKResult.top": (result.top, {"k": 2}, {"k": NUMBERS + KINDS}),
        "IKResult.nearest": (result.nearest, {"q": q}, {"q": _tensors(rng, 7) + KINDS}),
        "IKResult.distinct": (result.distinct, {"min_distance": 0.1},
                              {"min_distance": NUMBERS + KINDS}),
        "seeds_near": (lambda **kw: seeds_near(robot, **kw), {"q": q[0], "n": 2},
                       {"q": _tensors(rng, 7), "n": NUMBERS + KINDS,
                        "scale": NUMBERS + KINDS, "generator": NUMBERS + KINDS}),
        "away_from_limits": (lambda **kw: away_from_limits(robot, **kw), {"q": q},
                             {"q": _tensors(rng, 7) + KINDS, "margin": NUMBERS + KINDS}),
        **_metric_calls(rng, robot, q),
        **_data_calls(rng, robot, data),
        "make_dataset": (lambda **kw: make_dataset(robot, **kw), {"n": 4},
                         {"n": NUMBERS + KINDS, "sampler": ["normal", "nope", 3],
                          "std": NUMBERS + KINDS + [[0.1] * 3], "targets": ["pose", "x", None],
                          "seed": NUMBERS + KINDS, "link": ["nope", 3]}),
        "model.sample": (model.sample, {"target": data.target[:2], "n": 2},
                         {"target": _tensors(rng, 3), "n": NUMBERS + KINDS,
                          "generator": NUMBERS + KINDS}),
        "model.log_prob": (model.log_prob, {"q": data.q[:2], "target": data.target[:2]},
                           {"q": _tensors(rng, 7), "target": _tensors(rng, 3)}),
        "TrainConfig": (TrainConfig, {},
                        {k: NUMBERS + KINDS for k in ("steps", "batch_size", "lr", "seed",
                                                      "weight_decay", "grad_clip", "ema_decay",
                                                      "warmup_steps", "micro_batches")}),
        "TuneConfig": (TuneConfig, {"family": "mlp"},
                       {k: NUMBERS + KINDS for k in ("trials", "steps", "seed", "threads",
                                                     "train_size", "family", "robot")}),
        "load_robot": (load_robot, {"name": "snake2"},
                       {"name": ["nope", 3, None, "planar", "snake4"],
                        "dtype": [torch.long, "f", 3, torch.float64]}),
        "solve_with_model": (lambda **kw: solve_with_model(robot, model, **kw),
                             {"target": data.target[0], "n": 2, "position_only": True},
                             {"target": _tensors(rng, 3) + KINDS + [torch.eye(4), data.target[1],
                                                                data.target[2:4].double()],
                              "n": NUMBERS + KINDS,
                              "generator": NUMBERS + KINDS + [None, torch.Generator()],
                              "position_only": [False, 1, "yes", None, True],
                              "link": links + ["panda_hand", None],
                              "sample_options": [{"nope": 1}, [1], "x", 3, {}, None]}),
        "solutions_with_model": (lambda **kw: solutions_with_model(robot, model, **kw),
                                 {"target": data.target[0], "count": 2, "position_only": True},
                                 {"target": _tensors(rng, 3) + KINDS
                                  + [data.target[1], data.target[2], data.target[3].double()],
                                  "count": [-5, 0, 1.5, math.nan, math.inf, 10**9, 2**63]
                                  + KINDS + [1, 2, 3, 5],
                                  "margin": NUMBERS + KINDS,
                                  "rounds": [-1, 0, 1.5, math.inf, 10**9] + KINDS + [1, 2, 3, 4],
                                  "generator": KINDS + [-1, 1.5, torch.Generator()]}),
        "evaluate_model": (lambda **kw: evaluate_model(model, robot=robot, **kw),
                           {"targets": data.target[:2], "n": 2},
                           {"targets": _tensors(rng, 3) + KINDS + [data.target[2:5]],
                            "n": NUMBERS + KINDS, "seed": NUMBERS + KINDS,
                            "sample_options": [{"nope": 1}, [1], "x", 3, {}, None]}),
        "make_smooth_targets": (lambda **kw: make_smooth_targets(robot, **kw), {"steps": 3},
                                {k: NUMBERS + KINDS for k in ("steps", "n_paths", "max_move",
                                                              "margin")}
                                | {"link": ["nope", 3, "panda_link3", ["x"], None],
                                   "generator": NUMBERS + KINDS + [None, torch.Generator()]}),
        "rejection_sample": (lambda **kw: rejection_sample(
                                 lambda x: robot.link_positions(x, "panda_hand"), **kw),
                             {"prior_std": [0.3] * 7, "n_accept": 2, "radius": 0.1,
                              "targets": robot.link_positions(torch.zeros(1, 7), "panda_hand"),
                              "max_draws": 20000, "chunk": 4096},
                             {"targets": _tensors(rng, 3) + KINDS
                              + [robot.link_positions(torch.full((2, 7), 0.1), "panda_hand")],
                              "n_accept": NUMBERS + KINDS + [3, 4],
                              "radius": NUMBERS + KINDS + [torch.zeros(3), torch.ones(1, 1), 0.2],
                              "chunk": NUMBERS + KINDS + [1024, 8192],
                              "generator": NUMBERS + KINDS + [None, torch.Generator()],
                              "max_draws": [-5, -1, 0, 1, 1.5, math.nan, math.inf] + KINDS
                              + [5000, 10000],
                              "prior_std": [[x] * 7 for x in NUMBERS] + [[0.3] * 3, [], 0.3]
                              + KINDS + [torch.zeros(7, device="meta"), [0.2] * 7, [0.4] * 7],
                              "prior_mean": [[x] * 7 for x in NUMBERS] + [[0.0] * 3, None]
                              + KINDS,
                              "num_threads": NUMBERS + KINDS}),
        "one_joint_posterior": (one_joint_posterior,
                                {"target": [0.8, 0.5], "prior_std": 0.5, "radius": 0.1},
                                {"target": [[x, 0.5] for x in (math.nan, math.inf, 1e300, 2**63)]
                                 + [[1.0, 2.0, 3.0], "ab", torch.zeros(2, device="meta")] + KINDS
                                 + [[0.9, 0.3], [0.0, -1.05], [-0.7, 0.6], (1.0, 0.2),
                                    torch.tensor([0.8, 0.5]), [0.8, -0.5]],
                                 "prior_std": NUMBERS + KINDS + [0.2, 0.3, 0.4, 0.6],
                                 "radius": [-1, 0, -1e-3, math.nan, math.inf, 1e300, 1, 10**9]
                                 + KINDS + [0.05, 0.1, 0.15, 0.2],
                                 "length": [-1, 0, math.nan, math.inf, -math.inf, 1e300, 10**9]
                                 + KINDS + [0.9, 1.0, 1.1]}),
        "planar_arm_urdf": (planar_arm_urdf, {"link_lengths": [1.0, 0.5]},
                            {"link_lengths": [[x] for x in NUMBERS] + KINDS + [[], [10**400]],
                             "lower": NUMBERS + KINDS, "upper": NUMBERS + KINDS,
                             "name": [None, 3, "", "a<b>", b"x", ["x"]],
                             "limits": [None, 1, "no", False, True]}),
    }  # fmt: skip


def _metric_calls(rng: random.Random, robot: Any, q: torch.Tensor) -> dict:
    """The metrics of :mod:`torchik.learn` (errors, limits, diversity, MMD, paths)."""
    from torchik.learn import metrics as m
    from torchik.learn import paths

    pose, paths_q = robot.forward_kinematics(q, "panda_hand"), q.view(1, 2, 7)
    samples, mask = torch.stack((q, q.flip(0))), robot.continuous
    masks = [
        mask,
        mask.float(),
        mask[:3],
        mask[None],
        None,
        [False] * 7,
        torch.zeros(7, device="meta"),
    ]
    links = ["panda_hand", "nope", None, 3]
    return {
        "position_error": (lambda **kw: m.position_error(robot, **kw),
                           {"q": q, "target_pos": pose[:, :3, 3], "link": "panda_hand"},
                           {"q": _tensors(rng, 7), "target_pos": _tensors(rng, 3), "link": links}),
        "rotation_error": (lambda **kw: m.rotation_error(robot, **kw),
                           {"q": q, "target_rot": pose[:, :3, :3], "link": "panda_hand"},
                           {"q": _tensors(rng, 7), "target_rot": [pose[:1, :3, :3], pose[:, :3]]
                            + _tensors(rng, 3), "link": links}),
        "accuracy": (m.accuracy, {"errors": q[0], "threshold": 0.5},
                     {"errors": _tensors(rng, 3), "threshold": NUMBERS + KINDS}),
        "limit_violations": (m.limit_violations,
                             {"q": q, "lower": robot.lower, "upper": robot.upper},
                             {"q": _tensors(rng, 7), "lower": _tensors(rng, 7),
                              "tol": NUMBERS + KINDS}),
        "mean_pairwise_distance": (m.mean_pairwise_distance, {"samples": samples},
                                   {"samples": _tensors(rng, 7), "continuous": masks}),
        "best_of_n": (m.best_of_n, {"errors": q},
                      {"errors": _tensors(rng, 7), "n": NUMBERS + KINDS}),
        "mmd": (m.mmd, {"x": samples, "y": samples},
                {"x": _tensors(rng, 7), "y": _tensors(rng, 7),
                 "bandwidths": [(0.1,), (), (-1.0,), (math.nan,), "a", 3, [0.2, 0.9]]}),
        "resimulation_error": (lambda **kw: m.resimulation_error(lambda x: x[..., :3], **kw),
                               {"samples": samples, "targets": q[:2, :3]},
                               {"samples": _tensors(rng, 7), "targets": _tensors(rng, 3)}),
        "convex_hull_area": (m.convex_hull_area, {"points": q[:, :2]},
                             {"points": _tensors(rng, 2), "percentile": NUMBERS + KINDS}),
        "joint_jumps": (paths.joint_jumps, {"q": paths_q, "continuous": mask},
                        {"q": _tensors(rng, 7), "continuous": masks}),
        "path_distance": (paths.path_distance, {"a": paths_q, "b": paths_q, "continuous": mask},
                          {"a": _tensors(rng, 7), "b": _tensors(rng, 7), "continuous": masks}),
        "count_distinct_paths": (paths.count_distinct_paths, {"q": paths_q, "continuous": mask},
                                 {"q": _tensors(rng, 7) + [samples], "continuous": masks,
                                  "tol": NUMBERS + KINDS}),
        "sequential_ik_path": (lambda **kw: paths.sequential_ik_path(robot, **kw, max_iters=5),
                               {"targets": pose[:2, :3, 3], "start": q[0]},
                               {"targets": _tensors(rng, 3), "start": _tensors(rng, 7),
                                "link": links, "tol_position": NUMBERS + KINDS}),
    }  # fmt: skip


def _data_calls(rng: random.Random, robot: Any, data: Any) -> dict:
    """Targets, data sets, streams, a robot's family and its calibration."""
    from torchik import learn, train
    from torchik.ik import collect_solutions

    pose = robot.forward_kinematics(data.q[:2], "panda_hand")
    kinds = ["position", "pose", "planar", "euler", 3, None]
    planar = learn.make_dataset(train.perturbed_robot(_planar(), 0.0), 4)
    arm, joints = _planar(), len(_planar().model.joints)
    return {
        "encode_target": (learn.encode_target, {"pose": pose, "kind": "pose"},
                          {"pose": [pose[:, :3]] + _tensors(rng, 4), "kind": kinds}),
        "decode_target": (learn.decode_target, {"target": data.target, "kind": "position"},
                          {"target": _tensors(rng, 9) + _tensors(rng, 3), "kind": kinds}),
        "as_target": (learn.as_target, {"target": pose, "kind": "position"},
                      {"target": _tensors(rng, 3) + [pose[:, :3]], "kind": kinds}),
        "IKDataset": (learn.IKDataset, {"q": data.q, "target": data.target, "spec": data.spec},
                      {"q": _tensors(rng, 7), "target": _tensors(rng, 3),
                       "spec": [None, "panda", planar.spec], "meta": [None, [1], {"a": 1}]}),
        "FKStream.draw": (lambda n, seed: learn.FKStream(robot, seed=seed).draw(n, seed),
                          {"n": 2, "seed": 0}, {"n": NUMBERS + KINDS, "seed": NUMBERS + KINDS}),
        "robot_hash": (learn.robot_hash, {"robot": robot}, {"robot": KINDS + [data, robot]}),
        "perturbed_robot": (lambda **kw: train.perturbed_robot(arm, **kw), {"scale": 0.1},
                            {"scale": NUMBERS + KINDS, "generator": NUMBERS + KINDS}),
        "with_origins": (lambda **kw: train.with_origins(arm, **kw),
                         {"xyz": arm.origin_xyz}, {"xyz": _tensors(rng, 3)
                                                   + [torch.zeros(joints, 3)],
                                                   "rpy": _tensors(rng, 3)}),
        "family_dataset": (lambda **kw: train.family_dataset(arm, **kw), {"n": 4, "per_arm": 2},
                           {"n": NUMBERS + KINDS, "per_arm": NUMBERS + KINDS,
                            "scale": NUMBERS + KINDS, "seed": NUMBERS + KINDS}),
        "calibrate": (lambda **kw: train.calibrate(arm, **kw),
                      {"q": planar.q, "measured": arm.link_positions(planar.q.double(), "ee"),
                       "link": "ee", "steps": 2},
                      {"q": _tensors(rng, 2), "measured": _tensors(rng, 3),
                       "link": ["nope", None, 3], "steps": NUMBERS + KINDS,
                       "lr": NUMBERS + KINDS}),
        "collect_solutions": (lambda **kw: collect_solutions(_Solved, **kw), {"count": 2},
                              {"count": NUMBERS + KINDS, "margin": NUMBERS + KINDS,
                               "rounds": NUMBERS + KINDS}),
    }  # fmt: skip


@cache
def _planar():
    import torchik

    return torchik.load_robot("planar", link_lengths=[0.5, 0.3], dtype=torch.float64)


class _Solved:
    """A refinement of ``n`` seeds that solves each: what ``collect_solutions`` reads."""

    def __init__(self, n: int, round_: int):
        self.q, self.success = torch.zeros(n, 2), torch.ones(n, dtype=torch.bool)


def arguments(seed: int) -> tuple[str, Callable, dict]:
    """The ``seed``-th call: ``(name, function, keyword arguments)``. The first call of each
    function (``seed < len(calls)``) is its valid call as it is: every sample of a call per
    function or more holds a result of each, whatever the pools."""
    rng = random.Random(seed)
    calls = _calls(rng)
    name = sorted(calls)[seed % len(calls)]
    function, kwargs, pools = calls[name]
    if seed < len(calls):
        return name, function, dict(kwargs)
    keys = rng.sample(sorted(pools), min(len(pools), rng.randint(1, 2)))
    return name, function, {**kwargs, **{k: rng.choice(pools[k]) for k in keys}}


def run_one(seed: int) -> tuple[str, str, float, str]:
    """``(call, result, seconds, message)`` of the ``seed``-th call."""
    name, function, kwargs = arguments(seed)
    start = time.perf_counter()
    try:
        function(**kwargs)
        result, message = "returned", ""
    except (ValueError, TypeError) as err:
        result, message = "refused", str(err)
        if "\n" in message.strip():
            result = "refused (multi-line message)"
    except Exception as err:  # noqa: BLE001 - a leak is what the fuzz looks for
        result, message = f"LEAK {type(err).__name__}", str(err)[:200]
    shown = {k: v if not isinstance(v, torch.Tensor) else f"tensor{tuple(v.shape)}"
             for k, v in kwargs.items()}  # fmt: skip
    return name, result, time.perf_counter() - start, f"{shown!r:.160} -> {message[:160]}"


def finding(result: str, seconds: float) -> bool:
    """A leak, a multi-line message, or a refusal slower than :data:`SLOW_S`."""
    return result not in ("returned", "refused") or (result == "refused" and seconds > SLOW_S)


def table(rows) -> str:
    """A markdown table: per function, calls, results counted, slowest refusal, findings."""
    out = ["| call | calls | results | slowest refusal | findings |", "|---|---|---|---|---|"]
    for name in sorted({r[1] for r in rows}):
        mine = [r for r in rows if r[1] == name]
        counts = Counter(r[2] for r in mine)
        slowest = max((r[3] for r in mine if r[2] == "refused"), default=0.0)
        text = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        bad = sum(finding(r[2], r[3]) for r in mine)
        out.append(f"| `{name}` | {len(mine)} | {text} | {slowest * 1000:.0f} ms | {bad} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="calls")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = [(seed, *run_one(seed)) for seed in range(args.start, args.start + args.n)]
    print(table(rows))
    bad = [r for r in rows if finding(r[2], r[3])]
    for seed, name, result, seconds, message in bad[:40]:
        print(f"- seed {seed} {name}: {result} ({seconds:.2f} s) {message}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
