"""take end to end: `aten add take --kernel`, the generated Take.mm, and its Python twin.

The tree is the wheel's real native_functions.yaml / common_mps.py / c10/metal headers
(aten_tree.py); the kernel is our own fixture (fixtures/take.metal). The twin runs on
the runtime, so the verify tests need `metal_kernel.compile_shader`.
"""

import difflib
import json
import re

import pytest
import torch
from click.testing import CliRunner
from torchgen.model import DispatchKey

import metal_kernel
from aten_tree import FIXTURES, TAKE, TAKE_NO_WRAP, TORCH, snapshot
from metal_kernel.aten.recipes import take as take_host
from metal_kernel.aten.cli import aten
from metal_kernel.aten.twin.mps_stream import MpsStream, error_messages_layout
from metal_kernel.aten.model.tree import PyTorchTree
from metal_kernel.aten.model.native_functions import NativeFunctions

YAML = "aten/src/ATen/native/native_functions.yaml"
METAL = "aten/src/ATen/native/mps/kernels/Take.metal"
MM = "aten/src/ATen/native/mps/operations/Take.mm"
COMMON = "torch/testing/_internal/common_mps.py"
DTYPES = ["float32", "float16", "bfloat16", "complex64", "int64", "int32", "int16", "int8", "uint8", "bool"]

runtime = pytest.mark.skipif(not hasattr(metal_kernel, "compile_shader"),
                             reason="metal_kernel.compile_shader (the runtime) does not exist yet")


def run(*args):
    return CliRunner().invoke(aten, [str(a) for a in args])


def add_take(tree, kernel=TAKE, *extra):
    return run("add", "take", "--pytorch", tree, *kernel, "--no-verify", *extra)


def verify(tree):
    from metal_kernel.aten.verify import verify_op

    return verify_op(PyTorchTree.from_root(tree), "take")


def test_add_take_gives_both_rows_their_own_mps_kernel_and_torchgen_parses(tree):
    before = (tree / YAML).read_text()
    result = add_take(tree)
    assert result.exit_code == 0, result.output
    after = (tree / YAML).read_text()
    diff = [d for d in difflib.ndiff(before.splitlines(), after.splitlines()) if d[0] in "+-"]
    assert diff == ["+     MPS: take_out_mps", "+     MPS: take_mps"]
    t = PyTorchTree.from_root(tree)
    nf = NativeFunctions.load(t.native_functions, t.tags)  # torchgen re-parses the edited file
    assert nf.by_name["take.out"].row_for("MPS").kernel == "take_out_mps"
    assert nf.by_name["take"].row_for("MPS").kernel == "take_mps"
    assert nf.by_name["take"].row_for("CPU").keys == ("CPU", "CUDA")
    assert all(nf.effective(DispatchKey.MPS, e.fn) for e in nf.family("take"))
    assert "take_along_dim" not in "".join(diff)
    assert '"take": None' not in (tree / COMMON).read_text()
    assert "take_along_dim" in (tree / COMMON).read_text()


def test_add_take_writes_the_kernel_with_includes_and_one_instantiation_per_dtype(tree):
    add_take(tree)
    metal = (tree / METAL).read_text()
    assert metal.startswith("#include <c10/metal/error.h>\n#include <c10/metal/utils.h>\n#include <metal_stdlib>\n")
    assert metal.count("#include <c10/metal/error.h>") == 1  # the fixture's own include is not repeated
    regs = re.findall(r"^REGISTER_TAKE_OP\((\w+), (\w+)\);$", metal, re.M)
    assert regs == [("float", "long"), ("half", "long"), ("bfloat", "long"), ("float2", "long"), ("long", "long"),
                    ("int", "long"), ("short", "long"), ("char", "long"), ("uchar", "long"), ("bool", "long")]
    assert "double" not in metal


def test_take_mm_is_pytorch_style_and_renders_the_twins_table(tree):
    add_take(tree)
    mm = (tree / MM).read_text()
    for needle in (
        "#ifndef PYTORCH_JIT_COMPILE_SHADERS\nstatic auto& lib = mps::MetalShaderLibrary::getBundledLibrary();\n"
        "#else\n#include <ATen/native/mps/Take_metallib.h>\n#endif",
        "at::Tensor & take_out_mps(const at::Tensor & self, const at::Tensor & index, at::Tensor & out) {",
        "at::Tensor take_mps(const at::Tensor & self, const at::Tensor & index) {\n"
        "  auto out = at::empty(index.sizes(), self.options());\n  take_out_mps(self, index, out);",
        "  at::native::resize_output(out, index.sizes());\n  if (index.numel() == 0) {\n    return out;",
        "const auto self_ = self.contiguous();",
        # the pieces the twin evaluates (take_host's table), as the .mm spells them:
        'lib.getPipelineStateForFunc("take_" + scalarToMetalTypeString(self_) + "_" + scalarToMetalTypeString(index_))',
        "mtl_setArgs(enc, output, self_, index_, numel, stream->getErrorBuffer());",
        "mtl_dispatch1DJob(enc, pso, index_.numel());",
        'getMPSProfiler().beginProfileKernel(pso, "take", {self_, index_});',
        "getMPSProfiler().endProfileKernel(pso);",
        "dispatch_sync_with_rethrow(stream->queue(), ^() {",
    ):
        assert needle in mm
    for check in take_host.CHECKS:
        assert check.cpp() in mm
    assert [b.cpp for b in take_host.BIND] == ["output", "self_", "index_", "numel", "stream->getErrorBuffer()"]
    assert take_host.host_name(torch.float32, torch.int64) == "take_float_long"
    assert mm.index("take_out_mps(const") < mm.index("take_mps(const") < mm.index("} // namespace at::native")


class RecordingLib:
    """Stands in for the runtime: records the launch the twin makes."""

    def __init__(self):
        self.calls = []

    def __dir__(self):
        return ["take_float_long"]

    def __getattr__(self, name):
        if name != "take_float_long":
            raise AttributeError(name)
        return lambda *args, threads, group_size: self.calls.append((args, threads, group_size))


def test_twin_binds_and_dispatches_what_the_mm_says():
    lib, stream = RecordingLib(), MpsStream(error_messages_layout(TORCH / "include/c10/metal/error.h"))
    twin = take_host.TakeHost(lib, stream)
    x, index = torch.arange(12.0).reshape(3, 4).t(), torch.tensor([[0, -1, 5]]).t()
    out = twin.take(x, index)
    (args, threads, group), = lib.calls
    output, self_, index_, numel, errors = args
    assert output is out and out.shape == (3, 1)  # at::empty(index.sizes(), self.options())
    assert self_.is_contiguous() and torch.equal(self_, x)  # self.contiguous()
    assert index_.is_contiguous() and torch.equal(index_, index)
    assert numel.dtype == torch.int64 and numel.tolist() == [12]  # const int64_t numel
    assert errors is stream.error_buffer and errors.numel() == 15364  # sizeof(ErrorMessages)
    assert (threads, group) == (3, 3)  # mtl_dispatch1DJob(enc, pso, index_.numel())
    with pytest.raises(RuntimeError, match="Failed to create function state object for: take_half_long"):
        twin.take(x.half(), index)


def test_twin_applies_the_cpu_checks_with_the_cpu_messages():
    twin = take_host.TakeHost(RecordingLib(), MpsStream(error_messages_layout(TORCH / "include/c10/metal/error.h")))
    x = torch.ones(4)
    for args, kwargs in [((x, torch.tensor([0], dtype=torch.int32)), {}),
                         ((torch.ones(0), torch.tensor([0])), {}),
                         ((x, torch.tensor([0])), {"out": torch.empty(1, dtype=torch.int64)}),
                         ((x, torch.tensor([0, 1])), {"out": x[:2]})]:
        with pytest.raises(Exception) as cpu:
            torch.take(*args, **kwargs)
        with pytest.raises(Exception) as mps:
            twin.take_out(*args, kwargs["out"]) if kwargs else twin.take(*args)
        assert (type(mps.value), str(mps.value)) == (type(cpu.value), str(cpu.value))


def test_dry_run_prints_the_diff_and_writes_nothing(tree):
    before = snapshot(tree)
    result = add_take(tree, TAKE, "--dry-run")
    assert result.exit_code == 0, result.output
    assert snapshot(tree) == before
    for needle in (f"--- a/{YAML}", "+    MPS: take_out_mps", f"+++ b/{METAL}", f"+++ b/{MM}",
                   '-            "take": None,'):
        assert needle in result.output


def test_second_add_changes_nothing(tree):
    assert add_take(tree).exit_code == 0
    first = snapshot(tree)
    result = add_take(tree)
    assert result.exit_code == 0, result.output
    assert "nothing to change: already done" in result.output
    assert "already take_out_mps" in result.output
    assert add_take(tree, TAKE, "--dry-run").output == ""
    assert snapshot(tree) == first


def test_existing_mm_without_the_functions_gets_them_before_the_namespace_end(tree):
    (tree / MM).write_text("#include <ATen/native/mps/OperationUtils.h>\n\nnamespace at::native {\n"
                           "static void helper() {}\n} // namespace at::native\n")
    assert add_take(tree).exit_code == 0
    mm = (tree / MM).read_text()
    assert mm.startswith("#include <ATen/native/mps/OperationUtils.h>")
    assert mm.index("static void helper()") < mm.index("take_out_mps(") < mm.index("} // namespace at::native")


@pytest.mark.parametrize("args, message", [
    (["--functor", FIXTURES / "take/take.metal"], "error: 'take' needs a custom kernel: pass --kernel FILE"),
    (["--kernel", FIXTURES / "functors/heaviside.expr"], "heaviside.expr: no `kernel void` function in the kernel file"),
    (["--kernel", FIXTURES / "missing.metal"], "missing.metal: kernel file does not exist"),
])
def test_bad_take_input_is_one_message_and_no_change(tree, args, message):
    before = snapshot(tree)
    result = run("add", "take", "--pytorch", tree, *args)
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and message in result.output
    assert snapshot(tree) == before


def test_kernel_without_instantiations_or_macro_is_rejected(tree, tmp_path):
    bare = tmp_path / "bare.metal"
    bare.write_text("template <typename T> kernel void take(device T* out, uint i [[thread_position_in_grid]]) {}\n")
    before = snapshot(tree)
    result = run("add", "take", "--pytorch", tree, "--kernel", bare)
    assert result.exit_code == 2
    assert f"error: {bare}: no kernel instantiated for take_float_long, take_half_long" in result.output
    assert "#define REGISTER_TAKE_OP(T, I)" in result.output
    assert snapshot(tree) == before


def test_a_tensor_iterator_op_refuses_a_custom_kernel(tree):
    result = run("add", "heaviside", "--pytorch", tree, *TAKE)
    assert result.exit_code == 2
    assert "'heaviside' is a binary TensorIterator op (heaviside_stub)" in result.output


@runtime
def test_add_take_verifies_every_dtype_exactly_with_out_of_range_reported_by_the_kernel(tree):
    result = run("add", "take", "--pytorch", tree, *TAKE)
    assert result.exit_code == 0, result.output
    assert "verify take (kernel 'take'):" in result.output
    for dtype in DTYPES:
        assert re.search(rf"  {dtype} +ok +\d+ cases, \d+ distinct inputs, 0 skipped, 3 kernel-reported errors; "
                         r"max error 0; atol 0 rtol 0 \(exact: a copy is compared bit for bit\)", result.output), dtype
    report = verify(tree)
    by_dtype = {r.name: r for r in report.results}
    assert list(by_dtype) == DTYPES and not report.failed
    assert by_dtype["float32"].kernels == {"take_float_long"}
    assert by_dtype["complex64"].kernels == {"take_float2_long"}
    errors = by_dtype["bool"].kernel_errors
    assert errors[:2] == [
        "index past the end: out of range: tried to access index 9 on a tensor of 9 elements.",
        "index before the start: out of range: tried to access index -10 on a tensor of 9 elements."]
    # two indices out of range: threads race, the kernel may name either; the CPU names the first
    assert errors[2] in ("indices past both ends: out of range: tried to access index 12 on a tensor of 9 elements.",
                         "indices past both ends: out of range: tried to access index -20 on a tensor of 9 elements.")
    assert all(r.cases >= 50 for r in report.results)


@runtime
def test_a_kernel_error_that_does_not_match_the_cpus_index_error_fails(tree, tmp_path):
    worded = tmp_path / "take_other_words.metal"
    source = (FIXTURES / "take/take.metal").read_text()
    assert source.count('"out of range: tried to access index "') == 1
    worded.write_text(source.replace('"out of range: tried to access index "', '"bad index "'))
    assert add_take(tree, ["--kernel", worded]).exit_code == 0
    failures = [str(f) for r in verify(tree).results for f in r.failures]
    assert any(f.startswith("index past the end") and "the kernel reports AcceleratorError: bad index 9" in f
               and "the CPU raises IndexError: out of range: tried to access index 9" in f for f in failures)


@runtime
def test_twin_raises_kernel_reported_errors_once_like_check_last_error(tree):
    add_take(tree)
    t = PyTorchTree.from_root(tree)
    lib = metal_kernel.compile_shader((tree / METAL).read_text(), include_dirs=[str(t.include_dir)])
    twin = take_host.TakeHost(lib, MpsStream(error_messages_layout(t.c10_metal / "error.h")))
    x = torch.arange(6)
    with pytest.raises(torch.AcceleratorError, match=r"^out of range: tried to access index 6 on a tensor of 6 "
                                                     r"elements\.$"):
        twin.take(x, torch.tensor([1, 6, -7]))
    assert twin.stream.messages().count == 0  # drained, as checkLastError swaps it to 0
    assert twin.take(x, torch.tensor([-6, 5])).tolist() == [0, 5]


@runtime
def test_verify_fails_on_a_kernel_that_rejects_negative_indices(tree):
    assert add_take(tree, TAKE_NO_WRAP).exit_code == 0
    report = verify(tree)
    assert report.failed and all(not r.ok for r in report.results)
    failures = [str(f) for r in report.results for f in r.failures]
    assert any("CPU" not in f and "the MPS host raises AcceleratorError: out of range: tried to access index -7" in f
               for f in failures)
    result = run("verify", "take", "--pytorch", tree)
    assert result.exit_code == 1 and "FAIL" in result.output


@runtime
def test_verify_fails_on_a_kernel_without_a_range_check(tree, tmp_path):
    unchecked = tmp_path / "take_unchecked.metal"
    source = (FIXTURES / "take/take.metal").read_text()
    source = source.replace("if (idx < -numel || idx >= numel) {", "if (false) {")
    unchecked.write_text(source)
    assert add_take(tree, ["--kernel", unchecked]).exit_code == 0
    report = verify(tree)
    failures = [str(f) for r in report.results for f in r.failures]
    assert any(f.startswith("index past the end") and "CPU raises IndexError: out of range" in f
               and "the MPS host returns a result" in f for f in failures)
    # the checker names the read past the end of `self` itself, in every dtype
    for r in report.results:
        assert r.checked and any(str(f).startswith("checker: oob") and "buffer 'self'" in str(f)
                                 for f in r.failures), r.name


@runtime
def test_the_checker_is_on_by_default_and_can_be_turned_off(tree):
    assert add_take(tree).exit_code == 0
    result = run("verify", "take", "--pytorch", tree, "--dtype", "int32", "--math", "exact", "--json")
    assert result.exit_code == 0, result.output
    assert [d["checked"] for d in json.loads(result.output)["dtypes"]] == [True]
    result = run("verify", "take", "--pytorch", tree, "--dtype", "int32", "--math", "exact", "--no-check", "--json")
    assert result.exit_code == 0, result.output
    assert [d["checked"] for d in json.loads(result.output)["dtypes"]] == [False]
