"""End to end: `aten add` then the emulated MPS host on the runtime against the CPU op.

The six ops of issue 11 go through on the fixture tree modeled on PyTorch's files;
one existing op of each kernels file is verified after the edits as a regression
check. The runs pick a few dtypes to stay lean (benchmarks/bench_aten_add.py runs
every dtype of the six ops).
"""

import json
import re

import pytest
import torch
from click.testing import CliRunner

import metal_kernel
from aten_tree import FUNCTORS, KERNELS, build_tree
from metal_kernel.aten.cli import aten
from metal_kernel.aten.model.tree import PyTorchTree
from metal_kernel.aten.verify import verify_op

pytestmark = pytest.mark.skipif(not hasattr(metal_kernel, "compile_shader"),
                                reason="metal_kernel.compile_shader (the runtime) does not exist yet")

F32, F16, BF16, I64, I32, BOOL = torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool


def run(*args):
    return CliRunner().invoke(aten, [str(a) for a in args])


def added(tree, *ops):
    for op in ops:
        result = run("add", op, "--pytorch", tree, *FUNCTORS[op], "--no-verify")
        assert result.exit_code == 0, result.output
    return PyTorchTree.from_root(tree)


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """One tree with the six ops of issue 11 added (not verified), shared by the checks below."""
    return added(build_tree(tmp_path_factory.mktemp("six") / "pytorch"), *FUNCTORS)


def passes(report, dtypes):
    by_dtype = {r.dtype: r for r in report.results}
    assert list(by_dtype) == list(dtypes), report.render()
    assert not report.failed, report.render()
    assert all(r.cases > 0 and r.distinct_inputs > 0 for r in report.results)
    return by_dtype


def kernels(report) -> set[str]:
    return set().union(*(r.kernels for r in report.results))


def test_add_special_ndtri_verifies_with_its_numbers_in_json(tree):
    result = run("add", "special_ndtri", "--pytorch", tree, *FUNCTORS["special_ndtri"], "--json", "--math", "exact",
                 *[a for d in ("float32", "float16", "int16", "uint8") for a in ("--dtype", d)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["verify"]
    by_dtype = {d["dtype"]: d for d in data["dtypes"]}
    assert list(by_dtype) == ["float32", "float16", "int16", "uint8"]
    assert all(d["ok"] and d["cases"] > 50 for d in by_dtype.values())
    # under the checker, every kernel of it (none fell back to running unchecked)
    assert all(d["checked"] for d in by_dtype.values()), data.get("notes")
    # every half and int16 bit pattern, every uint8 value, >= 65,536 float32 values
    for name, distinct in [("float16", 65536), ("int16", 65536), ("uint8", 256)]:
        assert by_dtype[name]["distinct_inputs"] == distinct, name
    assert by_dtype["float32"]["distinct_inputs"] > 65536
    assert by_dtype["float16"]["atol"] == 1e-5 and by_dtype["float16"]["rtol"] == 1e-3
    assert by_dtype["float16"]["tolerance_source"] == (
        "assert_close defaults: test/test_mps.py TestConsistency._compute_tolerances('special.ndtri', float16) "
        "returns (None, None)")
    assert {"ndtri_dense_scalar_float_float", "ndtri_dense_float_float", "ndtri_strided_float_float",
            "ndtri_dense_castout_float", "ndtri_dense_scalar_float_short"} <= set().union(
        *(d["kernels"] for d in by_dtype.values()))


def test_verify_heaviside_layouts_scalars_and_promotion(six):
    report = verify_op(six, "heaviside", [F32, I64], ["exact"])
    by_dtype = passes(report, [F32, I64])
    for flavor in ("heaviside_dense_float_float", "heaviside_dense_ilp4_float_float", "heaviside_strided_float_float",
                   "heaviside_dense_scalar_float_float", "heaviside_dense_scalar_lhs_float_float",
                   "heaviside_dense_broadcast_float_float"):
        assert flavor in kernels(report), flavor
    # the CPU op refuses mixed dtypes: those cases are skipped, counted and said why
    assert by_dtype[F32].skipped == {"the CPU op rejects the case (RuntimeError: heaviside is not yet implemented "
                                     "for tensors with different dtypes.)": 2}  # float32 x int64, both ways
    rendered = report.render()
    assert "skipped 2: the CPU op rejects the case" in rendered
    assert re.search(r"float32 +ok +\d+ cases, [\d,]+ distinct inputs, 2 skipped", rendered)


def test_verify_special_log_ndtr_and_airy_ai(six):
    passes(verify_op(six, "special_log_ndtr", [F32], ["exact"]), [F32])
    report = verify_op(six, "special_airy_ai", [I64], ["exact"])
    by_dtype = passes(report, [I64])
    # Airy oscillates: OpInfo skips large arguments on the CPU, so values stay within +-500
    assert "OpInfo skips special.airy_ai's large-argument test on the CPU: inputs stay within +-500" in report.notes
    # and where the CPU's float32 Airy is off the kernel matches the float64 one: counted, not failed
    assert by_dtype[I64].cpu_less_accurate > 0
    assert "elements where the kernel matches the CPU op in float64" in report.render()


def test_verify_polynomials_with_scalar_overloads(six):
    report = verify_op(six, "special_laguerre_polynomial_l", [F32], ["exact"])
    by_dtype = passes(report, [F32])
    assert {"laguerre_polynomial_l_dense_scalar_lhs_float_float", "laguerre_polynomial_l_dense_scalar_float_float",
            "laguerre_polynomial_l_dense_broadcast_float_float"} <= kernels(report)
    # CPU laguerre returns its previous element's result for NaN x (an uninitialised variable):
    # those elements are not judged, and the report says so
    assert by_dtype[F32].cpu_inconsistent > 0
    assert "not judged: the CPU op's result for them changes with the neighbouring element" in report.render()
    passes(verify_op(six, "special_legendre_polynomial_p", [BF16], ["exact"]), [BF16])


def test_existing_ops_still_verify_after_the_edits(six):
    passes(verify_op(six, "exp", [BF16, I32], ["exact"]), [BF16, I32])
    passes(verify_op(six, "copysign", [F16], ["exact"]), [F16])


def test_an_existing_naive_hypot_is_caught_overflowing(six):
    """The fixture's hypot is written as sqrt(a*a + b*b) in float, as PyTorch's hypot_functor is:
    it overflows where the CPU op does not, and turns hypot(inf, nan) into NaN."""
    report = verify_op(six, "hypot", [F32], ["exact"])
    failures = [str(f) for r in report.results for f in r.failures]
    assert any(re.search(r"a=-?501, b=-?1\.00000002e\+20: expected 1\.00000002e\+20, got inf", f) for f in failures)
    assert any("a=inf, b=nan: expected inf, got nan" in f for f in failures)


def test_existing_op_with_a_bfloat_float_conditional_verifies(six):
    # `c ? bfloat : float` is a float, as in Metal (PyTorch's angle functor relies on it); its
    # dense sweep feeds the poison's own bit pattern, which angle passes through unchanged
    report = verify_op(six, "angle", [BF16], ["exact"])
    assert not report.failed, report.render()


def test_a_file_that_does_not_compile_is_reported_with_its_line(tree):
    path = tree / KERNELS / "UnaryKernel.metal"
    text = path.read_text()
    broken = "const float phase = x < 0 ? M_PI_F : 0.0f;"
    assert text.count(broken) == 1
    line = text[:text.index(broken)].count("\n") + 1
    path.write_text(text.replace(broken, "const float phase = x < 0 ? M_PI_F : undeclared_phase;"))
    result = run("verify", "angle", "--pytorch", tree, "--dtype", "bfloat16", "--math", "exact", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert result.stderr.startswith("verification could not run: ")
    assert data["failed"] and f"{KERNELS}/UnaryKernel.metal:{line}" in data["error"]
    assert "undeclared_phase" in data["error"]


def test_a_dtype_without_cases_fails_the_verification(tree):
    path = tree / KERNELS / "BinaryKernel.metal"  # instantiated for a dtype the CPU op cannot check
    path.write_text(path.read_text().replace("REGISTER_FLOAT_BINARY_OP(hypot);",
                                             "REGISTER_FLOAT_BINARY_OP(hypot);\nREGISTER_BINARY_OP(hypot, int, int);"))
    result = run("verify", "hypot", "--pytorch", tree, "--dtype", "int32", "--math", "exact")
    assert result.exit_code == 1, result.output
    assert re.search(r"int32 +FAIL \(no case ran\) +0 cases", result.output)
    assert re.search(r"skipped \d+: the CPU op rejects the case \(NotImplementedError: \"hypot_cpu\" not "
                     r"implemented for 'Int'\)", result.output)


def test_bounds_mode_is_passed_to_compile_shader_when_the_runtime_takes_it(six, monkeypatch):
    t = six
    real = metal_kernel.compile_shader
    seen = []

    def spy(source, *, math="exact", **kwargs):
        seen.append(math)
        return real(source, math=math, **kwargs)

    monkeypatch.setattr(metal_kernel, "compile_shader", spy)
    report = verify_op(t, "special_ndtri", [F16], ["exact", "bounds"], check=False)  # the math plumbing only
    assert [(r.math, r.dtype) for r in report.results] == [("exact", F16), ("bounds", F16)]
    assert seen == ["exact", "bounds"] and not report.failed
    assert " math=bounds:" in report.render()

    def without_math(source, **kwargs):  # a runtime that offers no math= option
        return real(source, **kwargs)

    monkeypatch.setattr(metal_kernel, "compile_shader", without_math)
    report = verify_op(t, "special_ndtri", [F16], ["exact", "bounds"], check=False)
    assert [r.math for r in report.results] == ["exact"]
    assert any("math='bounds') not run: this runtime's compile_shader has no math= option" in n for n in report.notes)