import difflib

from click.testing import CliRunner

from aten_tree import snapshot
from metal_kernel.aten.cli import aten
from metal_kernel.aten.model.tree import PyTorchTree
from metal_kernel.aten.model.native_functions import NativeFunctions

YAML = "aten/src/ATen/native/native_functions.yaml"


def migrate(tree, *extra):
    return CliRunner().invoke(aten, ["migrate", "logit", "--pytorch", str(tree), *extra])


def test_migrate_collapses_every_legacy_row_into_the_shared_line(tree):
    before = (tree / YAML).read_text()
    result = migrate(tree)
    assert result.exit_code == 0, result.output
    after = (tree / YAML).read_text()
    diff = [d[0] + d[2:] for d in difflib.ndiff(before.splitlines(), after.splitlines()) if d[0] in "+-"]
    assert diff == [
        "-    CPU, CUDA, MTIA: logit", "+    CPU, CUDA, MPS, MTIA: logit", "-    MPS: logit_mps",
        "-    CPU, CUDA: logit_out", "+    CPU, CUDA, MPS: logit_out", "-    MPS: logit_out_mps",
    ]
    t = PyTorchTree.from_root(tree)
    nf = NativeFunctions.load(t.native_functions, t.tags)  # torchgen parses the result
    assert nf.by_name["logit"].row_for("MPS").kernel == "logit"


def test_migrate_lists_the_old_implementation_to_delete(tree):
    result = migrate(tree)
    assert "delete the old implementation logit_mps: aten/src/ATen/native/mps/operations/UnaryOps.mm:12" in result.output
    assert "delete the old implementation logit_out_mps: aten/src/ATen/native/mps/operations/UnaryOps.mm:7" in result.output
    assert "logit_ (line" in result.output and "missing" in result.output


def test_migrate_dry_run_writes_nothing(tree):
    before = snapshot(tree)
    result = migrate(tree, "--dry-run")
    assert result.exit_code == 0
    assert "-    MPS: logit_out_mps" in result.output
    assert snapshot(tree) == before


def test_second_migrate_changes_nothing(tree):
    migrate(tree)
    after_first = snapshot(tree)
    result = migrate(tree)
    assert result.exit_code == 0
    assert "nothing to migrate" in result.output
    assert snapshot(tree) == after_first


def test_migrate_unknown_op_exits_2(tree):
    result = CliRunner().invoke(aten, ["migrate", "nope", "--pytorch", str(tree)])
    assert result.exit_code == 2
    assert "unknown operator 'nope'" in result.output
