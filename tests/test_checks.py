"""torchik.checks: one line per refused setting, TypeError for the kind, ValueError for range."""

from __future__ import annotations

import math
import os

import pytest
import torch

from torchik.checks import (
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_generator,
    check_int,
    check_kind,
    check_tensor,
    check_threads,
    intra_op_threads,
)


def test_check_int():
    assert check_int("n", 3, 1, 5) == 3
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_int("n", 0, 1)
    with pytest.raises(ValueError, match="n must be <= 5, got 6"):
        check_int("n", 6, 1, 5)
    for bad in (2.0, "3", True, None, [1]):
        with pytest.raises(TypeError, match="n must be an int"):
            check_int("n", bad)


def test_check_float():
    assert check_float("tol", 2) == 2.0 and isinstance(check_float("tol", 2), float)
    with pytest.raises(ValueError, match="tol must be finite, got nan"):
        check_float("tol", math.nan)
    with pytest.raises(ValueError, match="tol must be finite"):
        check_float("tol", -math.inf)
    with pytest.raises(ValueError, match="tol must be > 0, got 0.0"):
        check_float("tol", 0.0, positive=True)
    with pytest.raises(ValueError, match=r"tol must be in \[0.0, 1.0\], got 2.0"):
        check_float("tol", 2.0, 0.0, 1.0)
    for bad in ("1", None, False):
        with pytest.raises(TypeError, match="tol must be a number"):
            check_float("tol", bad)


def test_check_choice_and_bool():
    assert check_choice("kind", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"kind must be one of \['a', 'b'\], got 'c'"):
        check_choice("kind", "c", ("a", "b"))
    with pytest.raises(ValueError, match="kind must be one of"):
        check_choice("kind", ["a"], ("a", "b"))  # unhashable: still a ValueError
    assert check_bool("flag", False) is False
    with pytest.raises(TypeError, match="flag must be True or False, got int 1"):
        check_bool("flag", 1)


def test_check_threads_is_bounded_by_the_cores():
    cores = os.cpu_count() or 1
    assert check_threads("threads", cores) == cores
    with pytest.raises(ValueError, match=f"threads must be at most {cores}, the cores"):
        check_threads("threads", 100000)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        check_threads("threads", 0)
    with pytest.raises(TypeError, match="threads must be an int"):
        check_threads("threads", 1.5)


def test_intra_op_threads_sets_nothing_by_default_and_restores():
    before = torch.get_num_threads()
    with intra_op_threads(None):
        assert torch.get_num_threads() == before
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="at most"), intra_op_threads(10**6):
        pass
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    "device, words",
    [("banana", "is not a device"), ("meta", "cannot run torchik"), ("cuda:99", "CUDA GPU"),
     ("cuda", "CUDA GPU"), ("mps", "MPS is not available")],
)  # fmt: skip
def test_check_device_says_in_one_line_why_a_device_cannot_be_used(device, words):
    if device.startswith("cuda") and device != "cuda:99" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    with pytest.raises(ValueError, match=f"^where '{device}'.*{words}") as info:
        check_device("where", device)
    assert "\n" not in str(info.value)
    assert check_device("where", torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(TypeError, match="where must be a str or a torch.device, got 0"):
        check_device("where", 0)


def test_fk_stream_and_train_config_check_their_device():
    from torchik import load_robot
    from torchik.learn import FKStream
    from torchik.train import TrainConfig

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="^device 'cuda': no CUDA GPU is available here$"):
        FKStream(load_robot("snake2"), device="cuda")
    with pytest.raises(ValueError, match="^device 'cuda': no CUDA GPU is available here$"):
        TrainConfig(device="cuda")
    with pytest.raises(ValueError, match="^device 'banana' is not a device"):
        FKStream(load_robot("snake2")).to("banana")


def test_check_generator():
    gen = torch.Generator()
    assert check_generator("generator", gen) is gen and check_generator("generator", None) is None
    for bad in (5, "seed", 1.5, torch.tensor(1)):
        with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got"):
            check_generator("generator", bad)


def test_check_kind():
    assert check_kind("n", 3, int) == 3 and check_kind("n", None, int, optional=True) is None
    with pytest.raises(TypeError, match="^n must be an int, got str$"):
        check_kind("n", "3", int)
    with pytest.raises(TypeError, match="^n must be an int or None, got float$"):
        check_kind("n", 1.5, int, optional=True)
    with pytest.raises(TypeError, match="^x must be a Tensor, got NoneType$"):
        check_kind("x", None, torch.Tensor)
    with pytest.raises(TypeError, match="^x must be a list or a tuple, got dict$"):
        check_kind("x", {}, list | tuple, "a list or a tuple")


def test_check_tensor_names_the_argument_in_one_line():
    q = torch.zeros(2, 3, 7)
    assert check_tensor("q", q, (7,)) is q and check_tensor("q", q, (None, 7), min_dims=3) is q
    mask = torch.zeros(7, dtype=torch.bool)
    assert check_tensor("continuous", mask, (7,), dtype=torch.bool) is mask
    cases = [
        (([0.0] * 7, (7,)), {}, TypeError, r"^q must be a torch.Tensor, got list \[0.0, "),
        ((q.long(), (7,)), {}, TypeError, "^q must be a floating-point tensor, got torch.int64$"),
        ((q, (7,)), {"dtype": torch.bool}, TypeError, "^q must be a torch.bool tensor"),
        ((q.to("meta"), (7,)), {}, ValueError, "meta device"),
        ((q, (6,)), {}, ValueError, r"^q must have shape \(\.\.\., 6\), got \(2, 3, 7\)$"),
        ((q, (2, None)), {}, ValueError, r"\(\.\.\., 2, \*\)"),
        ((q[0], ()), {"min_dims": 3}, ValueError, r"\(\.\.\.\) and 3 dimensions at least"),
        ((torch.zeros(()), (7,)), {}, ValueError, r"got \(\)$"),
    ]
    for args, kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            check_tensor("q", *args, **kwargs)


def test_check_float_refuses_an_int_beyond_a_float_in_one_line():
    with pytest.raises(ValueError, match=r"^x must be finite, got 1000"):  # OverflowError before
        check_float("x", 10**400)


def test_check_tensor_without_batch_dims_is_the_shape_exactly():
    mask = torch.zeros(7, dtype=torch.bool)
    assert check_tensor("m", mask, (7,), dtype=torch.bool, batch=False) is mask
    with pytest.raises(ValueError, match=r"^m must have shape \(7,\), got \(1, 7\)$"):
        check_tensor("m", mask[None], (7,), dtype=torch.bool, batch=False)
    with pytest.raises(ValueError, match=r"^m must have shape \(\*, 2\), got \(2, 3, 2\)$"):
        check_tensor("m", torch.zeros(2, 3, 2), (None, 2), batch=False)
