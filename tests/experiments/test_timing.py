"""experiments.timing.time_call: torch.utils.benchmark underneath, checked inputs."""

import pytest
import torch

from experiments.timing import Timing, time_call


def test_time_call_measures_a_call():
    calls = []
    t = time_call(lambda: calls.append(torch.ones(4).sum()), min_run_time=0.01, threads=1)
    assert isinstance(t, Timing)
    assert t.median > 0 and t.runs >= 1 and t.calls_per_run >= 1 and t.threads == 1
    assert len(calls) >= t.runs * t.calls_per_run  # warm-up calls come on top


def test_time_call_orders_slow_and_fast():
    fast = time_call(lambda: None, min_run_time=0.01, threads=1)
    slow = time_call(lambda: torch.randn(200, 200) @ torch.randn(200, 200), min_run_time=0.01)
    assert slow.median > fast.median


def test_time_call_times_a_slow_call_min_runs_times():
    """A call slower than ``min_run_time`` gave one block (fk.md's pytorch_kinematics rows at
    batch 65536: 1 or 2, IQR 0 ns), short of the protocol's median of >= 7."""
    import time

    one = time_call(lambda: time.sleep(0.003), min_run_time=0.001, threads=1)
    seven = time_call(lambda: time.sleep(0.003), min_run_time=0.001, threads=1, min_runs=7)
    assert one.runs < 7 <= seven.runs and seven.calls_per_run == one.calls_per_run
    assert 0.003 <= seven.median < 0.05 and seven.iqr >= 0


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"fn": 3}, TypeError),
        ({"fn": lambda: None, "min_run_time": 0}, ValueError),
        ({"fn": lambda: None, "threads": 0}, ValueError),
        ({"fn": lambda: None, "min_runs": 0}, ValueError),
    ],
)
def test_time_call_refuses_bad_input(kwargs, error):
    fn = kwargs.pop("fn")
    with pytest.raises(error):
        time_call(fn, **kwargs)
