"""``torchik view``: serve the interactive 3-D viewer (the robot, a draggable target and its
solutions as ghost robots) on 127.0.0.1, or write one picture of it with ``--screenshot``."""

from __future__ import annotations

import argparse
import signal
import sys
import time

import torch

from torchik.cli.common import _coordinate, _positive_int


def add_parser(sub) -> None:
    p = sub.add_parser(
        "view",
        help="interactive 3-D viewer in the browser (needs torchik[view])",
        epilog="The page is served on 127.0.0.1 only; from another computer forward the port: "
        "ssh -L 8080:127.0.0.1:8080 HOST, then open http://127.0.0.1:8080.",
    )
    p.add_argument(
        "robot", help="bundled name, a URDF file (its visual geometry is drawn) or an MJCF file"
    )
    p.add_argument(
        "--model",
        help="'pretrained', a bundled model's name or a checkpoint file (default: numerical IK)",
    )
    p.add_argument("--link", help="link to place (default: the model's, else the end link)")
    p.add_argument(
        "--port", type=_port, default=8080, help="0 to 65535 (default 8080; next free if busy)"
    )
    p.add_argument("-n", type=_positive_int, default=20, help="ghost solutions (default 20)")
    p.add_argument("--raw", action="store_true", help="show the model's samples unrefined")
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--position", type=_coordinate, nargs=3, metavar="X", help="initial target x y z (m)"
    )
    target.add_argument(
        "--pose",
        type=_coordinate,
        nargs=7,
        metavar=("X", "Y", "Z", "QW", "QX", "QY", "QZ"),
        help="initial target pose: position, quaternion w x y z",
    )
    p.add_argument(
        "--play",
        metavar="FILE",
        help="solutions to play back: JSON of 'torchik "
        "solve --format json' or a torch file of (K, D) or (P, S, D) configurations",
    )
    p.add_argument(
        "--screenshot",
        metavar="FILE",
        help="write a PNG through a headless Chromium and exit (no server left)",
    )
    p.add_argument(
        "--size",
        type=_positive_int,
        nargs=2,
        default=(960, 720),
        metavar=("W", "H"),
        help="screenshot size in pixels (default 960 720)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.set_defaults(func=run)


def _port(text: str) -> int:
    """``--port``: a whole number in [0, 65535] (:func:`torchik.viewer.app.check_port`)."""
    from torchik.viewer.app import check_port

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    try:
        return check_port(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _target(args: argparse.Namespace):
    from torchik.geometry.rotations import quat_to_rotmat
    from torchik.geometry.transforms import pose_to_matrix

    if args.position is not None:
        return torch.tensor(args.position, dtype=torch.float64)
    if args.pose is None:
        return None
    quat = torch.tensor(args.pose[3:], dtype=torch.float64)
    if not quat.norm() > 1e-9:
        raise ValueError("the quaternion of --pose must not be zero")
    position = torch.tensor(args.pose[:3], dtype=torch.float64)
    return pose_to_matrix(position, quat_to_rotmat(quat / quat.norm()))


def run(args: argparse.Namespace) -> int:
    from torchik.viewer.app import Viewer, open_robot
    from torchik.viewer.scene import load_solutions

    target = _target(args)
    if args.screenshot is not None:  # before the seconds the viewer takes to start, its logs
        from torchik.files import output_file
        from torchik.viewer.browser import require_chromium

        output_file(args.screenshot)
        require_chromium()
        _say(f"starting the viewer of {args.robot} for {args.screenshot}...")
    robot, urdf = open_robot(args.robot)
    frames = load_solutions(args.play, robot) if args.play else None
    viewer = Viewer(
        robot,
        args.model,
        link=args.link,
        n=args.n,
        port=args.port,
        urdf=urdf,
        refine=not args.raw,
        seed=args.seed,
    )
    try:
        for message in viewer.skipped:
            print(f"torchik: not drawn: {message}", file=sys.stderr)
        if frames is not None:
            viewer.play(frames)
        viewer.set_target(target) if target is not None else viewer.solve()
        if args.screenshot is not None:
            return _screenshot(viewer, args.screenshot, *args.size)
        print(f"torchik: viewer of {viewer.robot.name} at {viewer.url} (Ctrl-C to stop)")
        sys.stdout.flush()
        # Ctrl-C stops the server even where SIGINT came in ignored (a shell's background job)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        while True:
            time.sleep(3600)
    finally:
        viewer.close()


def _say(message: str) -> None:
    print(f"torchik: {message}", file=sys.stderr, flush=True)


def _screenshot(viewer, path: str, width: int, height: int) -> int:
    from torchik.viewer.browser import headless_browser

    _say("opening the page in a headless Chromium (software WebGL: some 10-40 s)...")
    with headless_browser(viewer, width, height):
        _say(f"rendering {width}x{height}...")
        viewer.screenshot(path, width, height)
    print(f"torchik: wrote {path}")
    return 0
