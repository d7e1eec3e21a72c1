"""test_mps's tolerances, read from a checkout's test/test_mps.py and run as written."""

from types import SimpleNamespace

import torch

from aten_tree import FIXTURES
from metal_kernel.aten.verify.tolerance import MpsTolerances

OP = SimpleNamespace


def test_the_relaxed_pair_only_for_ops_on_the_low_precision_list():
    tolerances = MpsTolerances.load(FIXTURES / "tree")
    listed, other = OP(name="xlogy", variant_test_name=""), OP(name="special.ndtri", variant_test_name="")
    assert (tolerances.for_op(listed, torch.float16).atol, tolerances.for_op(listed, torch.float16).rtol) == (2e-2, 1e-2)
    assert tolerances.for_op(listed, torch.bfloat16).effective(torch.bfloat16) == (5e-2, 5e-2)
    assert tolerances.for_op(listed, torch.float16).source == (
        "test/test_mps.py TestConsistency._compute_tolerances('xlogy', float16); 'xlogy' is on FP16_LOW_PRECISION_LIST")
    default = tolerances.for_op(other, torch.float16)
    assert (default.atol, default.rtol) == (None, None)
    assert default.effective(torch.float16) == (1e-5, 1e-3)  # assert_close's defaults for float16
    assert default.source.startswith("assert_close defaults: test/test_mps.py")
    matmul = tolerances.for_op(OP(name="matmul", variant_test_name=""), torch.float32)
    assert (matmul.atol, matmul.rtol) == (1e-4, 3e-5) and "FP32_LOW_PRECISION_LIST" in matmul.source


def test_the_checkouts_own_method_decides(tmp_path):
    (tmp_path / "test").mkdir()
    source = (FIXTURES / "tree/test/test_mps.py").read_text()
    (tmp_path / "test/test_mps.py").write_text(source.replace("'xlogy',", "'xlogy', 'special.ndtri',"))
    tolerance = MpsTolerances.load(tmp_path).for_op(OP(name="special.ndtri", variant_test_name=""), torch.float16)
    assert (tolerance.atol, tolerance.rtol) == (2e-2, 1e-2)


def test_without_test_mps_every_dtype_gets_the_defaults_and_says_why(tmp_path):
    tolerances = MpsTolerances.load(tmp_path)
    tolerance = tolerances.for_op(OP(name="xlogy", variant_test_name=""), torch.float16)
    assert (tolerance.atol, tolerance.rtol) == (None, None)
    assert tolerances.note == (f"{tmp_path}/test/test_mps.py does not exist and torch {torch.__version__} ships no "
                               "test_mps.py: assert_close defaults for every dtype, the low-precision lists unread")


def test_a_test_mps_without_the_method_is_said(tmp_path):
    (tmp_path / "test").mkdir()
    (tmp_path / "test/test_mps.py").write_text("class TestConsistency:\n    pass\n")
    tolerances = MpsTolerances.load(tmp_path)
    assert tolerances.note.endswith("has no TestConsistency._compute_tolerances: assert_close defaults for every dtype")
