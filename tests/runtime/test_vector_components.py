"""Named vector components are lvalues everywhere, as in Metal: compound
assignment to `idx.x` inside a template compiles even when an `operator+=`
template is in scope (MLX's copy/binary/ternary kernels next to complex.h)."""

import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
template <typename T> struct cplx { T re, im; };
template <typename T> thread cplx<T>& operator+=(thread cplx<T>& a, cplx<T> b) { a.re += b.re; a.im += b.im; return a; }
template <typename T> thread cplx<T>& operator-=(thread cplx<T>& a, cplx<T> b) { a.re -= b.re; a.im -= b.im; return a; }

template <typename IdxT>
METAL_FUNC vec<IdxT, 2> walk(uint3 e, IdxT s) {
  vec<IdxT, 2> loc = {IdxT(e.x), IdxT(e.y)};
  loc.x += s;
  loc.y -= s;
  auto idx = loc;
  idx.x *= IdxT(2);
  idx.y += IdxT(100);
  idx.r -= IdxT(1);
  packed_vec<IdxT, 2> p = idx;
  p.y += IdxT(1000);
  IdxT* first = &idx.x;
  *first += IdxT(10);
  return vec<IdxT, 2>(idx.x, p.y);
}
kernel void components(device long2* out [[buffer(0)]], uint3 i [[thread_position_in_grid]]) {
  out[i.x] = walk<long>(uint3(i.x, 5, 0), 3);
}
"""


def test_compound_assignment_to_a_vector_component_in_a_template():
    lib = metal_kernel.compile_shader(SOURCE)
    out = torch.full((4, 2), -1, dtype=torch.int64)
    lib.components(out, threads=4)
    x = torch.arange(4)
    assert out[:, 0].tolist() == ((x + 3) * 2 - 1 + 10).tolist()
    assert out[:, 1].tolist() == [5 - 3 + 100 + 1000] * 4
