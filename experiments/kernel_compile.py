"""The fused Triton kernels compiled for a GPU on a machine without one
(``benchmarks/kernel_compile.py``): seconds per compiler stage, registers, spills, and the
instructions of the kernel's main loop.

Two steps, each in a process of its own: :func:`recorded_kernels` runs a call in Triton's
interpreter (``TRITON_INTERPRET=1``, as the tests do on a CPU) and keeps the source and argument
types of every kernel it launches, launching none; :func:`compiled` then compiles one of them
for a CUDA target with Triton's own compiler (which needs no GPU: it writes PTX and, with the
``ptxas`` that Triton ships, the machine code), and reads ``ptxas -v`` and ``nvdisasm``. The
interpreter and the compiler do not mix in one process (Triton's language module is patched for
the interpreter).

What it is for: compile time is the first call's wait on a GPU (Triton caches the result on
disk), and registers, spills and the loop's length are what can be read of a kernel's speed
without running it. The G1's whole-body loop kernel took 119 s to compile for sm_90 here, 113 s
of it in one pass of Triton's (``TritonGPUCoalesce``), which visits the whole kernel once per
memory operation.

Example:
    >>> entry = {"name": "k", "signature": {"x_ptr": "*fp32", "B": "i32", "BLOCK": "constexpr"}}
    >>> _attrs(entry["signature"])
    {(0,): [['tt.divisibility', 16]]}
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ARCH", "compiled", "loop_stats", "ptxas_report", "recorded_kernels"]

ARCH = 90
"""The compute capability compiled for by default: Hopper (H100, H200)."""

_TYPES = {"torch.float32": "fp32", "torch.float64": "fp64", "torch.int64": "i64",
          "torch.int32": "i32", "torch.bool": "i1", "torch.uint8": "u8"}  # fmt: skip


def recorded_kernels(call: Callable[[], Any]) -> list[dict[str, Any]]:
    """The fused kernels that ``call()`` launches, each once, launching none (run in Triton's
    interpreter, where ``torchik.kinematics.fused`` takes CPU tensors): ``name``, ``source``
    (the generated Python), ``signature`` (each argument's Triton type, ``BLOCK`` a
    ``constexpr``), ``block`` and ``warps``. What ``call`` computes is garbage (no kernel
    ran); an exception after the first launches is kept quiet."""
    import torch

    from torchik.kinematics import fused

    seen: dict[int, dict[str, Any]] = {}

    def record(kernel: Any, grid: tuple[int, ...], *args: Any) -> None:
        if id(kernel) in seen:
            return
        fn = kernel.fn
        names = list(inspect.signature(fn).parameters)
        signature = {name: _type(arg, torch) for name, arg in zip(names, args, strict=False)}
        signature["BLOCK"] = "constexpr"
        seen[id(kernel)] = dict(
            name=fn.__name__, source=inspect.getsource(fn), signature=signature,
            block=fused.BLOCK, warps=fused.WARPS,
        )  # fmt: skip

    saved = fused._run
    fused._run = record  # type: ignore[assignment]
    try:
        call()
    except Exception:  # noqa: BLE001 (no kernel ran: later steps may trip on garbage)
        if not seen:
            raise
    finally:
        fused._run = saved  # type: ignore[assignment]
    return list(seen.values())


def _type(arg: Any, torch: Any) -> str:
    """Triton's name of an argument's type: a tensor's pointer, an integer, a float."""
    if isinstance(arg, torch.Tensor):
        return "*" + _TYPES[str(arg.dtype)]
    if isinstance(arg, bool):
        return "i1"
    if isinstance(arg, int):
        return "i32" if -(2**31) <= arg < 2**31 else "i64"
    if isinstance(arg, float):
        return "fp32"
    raise TypeError(f"an argument of type {type(arg).__name__}")


def _attrs(signature: dict[str, str]) -> dict[tuple[int, ...], list[list[Any]]]:
    """Pointers aligned to 16 bytes, as Triton assumes of PyTorch's allocations."""
    return {(i,): [["tt.divisibility", 16]] for i, t in enumerate(signature.values())
            if t.startswith("*")}  # fmt: skip


def compiled(entry: dict[str, Any], arch: int = ARCH) -> dict[str, Any]:
    """Compile one :func:`recorded_kernels` entry for ``sm_{arch}`` (in a process without
    Triton's interpreter): ``seconds`` in all, ``stages`` (seconds per compiler stage: ``ttgir``
    holds Triton's GPU passes), ``lines`` of source, ``ptxas`` (:func:`ptxas_report`) and
    ``loop`` (:func:`loop_stats`). Triton's on-disk cache is bypassed."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if os.environ.get("TRITON_INTERPRET") == "1":
        raise RuntimeError("compile in a process without TRITON_INTERPRET=1")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{entry['name']}.py"  # triton.jit reads its function's file
        path.write_text("import triton\nimport triton.language as tl\n\n" + entry["source"])
        spec = importlib.util.spec_from_file_location(f"_kernel_{entry['name']}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        signature = entry["signature"]
        source = ASTSource(triton.jit(getattr(module, entry["name"])), signature,
                           constexprs={(len(signature) - 1,): entry["block"]},
                           attrs=_attrs(signature))  # fmt: skip
        stages: dict[str, float] = {}

        def listener(**report: Any) -> None:
            times = report["times"]
            stages["init"] = times.ir_initialization / 1e6
            stages.update((name, us / 1e6) for name, us in times.lowering_stages)

        saved, knobs.compilation.listener = knobs.compilation.listener, listener
        always, knobs.compilation.always_compile = knobs.compilation.always_compile, True
        try:
            start = time.perf_counter()
            kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32),
                                    options={"num_warps": entry["warps"]})  # fmt: skip
            seconds = time.perf_counter() - start
        finally:
            knobs.compilation.listener, knobs.compilation.always_compile = saved, always
        return dict(seconds=seconds, stages=stages, lines=len(entry["source"].splitlines()),
                    ptxas=ptxas_report(kernel.asm["ptx"], arch, Path(tmp)),
                    loop=loop_stats(_sass(kernel.asm["cubin"], Path(tmp))))  # fmt: skip


def _tool(name: str) -> Path:
    """A binary that Triton ships with its NVIDIA backend (``ptxas``, ``nvdisasm``)."""
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name


def ptxas_report(ptx: str, arch: int, tmp: Path) -> dict[str, int]:
    """``registers``, ``spill_stores`` and ``spill_loads`` (bytes a thread) of ``ptx`` by
    ``ptxas -v`` (Triton's ``ptxas-blackwell`` where present: the newer of the two reads the
    PTX version Triton writes)."""
    ptxas = _tool("ptxas-blackwell") if _tool("ptxas-blackwell").exists() else _tool("ptxas")
    (tmp / "k.ptx").write_text(ptx)
    done = subprocess.run([str(ptxas), "-v", f"--gpu-name=sm_{arch}a", str(tmp / "k.ptx"),
                           "-o", os.devnull], capture_output=True, text=True)  # fmt: skip
    text = done.stderr
    number = lambda pattern: int(m.group(1)) if (m := re.search(pattern, text)) else -1  # noqa: E731
    return dict(registers=number(r"Used (\d+) registers"),
                spill_stores=number(r"(\d+) bytes spill stores"),
                spill_loads=number(r"(\d+) bytes spill loads"))  # fmt: skip


def _sass(cubin: bytes, tmp: Path) -> str:
    (tmp / "k.cubin").write_bytes(cubin)
    done = subprocess.run([str(_tool("nvdisasm")), "-c", str(tmp / "k.cubin")],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout


def loop_stats(sass: str) -> dict[str, int]:
    """Of machine code ``sass`` (``nvdisasm -c``): ``instructions`` in all, and of its longest
    loop (a branch back to an earlier label): ``loop`` instructions, its spill stores
    ``loop_stl`` and loads ``loop_ldl`` (local memory) and global loads ``loop_ldg``; zeros
    where there is no loop.

    Example:
        >>> code = '''.L_x_0:
        ...         /*0000*/  LDL R1, [R2] ;
        ...         /*0010*/  FADD R1, R1, R1 ;
        ...         /*0020*/  @P0 BRA `(.L_x_0) ;
        ...         /*0030*/  EXIT ;'''
        >>> loop_stats(code)
        {'instructions': 4, 'loop': 3, 'loop_stl': 0, 'loop_ldl': 1, 'loop_ldg': 0}
    """
    at: dict[str, int] = {}
    code: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in sass.splitlines():
        if label := re.match(r"^\s*(\.L_x_\d+):", line):
            pending.append(label.group(1))
        elif found := re.match(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*)$", line):
            address = int(found.group(1), 16)
            at.update(dict.fromkeys(pending, address))
            pending = []
            code.append((address, found.group(2)))
    best: list[str] = []
    for address, instruction in code:
        branch = re.search(r"BRA\s+`\((\.L_x_\d+)\)", instruction)
        if branch and at.get(branch.group(1), address) < address:
            body = [i for a, i in code if at[branch.group(1)] <= a <= address]
            best = body if len(body) > len(best) else best
    count = lambda op: sum(1 for i in best if re.search(rf"\b{op}\b", i))  # noqa: E731
    return dict(instructions=len(code), loop=len(best), loop_stl=count("STL"),
                loop_ldl=count("LDL"), loop_ldg=count("LDG"))  # fmt: skip
