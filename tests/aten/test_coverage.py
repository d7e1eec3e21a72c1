import json

import pytest
from click.testing import CliRunner
from torchgen.gen import parse_native_yaml
from torchgen.model import DispatchKey

from aten_tree import build_tree
from metal_kernel.aten.cli import aten
from metal_kernel.aten.coverage import compute
from metal_kernel.aten.model.tree import PyTorchTree


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = build_tree(tmp_path_factory.mktemp("cov") / "pytorch")
    return root, compute(PyTorchTree.from_root(root))


def test_coverage_counts_agree_with_torchgen(report):
    root, rep = report
    parsed = parse_native_yaml(str(root / "aten/src/ATen/native/native_functions.yaml"),
                               str(root / "aten/src/ATen/native/tags.yaml"), skip_native_fns_gen=True)
    cuda = parsed.backend_indices[DispatchKey.CUDA]
    mps = parsed.backend_indices[DispatchKey.MPS]

    def has(index, f):
        return index.get_kernel(f) is not None or (
            f.structured_delegate is not None and f.structured_delegate in index.index)

    expected = {str(f.func.name) for f in parsed.native_functions if has(cuda, f) and not has(mps, f)}
    assert {m.name for m in rep.missing} == expected
    assert rep.entries == len(parsed.native_functions)
    assert rep.explicit["MPS"] == len(mps.index)
    assert rep.cuda_not_mps_explicit == sum(
        1 for f in parsed.native_functions if f.func.name in cuda.index and f.func.name not in mps.index)


def test_coverage_classifies_missing_ops(report):
    classes = {m.name: m.op_class for m in report[1].missing}
    assert classes["heaviside"] == "stub-ready"
    assert classes["heaviside_"] == "stub-ready"
    assert classes["special_ndtri.out"] == "stub-ready"
    assert classes["special_laguerre_polynomial_l.out"] == "stub-ready"
    assert classes["linalg_eig"] == "linear algebra"
    assert classes["_foreach_add.List"] == "foreach"
    assert classes["fractional_max_pool2d"] == "pooling"
    assert classes["multi_margin_loss"] == "loss"
    assert classes["poisson"] == "random"
    assert classes["take"] == "indexing"
    assert classes["channel_shuffle"] == "other"


def test_coverage_lists_xfail_entries_read_from_common_mps_source(report):
    by_name = {m.name: m for m in report[1].missing}
    assert by_name["heaviside"].xfails == ["UNIMPLEMENTED_XFAILLIST['heaviside']=None"]
    assert any("special.airy_ai" in x for x in by_name["special_airy_ai"].xfails)


def test_coverage_json_output_is_consistent(tree):
    result = CliRunner().invoke(aten, ["coverage", "--pytorch", str(tree), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["cuda_not_mps"] == len(data["ops"]) == sum(data["by_class"].values())


def test_coverage_table_without_checkout_reads_installed_torch():
    result = CliRunner().invoke(aten, ["coverage"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("source: installed torch")
    assert "heaviside" in result.output


def test_coverage_on_a_non_checkout_exits_2(tmp_path):
    result = CliRunner().invoke(aten, ["coverage", "--pytorch", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a PyTorch checkout" in result.output
