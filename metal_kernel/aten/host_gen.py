"""Host side of `aten add`: Objective-C++ in aten/src/ATen/native/mps/operations/.

Two shapes, as in PyTorch:
- TensorIterator ops with a DispatchStub: a `<name>_mps_kernel` calling
  `lib.exec_unary_kernel` / `lib.exec_binary_kernel` and a `REGISTER_DISPATCH`
  line, in UnaryKernel.mm / BinaryKernel.mm (created with the
  `getBundledLibrary` boilerplate when missing);
- custom kernels (no stub, `MPS: <op>_mps` in the yaml): a new `<Op>.mm` with the
  boilerplate, a pipeline-state lookup per dtype, `mtl_setArgs`,
  `mtl_dispatch1DJob` and the MPS profiler calls.
"""

from __future__ import annotations

import re
from pathlib import Path

from torchgen import local
from torchgen.api.types import NativeSignature

from .fileops import FileChange, edit_lines, read_or_none
from .stubs import Stub

# Arity -> (host file stem, MetalShaderLibrary method).
HOST = {
    "unary": ("UnaryKernel", "exec_unary_kernel"),
    "binary": ("BinaryKernel", "exec_binary_kernel"),
}

_BOILERPLATE = """\
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/TensorIterator.h>
{includes}#include <ATen/native/mps/OperationUtils.h>

namespace at::native {{
#ifndef PYTORCH_JIT_COMPILE_SHADERS
static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();
#else
#include <ATen/native/mps/{stem}_metallib.h>
#endif
{body}
}} // namespace at::native
"""


def _header_include(stub: Stub, native_dir: Path) -> str:
    try:
        rel = Path(stub.path).resolve().relative_to(Path(native_dir).resolve())
    except ValueError:
        rel = Path(stub.path).name
    return f"#include <ATen/native/{rel.as_posix()}>"


def plan_stub_host(operations_dir: Path, native_dir: Path, stub: Stub, kernel: str) -> FileChange:
    stem, method = HOST[stub.arity]
    path = Path(operations_dir) / f"{stem}.mm"
    fn_name = f"{kernel}_mps_kernel"
    function = [
        f"static void {fn_name}(TensorIteratorBase& iter) {{",
        f'  lib.{method}(iter, "{kernel}");',
        "}",
    ]
    register = f"REGISTER_DISPATCH({stub.name}, &{fn_name})"
    include = _header_include(stub, native_dir)
    old = read_or_none(path)
    if old is None:
        body = "\n" + "\n".join(function) + "\n\n" + register + "\n"
        new = _BOILERPLATE.format(includes=include + "\n", stem=stem, body=body)
        return FileChange(path, None, new)
    lines = old.splitlines()
    inserts: dict[int, list[str]] = {}
    has_fn = re.search(rf"\b{fn_name}\s*\(", old) is not None
    has_reg = re.search(rf"REGISTER_DISPATCH\(\s*{stub.name}\s*,", old) is not None
    has_include = include in old
    registers = [i for i, l in enumerate(lines) if l.startswith("REGISTER_DISPATCH(")]
    closing = next((i for i in range(len(lines) - 1, -1, -1)
                    if lines[i].startswith("} // namespace at::native")), len(lines) - 1)
    if not has_include:
        includes = [i for i, l in enumerate(lines) if l.startswith("#include <ATen/native/")]
        at = includes[-1] if includes else 0
        inserts.setdefault(at, []).append(include)
    if not has_fn:
        # Define the kernel before the registration block (or the namespace end).
        at = (registers[0] if registers else closing) - 1
        inserts.setdefault(at, []).extend([*function, ""])
    if not has_reg:
        at = registers[-1] if registers else closing - 1
        inserts.setdefault(at, []).append(register)
    return FileChange(path, old, edit_lines(old, insert_after=inserts))


def plan_custom_host(operations_dir: Path, op_stem: str, kernel: str, fn, cpp_name: str,
                     existing: str | None = None) -> FileChange:
    """A .mm for a non-TensorIterator op: one pipeline per dtype, 1-D dispatch.

    `existing` is the file's planned text when several rows add functions to it.
    """
    path = Path(operations_dir) / f"{op_stem}.mm"
    on_disk = read_or_none(path)
    old = existing if existing is not None else on_disk
    if old is not None and re.search(rf"\b{re.escape(cpp_name)}\s*\(", old):
        return FileChange(path, on_disk, old)
    with local.parametrize(use_const_ref_for_mutable_tensors=fn.use_const_ref_for_mutable_tensors,
                           use_ilistref_for_tensor_lists=fn.part_of_structured_group):
        defn = NativeSignature(fn.func, symint=False).defn(name=cpp_name)
    tensors = [a.name for a in fn.func.arguments.flat_all if a.type.is_tensor_like()]
    out = tensors[-1] if fn.func.is_out_fn() else "result"
    inputs = [t for t in tensors if t != out]
    first = inputs[0] if inputs else out
    ret = "" if fn.func.is_out_fn() else f"  auto {out} = at::empty_like({first});\n"
    body = f"""
{defn} {{
{ret}  if ({out}.numel() == 0) {{
    return {out};
  }}
  using namespace mps;
  MPSStream* stream = getCurrentMPSStream();
  auto pso = lib.getPipelineStateForFunc("{kernel}_" + scalarToMetalTypeString({first}));
  dispatch_sync_with_rethrow(stream->queue(), ^() {{
    @autoreleasepool {{
      getMPSProfiler().beginProfileKernel(pso, "{kernel}", {{{", ".join(inputs)}}});
      auto enc = stream->commandEncoder();
      [enc setComputePipelineState:pso];
      mtl_setArgs(enc, {", ".join([out, *inputs])});
      mtl_dispatch1DJob(enc, pso, {out}.numel());
      getMPSProfiler().endProfileKernel(pso);
    }}
  }});
  return {out};
}}
"""
    if old is None:
        new = _BOILERPLATE.format(includes="#include <ATen/mps/MPSProfiler.h>\n", stem=op_stem, body=body)
    else:  # before the closing namespace brace
        cut = old.rstrip("\n").rfind("} // namespace at::native")
        new = old[:cut].rstrip("\n") + "\n" + body + "\n" + old[cut:] if cut >= 0 else old + body
    return FileChange(path, on_disk, new)
