"""Stand-ins for CUDA's streams and graphs on the CPU, for tests of the one-graph programs'
control flow (:func:`torchik.ik.captured.replayed`): warm-up, capture, replay."""

from __future__ import annotations

import contextlib
from types import ModuleType

import torch

from torchik.ik import captured as ik_captured
from torchik.ik.fixed import copy_buffers

RESULT_FIELDS = ("q", "success", "position_error", "rotation_error", "iterations")
"""What a replay writes of an ``IKResult`` (the rest, e.g. the robot's ``continuous``, is not
the graph's memory)."""


class FakeGraph:
    """A stand-in for ``torch.cuda.CUDAGraph`` on the CPU: what runs inside ``graph(...)`` is
    remembered (the program's call, :func:`fake_cuda`) and run again by ``replay``, its answer's
    ``fields`` copied into the tensors the capture returned (as a replay writes the graph's
    memory)."""

    made: list[FakeGraph] = []
    fields: tuple[str, ...] = RESULT_FIELDS

    def __init__(self):
        self.call, self.out, self.replays = None, None, 0
        FakeGraph.made.append(self)

    def replay(self):
        self.replays += 1
        fresh = self.call()
        for name in FakeGraph.fields:
            copy_buffers(getattr(self.out, name), getattr(fresh, name))


def fake_cuda(monkeypatch, module: ModuleType, fields: tuple[str, ...] = RESULT_FIELDS,
              fail: bool = False) -> list[int]:  # fmt: skip
    """The CUDA calls of the one-graph machinery replaced by CPU stand-ins, ``module``'s
    ``capturable`` made true and its ``program`` recorded (the rows of its second argument's
    problem, or targets, per call: the list returned). ``fail``: every capture raises, as one
    of an operation that cannot be captured."""
    capturing: list[FakeGraph] = []

    @contextlib.contextmanager
    def graph(g):
        if fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        capturing.append(g)
        try:
            yield
        finally:
            capturing.pop()

    real, calls = module.program, []

    def program(*args):
        calls.append(len(args[1]) if hasattr(args[1], "__len__") else 0)
        out = real(*args)
        if capturing:
            capturing[-1].call, capturing[-1].out = (lambda: real(*args)), out
        return out

    class Stream:
        def wait_stream(self, other):
            pass

    FakeGraph.made.clear()
    monkeypatch.setattr(FakeGraph, "fields", fields)
    ik_captured._Program._cache.clear()
    monkeypatch.setattr(module, "capturable", lambda solver, q: True)
    monkeypatch.setattr(module, "program", program)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    return calls
