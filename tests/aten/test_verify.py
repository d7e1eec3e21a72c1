"""End to end: `aten add` then the emulated MPS host on the runtime vs the CPU op."""

import pytest
import torch
from click.testing import CliRunner

import metal_kernel
from metal_kernel.aten.cli import aten
from metal_kernel.aten.model.tree import PyTorchTree
from aten_tree import FUNCTORS

pytestmark = pytest.mark.skipif(
    not hasattr(metal_kernel, "compile_shader"),
    reason="metal_kernel.compile_shader (the runtime) does not exist yet")


def added(tree, op):
    result = CliRunner().invoke(aten, ["add", op, "--pytorch", str(tree), *FUNCTORS[op], "--no-verify"])
    assert result.exit_code == 0, result.output
    return PyTorchTree.from_root(tree)


def check(report, expected_dtypes):
    by_dtype = {r.dtype: r for r in report.results}
    assert set(expected_dtypes) <= set(by_dtype)
    failures = [f for r in report.results for f in r.failures]
    assert not failures, report.render()
    assert all(r.cases > 0 for r in report.results)


def test_verify_heaviside_float_half_bfloat_and_integers(tree):
    from metal_kernel.aten.verify import verify_op

    report = verify_op(added(tree, "heaviside"), "heaviside")
    check(report, ["float32", "float16", "bfloat16", "int64", "int32", "uint8", "bool"])
    kernels = set().union(*(r.kernels for r in report.results))
    for flavor in ("heaviside_dense_float_float", "heaviside_dense_ilp4_float_float",
                   "heaviside_strided_float_float", "heaviside_dense_scalar_float_float",
                   "heaviside_dense_broadcast_float_float"):
        assert flavor in kernels


def test_verify_special_ndtri(tree):
    from metal_kernel.aten.verify import verify_op

    report = verify_op(added(tree, "special_ndtri"), "special_ndtri")
    check(report, ["float32", "float16", "bfloat16", "int64", "bool"])
    kernels = set().union(*(r.kernels for r in report.results))
    assert {"ndtri_dense_scalar_float_float", "ndtri_dense_float_float", "ndtri_strided_float_float",
            "ndtri_dense_castout_float", "ndtri_dense_scalar_float_long"} <= kernels


def test_verify_special_airy_ai(tree):
    from metal_kernel.aten.verify import verify_op

    report = verify_op(added(tree, "special_airy_ai"), "special_airy_ai",
                       dtypes=[torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint16])
    check(report, ["float32", "float16", "bfloat16", "int32", "uint16"])


def test_verify_special_laguerre_polynomial_l_with_scalar_overloads(tree):
    from metal_kernel.aten.verify import verify_op

    report = verify_op(added(tree, "special_laguerre_polynomial_l"), "special_laguerre_polynomial_l",
                       dtypes=[torch.float32, torch.float16, torch.bfloat16, torch.int64])
    check(report, ["float32", "float16", "bfloat16", "int64"])
    kernels = set().union(*(r.kernels for r in report.results))
    assert "laguerre_polynomial_l_dense_scalar_lhs_float_float" in kernels


def test_verify_cli_prints_max_error_per_dtype(tree):
    added(tree, "heaviside")
    result = CliRunner().invoke(aten, ["verify", "heaviside", "--pytorch", str(tree)])
    assert result.exit_code == 0, result.output
    assert "float16" in result.output and "max error" in result.output
