"""Floating-base FK and Jacobians of torchik against Pinocchio's FreeFlyer (issue 17).

Used by ``tests/test_floating.py`` (skipped without ``pin``) and run as a script to write the
reference numbers of ``tests/data/urdf_lenient/floating.urdf`` that the tests read without pin:

    .venv/bin/python tests/pinocchio_floating.py
    .venv/bin/python tests/pinocchio_floating.py --sweep DIR   # every *.urdf under DIR

The sweep over example-robot-data 4.x (``DIR`` = ``.../cmeel.prefix/share/example-robot-data/
robots``, 69 files) on 2026-11-23: 59 files without mimic joints agree with ``floating_base=True``
to 2.1e-15 (FK) and 2.0e-15 (Jacobians), 2 random configurations each; 8 files with mimic
joints differ because Pinocchio's reader makes mimic joints independent; 2 do not load
(a ``<robot>`` without a name, which Pinocchio refuses too; a mimic of a missing joint).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from tests.paths import DATA
from torchik import Robot

FIXTURE = DATA / "urdf_lenient"


def pin_q(q: torch.Tensor) -> np.ndarray:
    """torchik's ``(x, y, z, qw, qx, qy, qz, joints)`` as Pinocchio's ``(..., qx, qy, qz, qw)``."""
    q = q.detach().numpy()
    return np.concatenate((q[:3], q[4:7], q[3:4], q[7:]))


def pin_reference(path: Path, q: torch.Tensor, free_flyer: bool) -> dict[str, list]:
    """Pinocchio's world poses and LOCAL_WORLD_ALIGNED Jacobians of every body frame.

    ``q (B, nq)`` in torchik's order and joint order (Pinocchio's model is reordered to it).
    Mimic joints are not compared (Pinocchio's URDF reader makes them independent joints).
    """
    import pinocchio as pin

    model = (
        pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
        if free_flyer
        else pin.buildModelFromUrdf(str(path))
    )
    data = model.createData()
    robot = Robot.from_urdf(path, dtype=torch.float64, floating_base=free_flyer)
    names = robot.joint_names[7:]
    ids = [model.getJointId(n) for n in names]
    idx_v = [model.idx_vs[i] for i in ids]
    out: dict[str, list] = {"poses": [], "jacobians": [], "links": list(robot.link_names)}
    for row in q:
        full = pin.neutral(model)
        base = pin_q(row[:7])
        full[:7] = base
        for i, value in zip(ids, row[7:].tolist(), strict=True):
            at = model.idx_qs[i]  # a continuous joint is (cos, sin) in Pinocchio
            full[at : at + model.nqs[i]] = [np.cos(value), np.sin(value)][: model.nqs[i]]
            if model.nqs[i] == 1:
                full[at] = value
        pin.computeJointJacobians(model, data, full)
        pin.updateFramePlacements(model, data)
        poses, jacs = [], []
        for link in robot.link_names:
            fid = model.getFrameId(link, pin.BODY)
            poses.append(data.oMf[fid].homogeneous.tolist())
            jac = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            jacs.append(jac[:, list(range(6)) + idx_v].tolist())
        out["poses"].append(poses)
        out["jacobians"].append(jacs)
    return out


def compare(path: Path, free_flyer: bool, n: int = 5, seed: int = 0) -> tuple[float, float]:
    """Max absolute FK and Jacobian differences over every link of ``n`` random configurations."""
    robot = Robot.from_urdf(path, dtype=torch.float64, floating_base=free_flyer)
    robot = robot.with_limits({f"{robot.joint_names[0][:-2]}/{c}": (-2, 2) for c in "xyz"})
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))
    ref = pin_reference(path, q, free_flyer)
    fk = robot.forward_kinematics(q)
    jac = torch.stack([robot.jacobian(q, link) for link in robot.link_names], dim=1)
    fk_err = (fk - torch.tensor(ref["poses"], dtype=torch.float64)).abs().max()
    jac_err = (jac - torch.tensor(ref["jacobians"], dtype=torch.float64)).abs().max()
    return float(fk_err), float(jac_err)


def sweep(folder: Path) -> None:
    """Print the worst differences over every ``*.urdf`` under ``folder``, and the exceptions."""
    import warnings

    warnings.simplefilter("ignore")
    for path in sorted(folder.rglob("*.urdf")):
        try:
            print(path.relative_to(folder), *compare(path, True, n=2), flush=True)
        except Exception as err:  # report and go on: this is a survey
            print(path.relative_to(folder), type(err).__name__, str(err)[-100:], flush=True)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--sweep":
        return sweep(Path(sys.argv[2]))
    robot = Robot.from_urdf(FIXTURE / "floating.urdf", dtype=torch.float64)
    robot = robot.with_limits({f"free/{c}": (-2, 2) for c in "xyz"})
    q = robot.random_configuration(4, generator=torch.Generator().manual_seed(17))
    ref = pin_reference(FIXTURE / "floating.urdf", q, free_flyer=False)
    ref["q"] = q.tolist()
    ref["made_by"] = "tests/pinocchio_floating.py (pin " + __import__("pinocchio").__version__ + ")"
    (FIXTURE / "floating_reference.json").write_text(json.dumps(ref) + "\n")


if __name__ == "__main__":
    main()
