"""Metal source the rewriter must take as Apple's compiler does: compile what
Metal compiles, reject what it rejects at the user's line, and never show
generated code in a diagnostic."""

import pytest
import torch

import metal_kernel
from metal_kernel import MetalCompileError

ACCEPTED = r"""
#include <metal_stdlib>
using namespace metal;
#define TILE 16

// Two kernel templates with the same name, told apart by their parameters.
template <typename T>
kernel void fill(device T* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  o[i] = T(7);
}
template <typename T>
kernel void fill(device T* o [[buffer(0)]], constant T& v [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  o[i] = v;
}
template [[host_name("fill_seven")]] kernel void fill<float>(device float*, uint);
template [[host_name("fill_value")]] kernel void fill<float>(device float*, constant float&, uint);

// Template arguments deduced from the instantiation's parameter types.
template <typename T>
kernel void negate(device T* o [[buffer(0)]], device const T* x [[buffer(1)]],
                   uint i [[thread_position_in_grid]]) {
  o[i] = -x[i];
}
template [[host_name("negate_int")]] kernel void negate(device int*, device const int*, uint);

// A vector template's comma inside a threadgroup declaration, and a
// threadgroup array with an initializer (Metal accepts it).
template <typename T>
kernel void pairs(device T* o [[buffer(0)]], uint l [[thread_position_in_threadgroup]]) {
  threadgroup vec<T, 2> buf[TILE];
  threadgroup T zeros[TILE] = {0};
  buf[l] = vec<T, 2>(T(l), T(2 * l));
  zeros[l] = T(1);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  o[l] = buf[TILE - 1 - l].y + zeros[l];
}
template [[host_name("pairs_float")]] kernel void pairs<float>(device float*, uint);

// A threadgroup array sized by a name local to the kernel.
kernel void local_size(device float* o [[buffer(0)]], uint l [[thread_position_in_threadgroup]]) {
  constexpr uint n = 8;
  threadgroup float s[n * 2];
  s[l] = float(l);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  o[l] = s[n * 2 - 1 - l];
}

// A function constant declared with every specifier Metal allows.
static constant constexpr const bool use_offset [[function_constant(0)]];
kernel void offset(device int* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  o[i] = int(i) + (use_offset ? 100 : 0);
}

// An array parameter is a pointer: it needs an address space, not an attribute.
kernel void strided(device float* o [[buffer(0)]], constant const long strides[2],
                    uint i [[thread_position_in_grid]]) {
  o[i] = float(strides[0] * long(i) + strides[1]);
}

// A macro in #pragma unroll(...).
kernel void unrolled(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float acc = 0;
#pragma unroll(TILE / 4)
  for (int k = 0; k < TILE; ++k) acc += float(k);
  o[i] = acc;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(ACCEPTED, function_constants={"use_offset": True})


def test_kernel_templates_with_the_same_name_are_told_apart_by_their_parameters(lib, poison):
    a, b = poison(4), poison(4)
    lib.fill_seven(a)
    lib.fill_value(b, 2.5)
    assert a.tolist() == [7.0] * 4 and b.tolist() == [2.5] * 4


def test_instantiation_with_deduced_template_arguments(lib, poison):
    out = poison(5, torch.int32)
    lib.negate_int(out, torch.arange(5, dtype=torch.int32))
    assert out.tolist() == [0, -1, -2, -3, -4]


def test_threadgroup_vector_template_with_a_comma_and_an_initializer(lib, poison):
    out = poison(16)
    lib.pairs_float(out, group_size=16)
    assert out.tolist() == [2.0 * (15 - i) + 1 for i in range(16)]
    assert lib.pairs_float.static_thread_group_memory_length == 16 * 8 + 16 * 4


def test_threadgroup_array_sized_by_a_kernel_local_name(lib, poison):
    out = poison(16)
    lib.local_size(out, group_size=16)
    assert out.tolist() == [float(15 - i) for i in range(16)]
    assert lib.local_size.static_thread_group_memory_length == 64


def test_static_constexpr_function_constant(lib, poison):
    out = poison(3, torch.int32)
    lib.offset(out)
    assert out.tolist() == [100, 101, 102]


def test_array_parameter_is_a_buffer(lib, poison):
    out = poison(3)
    lib.strided(out, [2, 1])
    assert out.tolist() == [1.0, 3.0, 5.0]


def test_macro_inside_pragma_unroll(lib, poison):
    out = poison(2)
    lib.unrolled(out)
    assert out.tolist() == [120.0, 120.0]


@pytest.mark.parametrize("name", ["transpose", "max", "exp", "r", "t", "g", "x", "y", "z", "lin"])
def test_kernel_names_that_shadow_library_or_generated_names(name, poison):
    lib = metal_kernel.compile_shader(
        "#include <metal_stdlib>\nusing namespace metal;\n"
        f"kernel void {name}(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) "
        "{ o[i] = exp(float(i)) > 0 ? max(float(i), 1.0f) : 0; }")
    out = poison(3)
    getattr(lib, name)(out)
    assert out.tolist() == [1.0, 1.0, 2.0]


def _error(source: str) -> MetalCompileError:
    with pytest.raises(MetalCompileError) as info:
        metal_kernel.compile_shader(source)
    return info.value


def test_generated_code_never_appears_in_a_diagnostic():
    e = _error("kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) "
               "{ o[i] = not_declared; }")
    text = str(e) + e.compiler_output
    assert e.lineno == 1 and "not_declared" in text
    assert "__mk" not in text and "::mk::" not in text and "run_threads" not in text
    assert len(text) < 600


def test_the_users_first_error_is_shown_when_a_threadgroup_array_is_sized_locally():
    e = _error("kernel void k(device float* o [[buffer(0)]], uint l [[thread_position_in_threadgroup]]) {\n"
               "  constexpr uint n = 4;\n  threadgroup float s[n];\n  s[l] = 1;\n  o[l] = s[0] + oops;\n}\n")
    assert e.lineno == 5 and "oops" in str(e).split("\n")[0]
    assert "__mk" not in str(e) + e.compiler_output


def test_error_in_a_template_instantiation_points_at_the_template():
    e = _error("template <typename T>\nkernel void k(device T* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
               "  o[i] = T::missing;\n}\n"
               'template [[host_name("k_float")]] kernel void k<float>(device float*, uint);\n')
    assert e.lineno == 3
    assert "__mk" not in str(e) + e.compiler_output


@pytest.mark.parametrize("source, line, words", [
    ("kernel float k(device float* o [[buffer(0)]]) { return 1; }", 1, "must return void"),
    ("kernel void k(float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = 1; }", 1,
     "without an address space"),
    ("kernel void k(device float* o [[buffer(0)]],\n  uint n,\n  uint i [[thread_position_in_grid]]) { o[i] = n; }",
     2, "needs an attribute"),
    ("kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
     "  threadgroup_imageblock float x;\n}", 2, "'threadgroup_imageblock' is not supported"),
    ("kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
     "  ray_data float* p;\n}", 2, "'ray_data' is not supported"),
    ("kernel void k(object_data float* o [[buffer(0)]]) {}", 1, "'object_data' is not supported"),
], ids=["non-void-kernel", "pointer-without-address-space", "scalar-without-attribute",
        "threadgroup-imageblock", "ray-data", "object-data"])
def test_what_metal_rejects_is_rejected_at_the_users_line(source, line, words):
    e = _error(source)
    assert e.lineno == line and words in str(e)
