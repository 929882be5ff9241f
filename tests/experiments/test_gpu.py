"""experiments.gpu: the GPU runbook's FK, IK and whole-body rows (run here on the CPU, tiny)."""

from __future__ import annotations

import os

import torch

from experiments.gpu import LOOPS, anchor_fk_rows, fk_rows, gpu_table, ik_rows, wholebody_rows
from torchik import load_robot


def test_fk_ik_and_wholebody_rows_and_table():
    torch.set_num_threads(1)
    robot = load_robot("snake2")
    rows = fk_rows(robot, "ee", [8], seconds=0.01)
    whats = ["FK pose", "FK all links", "FK + backward", "Jacobian"]
    assert [(r["what"], r["path"]) for r in rows] == [(w, "reference") for w in whats]  # CPU
    assert all(r["G_per_s"] > 0 and r["n"] == 8 for r in rows)
    assert robot.backend == "auto"  # the setting is put back
    rows += ik_rows(robot, "ee", [5], seconds=0.01)
    assert [r["path"] for r in rows[4:]] == list(LOOPS)
    assert all(r["success"] == 1.0 for r in rows[4:])
    warm = ik_rows(robot, "ee", [5], seconds=0.01, loops={"warm": {}}, warm=0.05)
    assert [r["path"] for r in warm] == ["warm"] and warm[0]["success"] == 1.0
    g1 = load_robot("g1")
    rows += wholebody_rows(g1, ["left_rubber_hand", "right_rubber_hand"], 3, seconds=0.01)
    table = gpu_table(rows)
    assert len(table.rows) == 4 + len(LOOPS) + 3 and table.rows[-1]["success"] == 1.0
    assert "| IK full pose | fixed, CUDA graphs | 5 |" in table.markdown()


def test_anchor_fk_rows_time_another_librarys_fk_backward_and_jacobian():
    """The protocol's anchor (pytorch_kinematics) measured as torchik's rows are: each op at each
    size, the backward through ``fn(q).sum()``; torchik's reference path stands in here."""
    torch.set_num_threads(1)
    robot = load_robot("snake2", backend="reference")
    fk = lambda q: robot.forward_kinematics(q, "ee")  # noqa: E731
    ops = {"FK pose": fk, "FK + backward": fk, "Jacobian": lambda q: robot.jacobian(q, "ee")}
    rows = anchor_fk_rows("other", ops, robot.random_configuration, [1, 8], seconds=0.01)
    assert [(r["what"], r["n"]) for r in rows] == [(w, n) for n in (1, 8) for w in ops]
    assert all(r["path"] == "other" and r["G_per_s"] > 0 and "status" not in r for r in rows)
    broken = anchor_fk_rows("other", {"FK pose": lambda q: q[:, 99]}, robot.random_configuration,
                            [2], seconds=0.01)  # fmt: skip
    assert broken[0]["status"].startswith("failed: ")


def test_wholebody_triton_rows_name_the_program_and_the_chunks_and_put_the_switches_back():
    """Off CUDA Triton's loop kernel does not serve (the rows time ``loop="fixed"`` as it is
    and say so): the rows' names and sizes, ``FUSED_LOOP`` and the program's rule restored."""
    from experiments.gpu import WHOLEBODY_TRITON, wholebody_triton_rows
    from torchik.ik.wholebody import captured
    from torchik.ik.wholebody import solve as wholebody

    torch.set_num_threads(1)
    before = wholebody.FUSED_LOOP, captured.serves
    hands = ["left_rubber_hand", "right_rubber_hand"]
    rows = wholebody_triton_rows(load_robot("g1"), hands, (1, 3), seconds=0.01)
    program, chunks = (f"{name} (no CUDA: loop='fixed' as it is)" for name in WHOLEBODY_TRITON)
    assert [(r["path"], r["n"]) for r in rows] == [(program, 1), (program, 3), (chunks, 3)]
    assert all("status" not in r and r["success"] == 1.0 for r in rows)
    assert (wholebody.FUSED_LOOP, captured.serves) == before


def test_wholebody_host_rows_time_the_cpus_code_at_each_size_and_thread_count():
    from experiments.gpu import HOST_ROUTE, wholebody_host_rows
    from torchik.ik import host

    torch.set_num_threads(1)
    limit = host.HOST_WHOLEBODY_ROWS
    hands = ["left_rubber_hand", "right_rubber_hand"]
    rows = wholebody_host_rows(load_robot("g1"), hands, (1, 3, 1001), 0.01, threads=(1, 1 << 20))
    # the largest size up to 1 000 takes the thread counts below the machine's cores
    threads = [(f"{HOST_ROUTE}, 1 threads", 3)] if (os.cpu_count() or 1) > 1 else []
    assert [(r["path"], r["n"]) for r in rows] == [
        (HOST_ROUTE, 1), (HOST_ROUTE, 3), (HOST_ROUTE, 1001), *threads,
    ]  # fmt: skip
    assert all("status" not in r and r["success"] == 1.0 for r in rows)
    assert host.HOST_WHOLEBODY_ROWS == limit  # given back


def test_route_rows_time_the_defaults_against_the_gpus_programs():
    from experiments.gpu import HOST_ROUTE, ROUTE_IK, ROUTE_WHOLEBODY, route_limits, route_rows
    from torchik.ik import host

    torch.set_num_threads(1)
    hands = ["left_rubber_hand", "right_rubber_hand"]
    limits = host.HOST_ROWS, host.HOST_WHOLEBODY_ROWS
    rows = route_rows(load_robot("snake2"), "ee", load_robot("g1"), hands, 0.01, quick=True)
    bodies = ("fixed, CUDA graphs", "defaults", HOST_ROUTE)
    assert [(r["path"], r["n"]) for r in rows] == [
        (path, n) for n in ROUTE_IK[:2] for path in ("defaults", "fixed, one graph")
    ] + [(HOST_ROUTE, n) for n in ROUTE_IK[:2]] + [
        (path, n) for n in ROUTE_WHOLEBODY[:2] for path in bodies
    ]
    assert all("status" not in r and r["success"] > 0.9 for r in rows)  # no failed row
    assert (host.HOST_ROWS, host.HOST_WHOLEBODY_ROWS) == limits  # given back
    assert set(route_limits(rows)) == {"HOST_ROWS", "HOST_WHOLEBODY_ROWS"}


def test_route_limits_stop_at_the_first_size_the_gpu_wins_or_solves_more():
    from experiments.gpu import HOST_ROUTE, WHOLEBODY_GPU, route_limits

    def rows(what, gpu, times):
        return [{"what": what, "path": path, "n": n, "ms": ms, "success": ok}
                for n, (cpu, gpu_ms, ok) in times.items()
                for path, ms in ((HOST_ROUTE, cpu), (gpu, gpu_ms))]  # fmt: skip

    ik = rows(
        "IK full pose",
        "fixed, one graph",
        {1: (0.5, 1.4, 1.0), 8: (0.9, 1.4, 1.0), 32: (2.0, 1.5, 1.0), 64: (1.0, 1.6, 1.0)},
    )
    body = rows("whole-body IK, 2 links", "fixed, CUDA graphs", {1: (2.0, 9.0, 1.0)})
    body[0]["success"] = 0.5  # the CPU solved fewer: the GPU's
    assert route_limits(ik + body) == {"HOST_ROWS": 16, "HOST_WHOLEBODY_ROWS": 0}
    assert route_limits(ik[:2], slots=4) == {"HOST_ROWS": 4}
    assert route_limits([{"what": "IK full pose", "path": HOST_ROUTE, "n": 1,
                          "status": "failed: x"}]) == {}  # fmt: skip
    # weighed against Triton's program instead: the CPU wins up to 10 targets, not at 1 000
    program = rows("whole-body IK, 2 links", WHOLEBODY_GPU["whole-body IK, 2 links"],
                   {1: (2.0, 5.0, 1.0), 10: (3.0, 5.0, 1.0), 1000: (30.0, 9.0, 1.0)})  # fmt: skip
    assert route_limits(body + program, gpu=WHOLEBODY_GPU) == {"HOST_WHOLEBODY_ROWS": 20}


def test_model_rows_draw_and_refine_with_each_sampler():
    from experiments.gpu import model_rows
    from torchik.models import load_pretrained

    torch.set_num_threads(1)
    robot = load_robot("panda")
    from torchik.models.pretrained import fitted_sampler

    fitted = fitted_sampler("panda"), fitted_sampler("panda", bf16=True)
    rows = model_rows(robot, load_pretrained("panda"), 4, 0.01, *fitted)
    paths = ["own", "FEW_PASSES", "FEW_PASSES_BF16", "fitted, 7 passes", "fitted, 7 passes, bf16"]
    paths = [p for p in paths for _ in range(2)]
    assert [r["path"] for r in rows] == paths
    assert [r["what"] for r in rows[:2]] == ["model draw", "model + refinement"]
    assert all(r["ms"] > 0 for r in rows) and "success" not in rows[0]
    assert all(0.0 <= r["success"] <= 1.0 for r in rows[1::2])


def test_without_graphs_turns_them_off_for_the_call_only():
    from experiments.gpu import _without_graphs
    from torchik.models import fm

    assert fm.CUDA_GRAPHS and _without_graphs(lambda: fm.CUDA_GRAPHS) is False and fm.CUDA_GRAPHS
