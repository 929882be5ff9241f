"""Floating-base FK and Jacobians of torchik against Pinocchio's FreeFlyer (issue 17).

Used by ``tests/test_floating.py`` (skipped without ``pin``) and run as a script to write the
reference numbers of ``tests/data/urdf_lenient/floating.urdf`` that the tests read without pin:

    .venv/bin/python tests/pinocchio_floating.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from torchik import Robot

FIXTURE = Path(__file__).resolve().parent / "data" / "urdf_lenient"


def pin_q(q: torch.Tensor) -> np.ndarray:
    """torchik's ``(x, y, z, qw, qx, qy, qz, joints)`` as Pinocchio's ``(..., qx, qy, qz, qw)``."""
    q = q.detach().numpy()
    return np.concatenate((q[:3], q[4:7], q[3:4], q[7:]))


def pin_reference(path: Path, q: torch.Tensor, free_flyer: bool) -> dict[str, list]:
    """Pinocchio's world poses and LOCAL_WORLD_ALIGNED Jacobians of every body frame.

    ``q (B, nq)`` in torchik's order and joint order (Pinocchio's model is reordered to it).
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
    idx_q = [model.idx_qs[model.getJointId(n)] for n in names]
    idx_v = [model.idx_vs[model.getJointId(n)] for n in names]
    out: dict[str, list] = {"poses": [], "jacobians": [], "links": list(robot.link_names)}
    for row in q:
        full = pin.neutral(model)
        base = pin_q(row[:7])
        full[:7] = base
        full[idx_q] = row[7:].numpy()
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


def main() -> None:
    robot = Robot.from_urdf(FIXTURE / "floating.urdf", dtype=torch.float64)
    robot = robot.with_limits({f"free/{c}": (-2, 2) for c in "xyz"})
    q = robot.random_configuration(4, generator=torch.Generator().manual_seed(17))
    ref = pin_reference(FIXTURE / "floating.urdf", q, free_flyer=False)
    ref["q"] = q.tolist()
    ref["made_by"] = "tests/pinocchio_floating.py (pin " + __import__("pinocchio").__version__ + ")"
    (FIXTURE / "floating_reference.json").write_text(json.dumps(ref) + "\n")


if __name__ == "__main__":
    main()
