"""Products that share their left operand, paired in the whole-simdgroup
build (runtime/simdgroup_fuse.py): only where each result is provably
disjoint from what the other product reads, and with the bits of two
separate products."""

import os

import numpy as np
import pytest

import metal_kernel
from metal_kernel.runtime import simdgroup_fuse
from metal_kernel.runtime.compiler import workitem_enabled

# ------------------------------------------------------- the IR pass alone --

CALL = "call void @__mk_sgu_mma_f32"


def module(*body: str, params: str = "") -> str:
    allocas = [f"  %m{i} = alloca [1024 x i8], align 32" for i in range(6)]
    return "\n".join([f"define void @f({params}) {{", *allocas, *[f"  {b}" for b in body], "  ret void", "}",
                      "declare void @__mk_sgu_mma_f32(ptr noundef, ptr noundef, ptr noundef, ptr noundef)"])


def mma(d, a, b, c):
    return f"{CALL}(ptr noundef nonnull {d}, ptr noundef nonnull {a}, ptr noundef nonnull {b}, ptr {c}) #3"


def calls(text):
    return [line.strip() for line in text.split("\n") if "@__mk_sgu_mma_f32" in line and "call" in line]


def test_two_products_of_one_left_operand_become_a_pair():
    r = simdgroup_fuse.fuse(module(mma("%m0", "%m2", "%m3", "%m0"), mma("%m1", "%m2", "%m4", "%m1")))
    assert (r.pairs, r.singles) == (1, 0)
    assert calls(r.text) == [("call void @__mk_sgu_mma_f32_pair(ptr noundef nonnull %m0, ptr noundef nonnull %m1, "
                              "ptr noundef nonnull %m2, ptr noundef nonnull %m3, ptr noundef nonnull %m4, "
                              "ptr %m0, ptr %m1) #3")]
    assert "declare void @__mk_sgu_mma_f32(" not in r.text


def test_pair_takes_the_second_calls_place():
    # The second call's operand is computed between the two calls.
    r = simdgroup_fuse.fuse(module(mma("%m0", "%m2", "%m3", "null"),
                                   "%g = getelementptr inbounds nuw i8, ptr %m4, i64 256",
                                   mma("%m1", "%m2", "%g", "null")))
    assert r.pairs == 1
    lines = [ln.strip() for ln in r.text.split("\n")]
    assert lines.index("%g = getelementptr inbounds nuw i8, ptr %m4, i64 256") < \
        next(i for i, ln in enumerate(lines) if "_pair(" in ln)


@pytest.mark.parametrize("second, why", [
    (mma("%m1", "%m2", "%m0", "%m1"), "reads the first result as b"),
    (mma("%m1", "%m2", "%m4", "%m0"), "reads the first result as c"),
    (mma("%m2", "%m2", "%m4", "%m1"), "overwrites a"),
    (mma("%m0", "%m2", "%m4", "%m1"), "writes the same result"),
    (mma("%m1", "%m3", "%m4", "%m1"), "another left operand"),
    (mma("%m1", "%m2", "%p", "%m1"), "b from outside the stack"),
    (mma("%g", "%m2", "%m4", "%g"), "a result overlapping the first"),
])
def test_products_that_could_see_each_other_stay_apart(second, why):
    r = simdgroup_fuse.fuse(module(mma("%m0", "%m2", "%m3", "%m0"),
                                   "%g = getelementptr inbounds nuw i8, ptr %m0, i64 128", second,
                                   params="ptr %p"))
    assert (r.pairs, r.singles) == (0, 2), why
    assert all("_one(" in c for c in calls(r.text))


@pytest.mark.parametrize("between", [
    "store i32 0, ptr %m5, align 4",
    "%v = load i32, ptr %m5, align 4",
    "call void @g()",
    "br label %next",
])
def test_memory_or_control_flow_between_keeps_products_apart(between):
    r = simdgroup_fuse.fuse(module(mma("%m0", "%m2", "%m3", "%m0"), between, mma("%m1", "%m2", "%m4", "%m1")))
    assert (r.pairs, r.singles) == (0, 2)


def test_matrices_of_one_array_pair_when_a_matrix_apart():
    gep = "getelementptr inbounds nuw i8, ptr %m0"
    r = simdgroup_fuse.fuse(module(f"%x = {gep}, i64 256", f"%y = {gep}, i64 512",
                                   mma("%x", "%m2", "%m3", "%x"), mma("%y", "%m2", "%m4", "%y"),
                                   f"%z = {gep}, i64 640",
                                   mma("%y", "%m1", "%m3", "%y"), mma("%z", "%m1", "%m4", "%z")))
    assert (r.pairs, r.singles) == (1, 2)  # %y and %z overlap by 128 bytes


def test_three_products_of_one_operand_pair_the_first_two():
    r = simdgroup_fuse.fuse(module(mma("%m0", "%m2", "%m3", "null"), mma("%m1", "%m2", "%m3", "null"),
                                   mma("%m4", "%m2", "%m3", "null")))
    assert (r.pairs, r.singles) == (1, 1)


def test_a_use_the_pass_does_not_understand_is_an_error():
    text = module("store ptr @__mk_sgu_mma_f32, ptr %m5, align 8")
    with pytest.raises(ValueError, match="still referenced"):
        simdgroup_fuse.fuse(text)


# ------------------------------------------------ kernels, against fibers --

SOURCE = r"""
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// Products one after the other with one left operand, where pairing them
// would be wrong, then two where it is right. Every matrix is stored.
kernel void chains(device const float* A [[buffer(0)]], device float* C [[buffer(1)]],
                   uint sg [[simdgroup_index_in_threadgroup]]) {
  device const float* in = A + 192 * sg;
  device float* out = C + 640 * sg;
  simdgroup_float8x8 a, b, c, x, y, p, q;
  simdgroup_load(a, in);
  simdgroup_load(b, in + 64);
  simdgroup_load(c, in + 128);
  simdgroup_multiply_accumulate(x, a, b, c);
  simdgroup_multiply_accumulate(y, a, x, c);  // reads x
  simdgroup_multiply_accumulate(x, a, y, x);  // reads y
  simdgroup_multiply_accumulate(y, a, c, x);  // its c is x
  simdgroup_multiply_accumulate(a, a, b, c);  // overwrites a
  simdgroup_multiply(p, a, x);                // p, q: a pair
  simdgroup_multiply(q, a, y);
  simdgroup_float8x8 m[3];
  for (int i = 0; i < 3; ++i) m[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.5f);
  for (int i = 0; i < 3; ++i) simdgroup_multiply_accumulate(m[i], b, i == 1 ? p : q, m[i]);  // m[0], m[1]: a pair
  simdgroup_store(a, out);
  simdgroup_store(b, out + 64);
  simdgroup_store(c, out + 128);
  simdgroup_store(x, out + 192);
  simdgroup_store(y, out + 256);
  simdgroup_store(p, out + 320);
  simdgroup_store(q, out + 384);
  for (int i = 0; i < 3; ++i) simdgroup_store(m[i], out + 448 + 64 * i);
}
"""


def reference(A):
    """float64 model of `chains` for one simdgroup's inputs."""
    a, b, c = (A[64 * k:64 * (k + 1)].astype(np.float64).reshape(8, 8) for k in range(3))
    x = a @ b + c
    y = a @ x + c
    x = a @ y + x
    y = a @ c + x
    a = a @ b + c
    p, q = a @ x, a @ y
    m = [np.full((8, 8), 0.5) + b @ (p if i == 1 else q) for i in range(3)]
    return np.concatenate([v.ravel() for v in (a, b, c, x, y, p, q, *m)])


@pytest.mark.skipif(not workitem_enabled(), reason="work-item loops are off")
@pytest.mark.parametrize("isa", ["native", "avx2"])
def test_kernel_pairs_only_disjoint_products_with_the_bits_of_fibers(isa, monkeypatch, build_for_avx2, fiber_lib):
    if isa == "avx2":
        build_for_avx2()  # the 16-register pair (four rows of each result at a time)
    seen = []
    fuse = simdgroup_fuse.fuse

    def counting(text):
        r = fuse(text)
        seen.append((r.pairs, r.singles))
        return r
    monkeypatch.setattr(simdgroup_fuse, "fuse", counting)
    # A new program (a constant, not a comment: comments are preprocessed away
    # before the cache key), so that it is compiled here.
    lib = metal_kernel.compile_shader(SOURCE + f"constant int token_{os.urandom(8).hex()} = 0;\n")
    assert lib.chains.whole_simdgroup
    assert seen == [(2, 6)]  # (p, q) and (m[0], m[1]); the five before and m[2] alone

    A = np.random.default_rng(0).uniform(-0.5, 0.5, 2 * 192).astype(np.float32)
    outs = []
    for lb in (lib, fiber_lib):
        C = np.full(2 * 640, np.nan, np.float32)
        lb.chains(A, C, threads=64, group_size=64)
        outs.append(C)
    for sg in range(2):
        np.testing.assert_allclose(outs[0][640 * sg:640 * (sg + 1)], reference(A[192 * sg:]), rtol=1e-4, atol=1e-4)
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
