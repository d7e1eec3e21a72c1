"""The layout model of kernels/*.metal files, on the fixture files modeled on PyTorch's."""

import torch

from aten_tree import FIXTURES, KERNELS, TORCH
from metal_kernel.aten.model.metal_file import MetalFile, split_items, substitute
from metal_kernel.aten.verify.compile import op_source

C10_METAL = TORCH / "include/c10/metal"
UNARY = (FIXTURES / "tree" / KERNELS / "UnaryKernel.metal").read_text()
BINARY = (FIXTURES / "tree" / KERNELS / "BinaryKernel.metal").read_text()


def kernels_of(mf: MetalFile, family: str) -> list[tuple]:
    return sorted(l.args for _, leaves in mf.registrations() for l in leaves if l.belongs_to(family))


def test_items_carry_their_comments_and_names():
    items = split_items(UNARY)
    by_name = {it.name: it for it in items if it.kind == "definition"}
    assert by_name["angle_functor"].text.startswith("// Phase of a real number")
    assert by_name["angle_functor"].code_text.startswith("struct angle_functor {")
    assert by_name["exp_"].kind == "definition" and by_name["nan_to_num_value"].kind == "definition"
    assert [it.kind for it in items[:7]] == ["include"] * 5 + ["using"] * 2
    define = next(it for it in items if it.kind == "define")
    assert define.name == "INSTANTIATE_UNARY_KERNELS2" and define.last - define.code == 5
    erfinv = next(it for it in items if it.kind == "invocation" and it.name == "DEFINE_UNARY_FLOATING_FUNCTOR")
    assert erfinv.args == ["erfinv"]


def test_registrations_expand_the_files_own_macros_to_registerapi_calls():
    mf = MetalFile(UNARY, C10_METAL)
    exp = kernels_of(mf, "exp")  # only through INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1)
    assert exp == sorted([("exp", t, o) for o, t in [("bfloat", "bfloat"), ("half", "half"), ("float", "float")]]
                         + [("exp", t, "float") for t in ("bool", "uchar", "char", "short", "int", "long")])
    assert ("neg", "bfloat", "bfloat") in kernels_of(mf, "neg")
    assert kernels_of(mf, "nan_to_num")[0] == ("nan_to_num", "bfloat", "NanToNumParams_float", "bfloat")
    assert not kernels_of(mf, "erfinv_functor")  # a functor definition is not a registration


def test_per_op_macros_and_explicit_instantiations():
    mf = MetalFile(BINARY, C10_METAL)
    macros = {m.name: sorted((l.args[1], l.args[2]) for l in leaves)
              for m, leaves in mf.per_name_macros("REGISTER_BINARY_OP")}
    assert macros["REGISTER_FLOAT_BINARY_OP"] == [("bfloat", "bfloat"), ("float", "float"), ("half", "half")]
    assert len(macros["REGISTER_INTEGER_BINARY_OP"]) == 6 and len(macros["REGISTER_INT2FLOAT_BINARY_OP"]) == 6
    lerp = [l for _, leaves in mf.registrations() for l in leaves if l.host_names]
    assert [l.host_names for l in lerp] == [("lerp_tensor_dense_float",), ("lerp_tensor_dense_half",),
                                            ("lerp_tensor_dense_bfloat",)]
    assert lerp[0].belongs_to("lerp_tensor") and not lerp[0].belongs_to("lerp")


def test_substitute_stringizes_and_pastes():
    assert substitute('REGISTER_UNARY_OP(angle, DTYPE##2, #DTYPE)', ("DTYPE",), ["half"]) == \
        'REGISTER_UNARY_OP(angle, half2, "half")'


def test_op_source_keeps_lines_and_only_the_ops_instantiations():
    src = op_source(UNARY, C10_METAL, "exp", {"float", "long"})
    lines = src.text.splitlines()
    original = UNARY.splitlines()
    assert lines[:len(original)] == [l if not l.startswith(("REGISTER_", "INSTANTIATE_UNARY_KERNELS2("))
                                     else "" for l in original]  # same line numbers, registrations blanked
    assert lines[len(original):] == ["REGISTER_UNARY_OP(exp, float, float);", "REGISTER_UNARY_OP(exp, long, float);"]
    assert set(src.leaves) == {len(original) + 1, len(original) + 2}
    assert "#define INSTANTIATE_UNARY_KERNELS2" in src.text  # definitions stay: they cost nothing


def test_op_source_of_a_binary_op_expands_its_per_op_macros():
    src = op_source(BINARY, C10_METAL, "copysign")
    appended = src.text.splitlines()[len(BINARY.splitlines()):]
    assert appended[:3] == ["REGISTER_BINARY_OP(copysign, float, float);", "REGISTER_BINARY_OP(copysign, half, half);",
                            "REGISTER_BINARY_OP(copysign, bfloat, bfloat);"]
    assert len(appended) == 9 and all("copysign" in l for l in appended)
    assert "INSTANTIATE_LERP(float);" not in src.text and "REGISTER_COMPARISON_OP(lt);" not in src.text


def test_every_header_macro_of_the_installed_torch_is_read():
    mf = MetalFile("", C10_METAL)
    assert mf.macros["REGISTER_UNARY_OP"].params == ("NAME", "DTYPE0", "DTYPE1")
    assert mf.macros["REGISTER_UNARY_OP"].is_registration_api
    assert not mf.macros["DEFINE_UNARY_FLOATING_FUNCTOR"].is_registration_api
    assert torch.__version__  # the headers are the wheel's own
