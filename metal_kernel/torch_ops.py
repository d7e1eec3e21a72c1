"""One Metal kernel, one torch custom op: fast on a Mac, testable in Linux CI.

    SOURCE = "kernel void scale(device float* out, device const float* x, constant float& s, ...)"

    @metal_kernel.metal_op("mylib::scale", SOURCE)
    def scale(lib, x: torch.Tensor, s: float) -> torch.Tensor:
        out = torch.empty_like(x)
        lib.scale(out, x, s)
        return out

`scale(x, 2.0)` is then `torch.ops.mylib.scale`. The launcher receives the
compiled library as its first argument: on MPS tensors, the library from
``torch.mps.compile_shader(SOURCE)`` (runs on the GPU); on CPU tensors, the
same source compiled by metal-kernel's runtime (runs on the CPU with Metal
semantics). Both libraries share the calling convention, so the launcher is
written once. The MPS path is ordinary PyTorch (``torch.mps.compile_shader``,
PyTorch >= 2.7) and is not exercised here: there is no Mac in CI.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from .runtime import compile_shader


class _Libraries:
    """Compiles the source once per device kind, on first use."""

    def __init__(self, source: str, include_dirs, defines):
        self.source = source
        self.include_dirs = tuple(include_dirs)
        self.defines = dict(defines or {})
        self._by_device: dict[str, object] = {}
        self._lock = threading.Lock()

    def for_device(self, device_type: str):
        with self._lock:
            lib = self._by_device.get(device_type)
            if lib is None:
                if device_type == "mps":
                    import torch

                    lib = torch.mps.compile_shader(self.source)
                elif device_type == "cpu":
                    lib = compile_shader(self.source, include_dirs=self.include_dirs, defines=self.defines)
                else:
                    raise RuntimeError(f"Metal kernels run on 'mps' (GPU) or 'cpu' (metal-kernel runtime), "
                                       f"not on '{device_type}'")
                self._by_device[device_type] = lib
            return lib


def _device_of(args, kwargs) -> str:
    import torch

    for a in [*args, *kwargs.values()]:
        if isinstance(a, torch.Tensor):
            return a.device.type
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    return b.device.type
    return "cpu"


def metal_op(qualname: str, source: str, *, mutates_args: Iterable[str] | str = (),
             fake: Callable | None = None, include_dirs: Sequence[str] = (),
             defines: Mapping | None = None):
    """Decorator turning a launcher ``f(lib, *tensors_and_scalars)`` into a
    ``torch.library.custom_op`` named ``qualname`` ("namespace::name").

    ``fake`` (optional) is registered with ``register_fake`` for torch.compile
    and meta tensors. ``mutates_args`` is passed to custom_op as is.
    """
    import torch

    libraries = _Libraries(source, include_dirs, defines)

    def decorate(launcher: Callable):
        sig = inspect.signature(launcher)
        params = list(sig.parameters.values())
        if not params:
            raise TypeError(f"{launcher.__name__} must take the compiled library as its first parameter")
        public = sig.replace(parameters=params[1:])

        @functools.wraps(launcher)
        def impl(*args, **kwargs):
            return launcher(libraries.for_device(_device_of(args, kwargs)), *args, **kwargs)

        impl.__signature__ = public
        impl.__annotations__ = {k: v for k, v in launcher.__annotations__.items() if k != params[0].name}
        op = torch.library.custom_op(qualname, impl, mutates_args=mutates_args)
        if fake is not None:
            op.register_fake(fake)
        op.metal_libraries = libraries
        return op

    return decorate
