"""MLX-style kernel authoring: write only the body, get a callable kernel.

    kernel = metal_kernel.metal_kernel(
        name="myexp", input_names=["inp"], output_names=["out"],
        source="uint elem = thread_position_in_grid.x; out[elem] = metal::exp(inp[elem]);")
    (y,) = kernel(inputs=[x], template=[("T", torch.float32)], grid=(x.numel(), 1, 1),
                  threadgroup=(256, 1, 1), output_shapes=[x.shape], output_dtypes=[x.dtype])

Semantics follow ``mx.fast.metal_kernel``: the signature is generated from
the body — inputs become ``const device T* name`` (0-d inputs
``const constant T& name``), followed by ``name_shape`` / ``name_strides`` /
``name_ndim`` when the body mentions them; outputs become ``device T* name``
(``device atomic<T>* name`` with ``atomic_outputs=True``); every thread
attribute whose name appears in the body becomes a parameter; ``template``
arguments (dtypes, ints, bools) become template parameters of the kernel.
Inputs and outputs are torch tensors (numpy arrays are accepted as inputs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .runtime import compile_shader

# Thread attributes MLX adds when the body names them, with MLX's types.
ATTRIBUTE_TYPES = {
    "dispatch_quadgroups_per_threadgroup": "uint",
    "dispatch_simdgroups_per_threadgroup": "uint",
    "dispatch_threads_per_threadgroup": "uint3",
    "grid_origin": "uint3",
    "grid_size": "uint3",
    "quadgroup_index_in_threadgroup": "uint",
    "quadgroups_per_threadgroup": "uint",
    "simdgroup_index_in_threadgroup": "uint",
    "simdgroups_per_threadgroup": "uint",
    "thread_execution_width": "uint",
    "thread_index_in_quadgroup": "uint",
    "thread_index_in_simdgroup": "uint",
    "thread_index_in_threadgroup": "uint",
    "thread_position_in_grid": "uint3",
    "thread_position_in_threadgroup": "uint3",
    "threadgroup_position_in_grid": "uint3",
    "threadgroups_per_grid": "uint3",
    "threads_per_grid": "uint3",
    "threads_per_simdgroup": "uint",
    "threads_per_threadgroup": "uint3",
}

# torch dtype name -> (Metal type, MLX's spelling used in host names)
METAL_TYPES = {
    "float32": ("float", "float32"),
    "float16": ("half", "float16"),
    "bfloat16": ("bfloat", "bfloat16"),
    "int8": ("char", "int8"),
    "int16": ("short", "int16"),
    "int32": ("int", "int32"),
    "int64": ("long", "int64"),
    "uint8": ("uchar", "uint8"),
    "uint16": ("ushort", "uint16"),
    "uint32": ("uint", "uint32"),
    "uint64": ("ulong", "uint64"),
    "bool": ("bool", "bool_"),
    "complex64": ("float2", "complex64"),
}

# What MLX prepends to every custom kernel (its `metal::utils()`), the parts
# custom kernels use: type names and index helpers.
PRELUDE = r"""
#include <metal_stdlib>
using namespace metal;
typedef half float16_t;
typedef bfloat bfloat16_t;
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc(IdxT elem, constant const int* shape, constant const int64_t* strides, int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}
METAL_FUNC int64_t elem_to_loc(uint elem, constant const int* shape, constant const int64_t* strides, int ndim) {
  return elem_to_loc<int64_t>(int64_t(elem), shape, strides, ndim);
}
"""


def _dtype_name(dtype) -> str:
    import numpy as np
    import torch

    if isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    if isinstance(dtype, str):
        return {"float": "float32", "half": "float16", "bfloat": "bfloat16", "int": "int32",
                "long": "int64"}.get(dtype, dtype)
    return np.dtype(dtype).name


def _torch_dtype(dtype):
    import torch

    name = _dtype_name(dtype)
    if name in ("float64", "complex128"):
        raise TypeError(f"{name} is not supported by Metal (no 64-bit floating point)")
    try:
        return getattr(torch, name if name != "bool_" else "bool")
    except AttributeError:
        raise TypeError(f"unsupported dtype {dtype!r}") from None


def _metal_type(dtype) -> str:
    name = _dtype_name(dtype)
    if name not in METAL_TYPES:
        raise TypeError(f"dtype {name} has no Metal counterpart here "
                        f"(supported: {', '.join(METAL_TYPES)})")
    return METAL_TYPES[name][0]


def _mentions(source: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", source) is not None


class MetalKernel:
    """A kernel whose signature is generated at call time, like MLX's."""

    def __init__(self, name: str, input_names: Sequence[str], output_names: Sequence[str], source: str,
                 header: str = "", ensure_row_contiguous: bool = True, atomic_outputs: bool = False):
        if not name.isidentifier():
            raise ValueError(f"kernel name {name!r} must be a C identifier")
        for n in [*input_names, *output_names]:
            if not n.isidentifier():
                raise ValueError(f"parameter name {n!r} must be a C identifier")
        dup = set(input_names) & set(output_names)
        if dup:
            raise ValueError(f"names used both as input and output: {sorted(dup)}")
        self.name = name
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.source = source
        self.header = header
        self.ensure_row_contiguous = ensure_row_contiguous
        self.atomic_outputs = atomic_outputs
        self._libraries: dict[str, object] = {}

    # -------------------------------------------------------- generation --
    def _template_parts(self, template):
        if template is None:
            return [], [], ""
        items = list(template.items()) if isinstance(template, Mapping) else list(template)
        params, args, suffix = [], [], []
        for key, value in items:
            if isinstance(value, bool):
                params.append(f"bool {key}")
                args.append("true" if value else "false")
                suffix.append(str(value).lower())
            elif isinstance(value, int):
                params.append(f"int {key}")
                args.append(str(value))
                suffix.append(str(value))
            else:
                params.append(f"typename {key}")
                args.append(_metal_type(value))
                suffix.append(METAL_TYPES[_dtype_name(value)][1])
        return params, args, "_".join(suffix)

    def generate(self, inputs, output_dtypes, template) -> tuple[str, str]:
        """(source, host name) for these input types and template arguments."""
        params = []
        index = 0
        for name, x in zip(self.input_names, inputs):
            t = _metal_type(x.dtype)
            if x.ndim == 0:
                params.append(f"const constant {t}& {name} [[buffer({index})]]")
            else:
                params.append(f"const device {t}* {name} [[buffer({index})]]")
            index += 1
            if x.ndim > 0:
                if _mentions(self.source, f"{name}_shape"):
                    params.append(f"const constant int* {name}_shape [[buffer({index})]]")
                    index += 1
                if _mentions(self.source, f"{name}_strides"):
                    params.append(f"const constant int64_t* {name}_strides [[buffer({index})]]")
                    index += 1
                if _mentions(self.source, f"{name}_ndim"):
                    params.append(f"const constant int& {name}_ndim [[buffer({index})]]")
                    index += 1
        for name, dt in zip(self.output_names, output_dtypes):
            t = _metal_type(dt)
            if self.atomic_outputs:
                params.append(f"device atomic<{t}>* {name} [[buffer({index})]]")
            else:
                params.append(f"device {t}* {name} [[buffer({index})]]")
            index += 1
        for attr, atype in ATTRIBUTE_TYPES.items():
            if _mentions(self.source, attr):
                params.append(f"{atype} {attr} [[{attr}]]")
        tparams, targs, suffix = self._template_parts(template)
        fn = f"custom_kernel_{self.name}"
        host = f"{fn}_{suffix}" if suffix else fn
        sig = ",\n    ".join(params)
        body = f"[[kernel]] void {fn}(\n    {sig}) {{\n{self.source}\n}}\n"
        if tparams:
            body = f"template <{', '.join(tparams)}>\n" + body
            body += (f'template [[host_name("{host}")]] [[kernel]] decltype({fn}<{", ".join(targs)}>) '
                     f"{fn}<{', '.join(targs)}>;\n")
        elif host != fn:
            host = fn
        return PRELUDE + self.header + "\n" + body, host

    # -------------------------------------------------------------- call --
    def __call__(self, *, inputs, grid, threadgroup, output_shapes, output_dtypes, template=None,
                 init_value=None, verbose=False, stream=None):
        import numpy as np
        import torch

        named_inputs = isinstance(inputs, Mapping)
        if named_inputs:
            inputs = [inputs[n] for n in self.input_names]
        if len(inputs) != len(self.input_names):
            raise ValueError(f"kernel '{self.name}' has inputs {self.input_names}, got {len(inputs)} input(s)")
        named_outputs = isinstance(output_shapes, Mapping)
        if named_outputs:
            output_shapes = [output_shapes[n] for n in self.output_names]
        if isinstance(output_dtypes, Mapping):
            output_dtypes = [output_dtypes[n] for n in self.output_names]
        if len(output_shapes) != len(self.output_names) or len(output_dtypes) != len(self.output_names):
            raise ValueError(f"kernel '{self.name}' has outputs {self.output_names}: give one shape and "
                             "one dtype for each")
        tensors = []
        for name, x in zip(self.input_names, inputs):
            if isinstance(x, np.ndarray):
                x = torch.from_numpy(x)
            elif not isinstance(x, torch.Tensor):
                x = torch.tensor(x)
            if self.ensure_row_contiguous:
                x = x.contiguous()
            tensors.append(x)
        out_dtypes = [_torch_dtype(d) for d in output_dtypes]
        source, host = self.generate(tensors, out_dtypes, template)
        if verbose:
            print(source)
        lib = self._libraries.get(source)
        if lib is None:
            lib = self._libraries[source] = compile_shader(source, source_name=f"{self.name}.metal")
        outputs = []
        for shape, dt in zip(output_shapes, out_dtypes):
            if init_value is None:
                outputs.append(torch.empty(tuple(shape), dtype=dt))
            else:
                outputs.append(torch.full(tuple(shape), init_value, dtype=dt))
        args = []
        for name, x in zip(self.input_names, tensors):
            args.append(x)
            if x.ndim > 0:
                if _mentions(self.source, f"{name}_shape"):
                    args.append(torch.tensor(list(x.shape), dtype=torch.int32))
                if _mentions(self.source, f"{name}_strides"):
                    args.append(torch.tensor(list(x.stride()), dtype=torch.int64))
                if _mentions(self.source, f"{name}_ndim"):
                    args.append(torch.tensor(x.ndim, dtype=torch.int32))
        args.extend(outputs)
        grid = list(grid) + [1] * (3 - len(grid))
        tg = list(threadgroup) + [1] * (3 - len(threadgroup))
        group = [min(t, g) or 1 for t, g in zip(tg, grid)]
        getattr(lib, host)(*args, threads=grid, group_size=group)
        if named_outputs:
            return dict(zip(self.output_names, outputs))
        return outputs


def metal_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str], source: str,
                 header: str = "", ensure_row_contiguous: bool = True,
                 atomic_outputs: bool = False) -> MetalKernel:
    """A kernel from the body of a Metal function, as ``mx.fast.metal_kernel``."""
    return MetalKernel(name, input_names, output_names, source, header, ensure_row_contiguous,
                       atomic_outputs)
