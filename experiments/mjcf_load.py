"""Every MJCF file of a corpus against MuJoCo's own forward kinematics (issue 35).

What ``benchmarks/mjcf_load.py`` runs. For each file MuJoCo compiles, torchik loads it with
``Robot.from_mjcf(path, dtype=torch.float64, free_joint=option)`` for each option (the default
``"floating"`` and ``"fixed"``), and the file is

- ``exact``: at ``qpos0`` and :data:`N_RANDOM` random configurations, every body's and every
  site's world pose, and the Jacobians of up to :data:`JACOBIAN_BODIES` deepest bodies and every
  free body, agree with ``mj_kinematics`` to :data:`TOLERANCE`;
- ``wrong``: it loads, but some error reaches :data:`TOLERANCE` (or a body has no link);
- ``refused``: torchik raised its own one-line error (``MJCFError``, a ``URDFError``);
- ``crash``: any other exception, or a refusal of more than one line;
- ``timeout``: no answer within the limit (each file runs in a worker process).

Files MuJoCo itself cannot compile are skipped (``mujoco_error``). A myosuite model whose
includes need myosuite's own resolver (``resolve_model_xml_path``, which writes a resolved
copy beside the file) is checked through that copy.

Conventions: ``qpos = qpos0`` with ``qpos[qpos_index(model, robot.joint_names)] = q`` and each
mimic joint (a MuJoCo joint equality) at ``multiplier * q[leader] + offset``; coordinates of
infinite range (a floating base's position) are drawn from U[-1, 1]. Bodies are matched by
:func:`torchik.description.mjcf_names`; a site whose name is also a body's (torchik renames it)
is not compared. A floating base's twist is (v, w) in the base frame, a MuJoCo free joint's
(v in the world, w in the body): ``J_torchik = J_mujoco @ blockdiag(R_base, I)``.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "demo").mkdir(), (folder / "demo" / "arm.xml").write_text(
    ...     '<mujoco><worldbody><body name="a"><joint name="j" range="-1 1"/>'
    ...     '<geom size="0.1"/></body></worldbody></mujoco>')
    >>> [entry["package"] for entry in corpus_from(folder)]
    ['demo']
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from experiments.table import Column, Table, Tables

__all__ = [
    "DISTRIBUTIONS",
    "FREE_JOINT_OPTIONS",
    "INSTALLED_PACKAGES",
    "JACOBIAN_BODIES",
    "N_RANDOM",
    "SCENE_IK_TARGETS",
    "STATUSES",
    "TOLERANCE",
    "check_file",
    "corpus_from",
    "corpus_intro",
    "installed_corpus",
    "mjcf_corpus",
    "mjcf_tables",
    "run_corpus",
    "serve",
]

TOLERANCE = 1e-9
N_RANDOM = 3
JACOBIAN_BODIES = 6
FREE_JOINT_OPTIONS = ("floating", "fixed")
SCENE_IK_TARGETS = 3
"""Positions per body of a scene that whole-body IK places (:func:`_scene_ik`)."""
STATUSES = ("exact", "wrong", "refused", "crash", "timeout")
INSTALLED_PACKAGES = {  # import folder in site-packages -> the PyPI distribution it comes with
    "dm_control": "dm_control",
    "gymnasium": "gymnasium",
    "gymnasium_robotics": "gymnasium-robotics",
    "metaworld": "metaworld",
    "myosuite": "myosuite",
    "myo_sim": "myosuite",
    "mjlab": "mjlab",
    "robosuite_models": "robosuite-models",
    "pybullet_data": "pybullet",
    "mujoco": "mujoco (extra)",
    "mujoco_warp": "mujoco-warp (extra)",
}
"""The packages of the issue (and two that come with them, marked extra)."""
DISTRIBUTIONS = (
    "mujoco", "mujoco-warp", "dm_control", "gymnasium", "gymnasium-robotics", "metaworld",
    "myosuite", "mjlab", "robosuite-models", "pybullet",
)  # fmt: skip
"""Their PyPI distributions, whose versions a report records."""


# --------------------------------------------------------------------------- the corpus


def _root_tag(path: Path) -> str | None:
    try:
        for _, element in ET.iterparse(path, events=("start",)):
            return element.tag
    except (ET.ParseError, UnicodeDecodeError, OSError):
        return None
    return None


def _mjcf_files(folder: Path) -> Iterable[Path]:
    """Regular ``.xml``/``.mjcf`` files under ``folder`` whose root element is ``<mujoco>``
    (hidden files, such as myosuite's resolved copies, left out)."""
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() in (".xml", ".mjcf") and not path.name.startswith("."):
            if path.is_file() and _root_tag(path) == "mujoco":
                yield path


def _distinct(found: Iterable[tuple[str, Path, Path]]) -> list[dict[str, Any]]:
    """``{package, path, relpath}`` per distinct content (SHA-256), by package and path."""
    seen: set[str] = set()
    out = []
    for package, path, base in found:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            out.append(
                {"package": package, "path": str(path), "relpath": str(path.relative_to(base))}
            )
    return sorted(out, key=lambda e: (e["package"], e["relpath"]))


def corpus_from(source: str | os.PathLike) -> list[dict[str, Any]]:
    """The corpus in a folder (each first-level folder a package, deduplicated by content) or
    a JSON list of ``{"package", "path"}`` records (``relpath`` optional).

    Raises:
        FileNotFoundError: If ``source`` does not exist.
    """
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"no corpus at {source}")
    if source.is_file():
        entries = json.loads(source.read_text())
        return [{"relpath": e["path"], **e} for e in entries]
    found = []
    for top in sorted(p for p in source.iterdir() if p.is_dir()):
        found += [(top.name, path, source) for path in _mjcf_files(top)]
    return _distinct(found)


def installed_corpus() -> list[dict[str, Any]]:
    """Every distinct MJCF file of :data:`INSTALLED_PACKAGES` installed beside this Python."""
    site = Path(sysconfig.get_paths()["purelib"])
    found = []
    for top, package in INSTALLED_PACKAGES.items():
        if (site / top).is_dir():
            found += [(package, path, site) for path in _mjcf_files(site / top)]
    return _distinct(found)


def mjcf_corpus(source: str | os.PathLike | None) -> tuple[list[dict[str, Any]], str | None]:
    """``(entries, None)``: the corpus of ``source`` (:func:`corpus_from`; None: the installed
    packages), or ``([], reason)`` with a one-line reason to skip (no ``mujoco``, no corpus)."""
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return [], "the mujoco package is not installed (pip install 'torchik[mjcf]')"
    if source is not None and not Path(source).exists():
        return [], f"no corpus at {source}"
    entries = corpus_from(source) if source is not None else installed_corpus()
    where = source or f"the installed packages ({', '.join(sorted(set(INSTALLED_PACKAGES)))})"
    return entries, None if entries else f"no MJCF file in {where}"


def corpus_intro(entries: list[dict[str, Any]], source: str | os.PathLike | None) -> list[str]:
    """The paragraph a report of :func:`run_corpus` starts with: what was checked, and how."""
    where = f"`{source}`" if source is not None else "the installed packages"
    return [
        f"{len(entries)} distinct MJCF files (root `<mujoco>`, deduplicated by content), from "
        f"{where}. Each file MuJoCo compiles is loaded with `Robot.from_mjcf(path, "
        "dtype=torch.float64, free_joint=...)`; `exact`: every body and site pose and the "
        f"Jacobians of the {JACOBIAN_BODIES} deepest bodies and every free body agree with "
        f"`mj_kinematics` to {TOLERANCE:g} at `qpos0` and {N_RANDOM} random configurations, "
        "and in a scene (free bodies beside a fixed tree) each body as a robot of its own "
        "(`Robot.scene_body`, what IK on a scene solves) has the scene's link poses "
        f"(`scene IK solved`: of {SCENE_IK_TARGETS} positions of each body's deepest link, "
        "FK of random configurations of the body, how many `solve_wholebody` on the scene "
        "solves, 2 random seeds each); "
        "`loads` = exact + wrong; `refused`: a one-line torchik error; `skipped`: MuJoCo cannot "
        "compile the file (a myosuite model that needs myosuite's include resolver is checked "
        "through its resolved copy). Protocol: `experiments/mjcf_load.py`. The packages come "
        f"from PyPI (`pip install {' '.join(DISTRIBUTIONS)}`; versions in the stamp)."
    ]


# --------------------------------------------------------------------------- one file


def _compile(path: str) -> tuple[Any, str, str | None]:
    """``(MjModel or None, the path checked, MuJoCo's message or None)``."""
    import mujoco

    try:
        return mujoco.MjModel.from_xml_path(path), path, None
    except Exception as err:  # noqa: BLE001 - a file MuJoCo refuses is skipped
        message = " ".join(str(err).split())[:300]
    if "/myosuite/" in path:
        try:
            from myosuite.utils.asset_path_resolver import resolve_model_xml_path

            resolved = str(resolve_model_xml_path(path))
            return mujoco.MjModel.from_xml_path(resolved), resolved, None
        except Exception:  # noqa: BLE001 - no resolver, or it did not help
            pass
    return None, path, message


def check_file(path: str, options: Iterable[str] = FREE_JOINT_OPTIONS) -> dict[str, Any]:
    """One file's record: ``status`` ``"mujoco_error"`` (with ``message``) or ``"checked"``,
    and per ``free_joint`` option a record ``{"status", "message" or the errors}``."""
    model, checked, message = _compile(path)
    if model is None:
        return {"path": path, "status": "mujoco_error", "message": message}
    record: dict[str, Any] = {"path": path, "status": "checked"}
    if checked != path:
        record["resolved"] = checked
    for option in options:
        record[option] = _check_option(model, checked, option)
    return record


def _check_option(model: Any, path: str, option: str) -> dict[str, Any]:
    import torch

    from torchik import Robot, URDFError

    try:
        robot = Robot.from_mjcf(path, dtype=torch.float64, free_joint=option)
    except URDFError as err:  # MJCFError is one
        one_line = "\n" not in str(err).strip()
        return {"status": "refused" if one_line else "crash", "message": str(err)[:400]}
    except Exception as err:  # noqa: BLE001 - what a crash is
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        return {"status": "crash", "message": f"{type(err).__name__}: {err}"[:400], "where": where}
    errors = {**_errors(model, robot), **_scene_bodies(robot, _configurations(model, robot))}
    worst = max(errors["position"], errors["rotation"], errors["jacobian"])
    bad = worst >= TOLERANCE or bool(errors["missing_bodies"])
    bad = bad or errors.get("body_error", 0.0) >= TOLERANCE
    return {"status": "wrong" if bad else "exact", "dof": robot.dof, **errors}


def _scene_bodies(robot: Any, q: Any) -> dict[str, Any]:
    """A scene's (free bodies beside a fixed tree) bodies, each as a robot of its own
    (:meth:`~torchik.robot.Robot.scene_body`, what IK on a scene solves): ``scene_bodies``, how
    many, ``body_error``, the largest difference of their links' poses from the scene's at the
    configurations ``q``, and ``scene_ik``, ``[solved, asked]`` of :func:`_scene_ik`; nothing
    for another robot."""
    import torch

    if not robot.scene:
        return {}
    worst, count, solved, asked = 0.0, 0, 0, 0
    for base in (None, *range(robot.floating_bases)):
        part, kept = robot.scene_body(base)
        links = list(part.link_names)
        with torch.no_grad():
            error = part.forward_kinematics(q[:, kept], links) - robot.forward_kinematics(q, links)
        worst, count = max(worst, float(error.abs().max())), count + 1
        if part.n_joints > 0:  # a body with joints of its own
            solved, asked = solved + _scene_ik(robot, part, kept), asked + SCENE_IK_TARGETS
    return {"scene_bodies": count, "body_error": worst, "scene_ik": [solved, asked]}


def _scene_ik(scene: Any, part: Any, kept: Any) -> int:
    """How many of :data:`SCENE_IK_TARGETS` positions of the body's deepest link (FK of random
    configurations of the body, the others where the file puts them) ``solve_wholebody`` on
    the whole scene solves (2 random seeds each, the defaults)."""
    import torch

    from torchik.ik import solve_wholebody

    generator = torch.Generator().manual_seed(0)
    q = scene.neutral().expand(SCENE_IK_TARGETS, -1).clone()
    q[:, kept] = part.random_configuration(SCENE_IK_TARGETS, generator)
    link = part.link_names[-1]
    targets = {link: scene.link_positions(q, link)}
    result = solve_wholebody(scene, targets, generator=generator)
    return int(result.success.any(-1).sum())


# --------------------------------------------------------------------------- the comparison


def _configurations(model: Any, robot: Any) -> Any:
    """``qpos0``'s q, then :data:`N_RANDOM` random ones (infinite ranges from U[-1, 1])."""
    import torch

    from torchik.description import qpos_index

    index = qpos_index(model, robot.joint_names)
    q0 = torch.as_tensor(model.qpos0[index], dtype=torch.float64).reshape(1, -1)
    generator = torch.Generator().manual_seed(0)
    q = robot.random_configuration(N_RANDOM, generator=generator)
    infinite = ~(torch.isfinite(robot.lower) & torch.isfinite(robot.upper))
    uniform = torch.rand(q.shape, generator=generator, dtype=q.dtype) * 2 - 1
    return torch.cat((q0, torch.where(infinite, uniform, q)))


def _qpos(model: Any, robot: Any, q: Any) -> Any:
    """MuJoCo's ``qpos`` of torchik's ``q``, mimic joints included."""
    from torchik.description import mjcf_names, qpos_index

    _, joints = mjcf_names(model)
    qpos = model.qpos0.copy()
    qpos[qpos_index(model, robot.joint_names)] = q.numpy()
    for joint in robot.model.joints:
        if joint.mimic is not None:
            leader = float(q[robot.joint_names.index(joint.mimic.joint)])
            address = model.jnt_qposadr[joints.index(joint.name)]
            qpos[address] = joint.mimic.multiplier * leader + joint.mimic.offset
    return qpos


def _velocity_map(model: Any, robot: Any, q: Any) -> Any:
    """``M`` with MuJoCo's ``qvel = M v`` for torchik's ``v``: ``(nv_mujoco, robot.nv)``."""
    import numpy as np

    from torchik.description import mjcf_names
    from torchik.geometry.rotations import quat_to_rotmat

    _, joints = mjcf_names(model)
    names, out, k = list(robot.joint_names), np.zeros((model.nv, robot.nv)), robot.floating_bases
    column = {name: 6 * k + c for c, name in enumerate(names[7 * k :])}  # bases: 7 q, 6 v each
    for name, c in column.items():
        out[model.jnt_dofadr[joints.index(name)], c] = 1.0
    for joint in robot.model.joints:
        if joint.mimic is not None:
            row = model.jnt_dofadr[joints.index(joint.name)]
            out[row, column[joint.mimic.joint]] += joint.mimic.multiplier
    for b in range(k):  # MuJoCo: v in the world, w in the body; torchik: both in the body
        a = model.jnt_dofadr[joints.index(names[7 * b].rsplit("/", 1)[0])]
        quat = q[7 * b + 3 : 7 * b + 7]
        out[a : a + 3, 6 * b : 6 * b + 3] = quat_to_rotmat(quat / quat.norm()).numpy()
        out[a + 3 : a + 6, 6 * b + 3 : 6 * b + 6] = np.eye(3)
    return out


def _frames(model: Any, robot: Any) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list]:
    """``(bodies, sites, missing)``: MuJoCo ids with their torchik links, and bodies with no link
    (the world of a floating robot is not one: its poses are in the world frame)."""
    from torchik.description import mjcf_names

    bodies, _ = mjcf_names(model)
    links = set(robot.link_names)
    matched = [(b, name) for b, name in enumerate(bodies) if name in links]
    missing = [name for b, name in enumerate(bodies) if name not in links and b]
    taken = set(bodies) | {link for link in robot.link_names if "/" in link}
    sites = []
    for s in range(model.nsite):
        name = model.site(s).name or f"site{s}"
        if name in links and name not in taken:
            sites.append((s, name))
    return matched, sites, missing


def _jacobian_bodies(model: Any, matched: list[tuple[int, str]]) -> list[tuple[int, str]]:
    depth = [0] * model.nbody
    for b in range(1, model.nbody):
        depth[b] = depth[int(model.body_parentid[b])] + 1
    deepest = sorted((m for m in matched if m[0]), key=lambda m: (-depth[m[0]], -m[0]))
    free = {int(model.jnt_bodyid[j]) for j in range(model.njnt) if model.jnt_type[j] == 0}
    chosen = deepest[:JACOBIAN_BODIES]
    return chosen + [m for m in matched if m[0] in free and m not in chosen]


def _errors(model: Any, robot: Any) -> dict[str, Any]:
    """The largest position, rotation-matrix and Jacobian differences from MuJoCo."""
    import mujoco
    import numpy as np
    import torch

    matched, sites, missing = _frames(model, robot)
    jacobian_bodies = _jacobian_bodies(model, matched)
    data = mujoco.MjData(model)
    worst = {"position": 0.0, "rotation": 0.0, "jacobian": 0.0}
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    for q in _configurations(model, robot):
        data.qpos[:] = _qpos(model, robot, q)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)  # mj_jacBody reads cdof, which mj_comPos fills in
        with torch.no_grad():
            poses = robot.forward_kinematics(q).numpy()
        index = {name: i for i, name in enumerate(robot.link_names)}
        for frames, xpos, xmat in (
            (matched, data.xpos, data.xmat),
            (sites, data.site_xpos, data.site_xmat),
        ):
            for i, link in frames:
                pose = poses[index[link]]
                worst["position"] = max(
                    worst["position"], float(np.abs(pose[:3, 3] - xpos[i]).max())
                )
                rotation = np.abs(pose[:3, :3] - xmat[i].reshape(3, 3)).max()
                worst["rotation"] = max(worst["rotation"], float(rotation))
        velocity = _velocity_map(model, robot, q)
        for b, link in jacobian_bodies:
            mujoco.mj_jacBody(model, data, jacp, jacr, b)
            with torch.no_grad():
                jacobian = robot.jacobian(q, link).numpy()
            if jacobian.size:
                error = np.abs(jacobian - np.vstack((jacp, jacr)) @ velocity).max()
                worst["jacobian"] = max(worst["jacobian"], float(error))
    counts = {"bodies": len(matched), "sites": len(sites), "missing_bodies": missing[:5]}
    return {**worst, **counts}


# --------------------------------------------------------------------------- the workers


def serve() -> None:
    """A worker: one path per line on stdin, one JSON record per line on stdout."""
    import torch

    torch.set_num_threads(1)
    for line in sys.stdin:
        path = line.strip()
        try:
            record = check_file(path)
        except BaseException as err:  # noqa: BLE001 - the worker stays up
            record = {"path": path, "status": "checked"}
            record.update(
                {o: {"status": "crash", "message": repr(err)[:400]} for o in FREE_JOINT_OPTIONS}
            )
        sys.stdout.write("@@" + json.dumps(record) + "\n")
        sys.stdout.flush()


class _Worker:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        code = "from experiments.mjcf_load import serve; serve()"
        self.process = subprocess.Popen(  # in the temporary folder: MuJoCo writes its log there
            [sys.executable, "-c", code],
            cwd=tempfile.gettempdir(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1, env={**env, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip

    def ask(self, path: str, timeout: float) -> dict[str, Any] | None:
        """The record of ``path``, or None when the worker died or ran past ``timeout``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(path + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([self.process.stdout], [], [], left)[0]:
                continue
            line = self.process.stdout.readline()
            if not line:
                return None
            if line.startswith("@@"):  # anything else a library printed is ignored
                return json.loads(line[2:])
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # our own worker, by its handle
        self.process.wait()


def run_corpus(
    entries: list[dict[str, Any]], timeout: float = 180.0, log: Any = None
) -> list[dict[str, Any]]:
    """:func:`check_file` on every entry, in a worker process restarted after a timeout.

    Args:
        entries: ``{"package", "path", "relpath"}`` records (:func:`corpus_from`).
        timeout: Seconds per file.
        log: Called with one line per file (e.g. ``print``), or None.
    """
    results, worker = [], _Worker()
    for i, entry in enumerate(entries):
        start = time.perf_counter()
        record = worker.ask(entry["path"], timeout)
        if record is None:
            worker.stop()
            worker = _Worker()
            failed = {"status": "timeout", "message": f"no answer within {timeout:g} s"}
            record = {"path": entry["path"], "status": "checked"}
            record.update({option: failed for option in FREE_JOINT_OPTIONS})
        results.append({**entry, **record, "wall_s": time.perf_counter() - start})
        if log is not None:
            statuses = [
                record.get(o, {}).get("status", record["status"]) for o in FREE_JOINT_OPTIONS
            ]
            log(f"[{i + 1}/{len(entries)}] {' / '.join(statuses):18s} {entry['relpath']}")
    worker.stop()
    return results


# --------------------------------------------------------------------------- the tables


def _counts(records: list[dict[str, Any]], option: str) -> dict[str, int]:
    checked = [r for r in records if r["status"] == "checked"]
    out = {"files": len(records), "skipped": len(records) - len(checked), "checked": len(checked)}
    for status in STATUSES:
        out[status] = sum(r[option]["status"] == status for r in checked)
    out["loads"] = out["exact"] + out["wrong"]
    bodies = [r[option].get("scene_bodies", 0) for r in checked]
    out["scenes"], out["scene_bodies"] = sum(b > 0 for b in bodies), sum(bodies)
    ik = [r[option].get("scene_ik", [0, 0]) for r in checked]
    out["scene_ik"] = f"{sum(s for s, _ in ik)} / {sum(a for _, a in ik)}"
    out["check_s"] = sum(r.get("wall_s", 0.0) for r in records)  # both options, in a worker
    return out


def _count_table(results: list[dict[str, Any]], option: str) -> Table:
    names = ("files", "skipped", "checked", "loads", *STATUSES, "scenes", "scene_bodies")
    columns = [Column(k, k.replace("_", " ")) for k in names]
    columns.append(Column("scene_ik", "scene IK solved"))
    columns.append(Column("check_s", "seconds", lambda s: f"{s:.1f}"))
    title = f"free_joint={option!r}" + (" (the default)" if option == "floating" else "")
    table = Table(f"Files per package, {title}", columns)
    packages = sorted({r["package"] for r in results})
    for package in packages:
        table.add(package, **_counts([r for r in results if r["package"] == package], option))
    issue = [r for r in results if "(extra)" not in r["package"]]
    if len(issue) != len(results):
        table.add("total (the issue's packages)", **_counts(issue, option))
    table.add("total", **_counts(results, option))
    return table


def _file_table(results: list[dict[str, Any]], statuses: tuple[str, ...], title: str) -> Table:
    columns = [Column(k, k) for k in ("package", "free_joint", "result", "message")]
    table = Table(title, columns)
    for r in results:
        for option in FREE_JOINT_OPTIONS if r["status"] == "checked" else ():
            got = r[option]
            if got["status"] in statuses:
                message = got.get("message", "").removeprefix(r.get("resolved", r["path"]) + ": ")
                detail = message or (
                    f"position {got['position']:.2g} m, rotation {got['rotation']:.2g}, "
                    f"Jacobian {got['jacobian']:.2g}; no link: {got['missing_bodies']}"
                    + (f"; scene bodies {got['body_error']:.2g}" if "body_error" in got else "")
                )
                table.add(f"`{r['relpath']}`", package=r["package"], free_joint=option,
                          result=got["status"], message=detail.replace("|", "/")[:240])  # fmt: skip
    if not table.rows:
        table.notes.append("none")
    return table


def mjcf_tables(results: list[dict[str, Any]]) -> Tables:
    """Counts per package for each ``free_joint`` option, then every wrong, crashed or timed-out
    file, every refusal, and the files MuJoCo cannot compile."""
    tables = Tables(_count_table(results, option) for option in FREE_JOINT_OPTIONS)
    tables.append(_file_table(results, ("wrong", "crash", "timeout"), "Wrong, crashed, timed out"))
    tables.append(_file_table(results, ("refused",), "Refused (torchik's one-line errors)"))
    skipped = Table(
        "Skipped: MuJoCo cannot compile",
        [Column("package", "package"), Column("message", "MuJoCo's message")],
    )
    for r in results:
        if r["status"] == "mujoco_error":
            skipped.add(f"`{r['relpath']}`", package=r["package"], message=r["message"][:160])
    if skipped.rows:
        tables.append(skipped)
    return tables
