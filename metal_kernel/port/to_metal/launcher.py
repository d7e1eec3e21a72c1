"""The port, compiled and callable with load_cuda's convention:

    lib = p.load()
    lib["scale_kernel<float>"](x, y, 1.5, n, grid=4, block=128, shared_mem=0)

CUDA's launch becomes a Metal dispatch: `grid` threadgroups of `block`
threads, `shared_mem` bytes of threadgroup memory at [[threadgroup(0)]]
(rounded up to 16 bytes, as Metal requires; with the static arrays at most
32 KiB). Scalars are packed as the kernel declares them; __constant__ /
__device__ variables that became buffers are owned by the library (set with
`lib.set_constant`) and bound after the kernel's own arguments.

Also the text of the launcher module `metal-kernel port -o DIR` writes.
"""

from __future__ import annotations

import ctypes
import json
import re

import numpy as np

from ...runtime.binding import is_ndarray as _is_ndarray
from ...runtime.binding import is_tensor as _is_tensor
from ..analyse import normalise_spelling
from ..binding import BFLOAT16, BOOL, FLOAT, HALF, SIGNED, UNSIGNED, ArgumentError, TypeCode, scalar_bytes
from .model import GlobalSpec, KernelPort, ParamSpec
from .table import MAX_THREADGROUP_MEMORY

_KINDS = {"int": SIGNED, "uint": UNSIGNED, "float": FLOAT, "bool": BOOL}


def pack_scalar(value, p: ParamSpec, what: str) -> bytes:
    dt = p.dtype
    if dt == "bfloat16":
        t = TypeCode(2, BFLOAT16, 0, 0)
    elif dt == "float16":
        t = TypeCode(2, HALF, 0, 0)
    elif dt == "bool":
        t = TypeCode(1, BOOL, 0, 0)
    else:
        kind = _KINDS[re.sub(r"\d+", "", dt)]
        t = TypeCode(np.dtype(dt).itemsize, kind, 0, 0)
    try:
        return scalar_bytes(value, t, what)
    except ArgumentError as e:
        raise TypeError(str(e)) from None


def _dims(v, what: str, kernel: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) and x >= 1 for x in t):
        raise ValueError(f"kernel '{kernel}': {what} must be a positive int or a tuple of 1 to 3, got {v!r}")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


class PortKernel:
    def __init__(self, library: "PortLibrary", port: KernelPort, kernel):
        self._library = library
        self.port = port
        self.kernel = kernel  # the runtime's Metal kernel
        self.name = port.spelling

    def __repr__(self):
        return f"<metal_kernel.port PortKernel {self.name} (Metal: {self.port.metal_name})>"

    def bind(self, args) -> list:
        port = self.port
        if len(args) != len(port.params):
            raise TypeError(f"kernel '{self.name}' takes {len(port.params)} argument(s) "
                            f"({', '.join(p.name for p in port.params)}), got {len(args)}")
        out = []
        present = 0
        for i, (a, p) in enumerate(zip(args, port.params)):
            what = f"kernel '{self.name}': argument {i} ('{p.name}', {p.cuda_type})"
            if p.kind == "buffer":
                if a is None:
                    if not port.present_mask:
                        raise ValueError(f"{what}: Metal cannot bind a null buffer (MK1031); pass an array")
                    out.append(np.zeros(16, np.uint8))  # the kernel tests mk_present, never this buffer
                    continue
                present |= 1 << i
                if not (_is_ndarray(a) or _is_tensor(a)):
                    raise TypeError(f"{what}: pass a tensor or a numpy array, not {type(a).__name__}")
                size = a.element_size() if _is_tensor(a) else a.dtype.itemsize
                if p.dtype and p.elem_bytes and size != p.elem_bytes:
                    raise TypeError(f"{what}: the argument's elements are {size} bytes, the kernel's are "
                                    f"{p.elem_bytes}")
                out.append(a)
            elif p.kind == "scalar":
                out.append(pack_scalar(a, p, what))
            else:
                if isinstance(a, (ctypes.Structure, ctypes.Array)):
                    a = bytes(memoryview(a).cast("B"))
                if not isinstance(a, (bytes, bytearray, memoryview)):
                    raise TypeError(f"{what} is a struct: pass bytes or a ctypes structure")
                out.append(bytes(a))
        for g in port.globals:
            out.append(self._library.global_buffer(g, self.name))
        if port.present_mask:
            out.append(np.uint32(present & 0xFFFFFFFF).tobytes())
        return out

    def __call__(self, *args, grid, block, shared_mem: int = 0, timeout=None):
        bound = self.bind(args)
        g = _dims(grid, "grid", self.name)
        b = _dims(block, "block", self.name)
        threads = b[0] * b[1] * b[2]
        limit = min(1024, self.port.max_threads, self.kernel.max_threads_per_threadgroup)
        if threads > limit:
            raise ValueError(f"kernel '{self.name}': a block of {b} has {threads} threads; at most {limit}")
        if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
            raise ValueError(f"kernel '{self.name}': shared_mem must be a byte count >= 0, got {shared_mem!r}")
        tg = None
        static = self.kernel.static_thread_group_memory_length
        if self.port.dynamic_shared:
            nbytes = (int(shared_mem) + 15) // 16 * 16 or 16
            if nbytes + static > MAX_THREADGROUP_MEMORY:
                raise ValueError(f"kernel '{self.name}': {int(shared_mem)} bytes of dynamic threadgroup memory plus "
                                 f"{static} static is more than the {MAX_THREADGROUP_MEMORY} bytes an Apple GPU "
                                 "has (MK1026)")
            tg = {0: nbytes}
        elif static > MAX_THREADGROUP_MEMORY:
            raise ValueError(f"kernel '{self.name}': {static} bytes of threadgroup memory; an Apple GPU has "
                             f"{MAX_THREADGROUP_MEMORY} (MK1010)")
        return self.kernel(*bound, threadgroups=g, group_size=b, threadgroup_memory=tg, timeout=timeout)


class PortLibrary:
    """The compiled port: lib["k<float>"] / lib.k per translated kernel."""

    def __init__(self, library, kernels: list[KernelPort], global_sizes: dict[str, int] | None = None,
                 global_init: dict[str, bytes] | None = None):
        self.library = library  # the runtime's Metal Library
        self.ports = {k.spelling: k for k in kernels}
        self._kernels = {}
        for k in kernels:
            if library is not None and k.translated and k.metal_name in dir(library):
                self._kernels[k.spelling] = PortKernel(self, k, getattr(library, k.metal_name))
        self._global_sizes = dict(global_sizes or {})
        self._globals: dict[str, np.ndarray] = {}
        for name, data in (global_init or {}).items():
            self._globals[name] = np.frombuffer(bytearray(data), dtype=np.uint8).copy()

    def __getitem__(self, name: str) -> PortKernel:
        if name in self._kernels:
            return self._kernels[name]
        key = normalise_spelling(name)
        if key in self._kernels:
            return self._kernels[key]
        if name in self.ports:
            why = ", ".join(d.code for d in self.ports[name].diagnostics) or "it did not compile"
            raise KeyError(f"kernel '{name}' is not in the port ({why}); see the port's diagnostics")
        raise KeyError(f"no kernel named '{name}' in this port; it has: {', '.join(sorted(self._kernels)) or 'none'}")

    def __getattr__(self, name: str) -> PortKernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(name)

    def __contains__(self, name: str) -> bool:
        try:
            self[name]
            return True
        except KeyError:
            return False

    def __iter__(self):
        return iter(sorted(self._kernels))

    def __repr__(self):
        return f"<metal_kernel.port.PortLibrary kernels={sorted(self._kernels)}>"

    # ----------------------------------------------------------- globals --
    def global_buffer(self, g: GlobalSpec, kernel: str) -> np.ndarray:
        if g.name not in self._globals:
            size = self._global_sizes.get(g.name) or g.nbytes
            if not size:
                raise ValueError(f"kernel '{kernel}' reads the {g.space} variable '{g.name}': set it first with "
                                 f"lib.set_constant('{g.name}', value)")
            self._globals[g.name] = np.zeros(size, np.uint8)
        return self._globals[g.name]

    def set_constant(self, name: str, value, offset: int = 0):
        """cudaMemcpyToSymbol for a __constant__ / __device__ variable that is a
        buffer of the port: its bytes (numbers are written as the variable's
        elements: pass a numpy array of the right dtype, or bytes)."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
        elif _is_tensor(value):
            data = value.detach().cpu().contiguous().numpy().tobytes()
        else:
            data = np.ascontiguousarray(value).tobytes()
        size = self._global_sizes.get(name)
        known = size or next((g.nbytes for k in self.ports.values() for g in k.globals if g.name == name), None)
        buf = self._globals.get(name)
        if buf is None:
            if not any(g.name == name for k in self.ports.values() for g in k.globals):
                raise KeyError(f"no __constant__ or __device__ buffer named '{name}' in this port")
            buf = self._globals[name] = np.zeros(max(known or 0, offset + len(data)), np.uint8)
        if offset < 0 or offset + len(data) > buf.nbytes:
            raise ValueError(f"'{name}' holds {buf.nbytes} bytes; cannot write {len(data)} at offset {offset}")
        buf[offset:offset + len(data)] = np.frombuffer(data, np.uint8)

    def get_constant(self, name: str) -> bytes:
        if name not in self._globals:
            raise KeyError(f"'{name}' has not been set")
        return self._globals[name].tobytes()

    # ------------------------------------------------------------- files --
    @classmethod
    def from_files(cls, metal_path, report_path) -> "PortLibrary":
        """What the generated launcher module calls: the .metal and the
        .port.json written next to it."""
        from pathlib import Path

        from ...runtime import compile_shader
        from .diagnostics import Diagnostic

        report = json.loads(Path(report_path).read_text())
        kernels = []
        for k in report["kernels"]:
            port = KernelPort(k["spelling"], k["metal_name"], k["file"], k["line"],
                              [ParamSpec(**p) for p in k["params"]], [GlobalSpec(**g) for g in k["globals"]],
                              k["dynamic_shared"], k["max_threads"], [], k["translated"], k.get("present_mask", False),
                              k.get("demoted", False))
            port.diagnostics = [Diagnostic(**d) for d in report["diagnostics"] if d["code"] in k["why_not"]]
            kernels.append(port)
        lib = compile_shader(Path(metal_path).read_text(), source_name=str(metal_path))
        return cls(lib, kernels, report.get("global_sizes"), {n: bytes.fromhex(h) for n, h in
                                                               report.get("global_init", {}).items()})


def launcher_module(stem: str, source_name: str, kernels: list[KernelPort]) -> str:
    """The Python module `metal-kernel port -o DIR` writes next to the .metal."""
    lines = [f'"""Launchers for {stem}.metal, the Metal port of {source_name} (generated by `metal-kernel port`).',
             "",
             "Each function takes the CUDA kernel's arguments (torch tensors or numpy arrays for pointers,",
             "numbers for scalars) and the launch: grid, block, shared_mem=0 (bytes of dynamic shared memory).",
             '"""',
             "",
             "from pathlib import Path",
             "",
             "from metal_kernel.port.to_metal.launcher import PortLibrary",
             "",
             "_HERE = Path(__file__).resolve().parent",
             f'library = PortLibrary.from_files(_HERE / "{stem}.metal", _HERE / "{stem}.port.json")',
             "set_constant = library.set_constant",
             ""]
    used = set()
    for k in kernels:
        if not k.translated:
            continue
        fname = re.sub(r"\W+", "_", k.spelling).strip("_")
        while fname in used or not fname.isidentifier():
            fname = "k_" + fname
        used.add(fname)
        params = ", ".join(f"{p.cuda_type}{'*' if p.kind == 'buffer' else ''} {p.name}" for p in k.params)
        demoted = " (its double computed in float: MK1038)" if k.demoted else ""
        lines += ["", f"def {fname}(*args, grid, block, shared_mem=0):",
                  f'    """{k.spelling}({params}) -> Metal kernel {k.metal_name}{demoted}"""',
                  f"    return library[{k.spelling!r}](*args, grid=grid, block=block, shared_mem=shared_mem)", ""]
    return "\n".join(lines)
