"""Interleaving the floating-point chains of the loop functions' blocks
(runtime/workitem/interleave.py).

On hand-written loop-function IR: the chains interleave, the memory order
that matters stays (a load after a store to the same slot field, anything
through loaded pointers, calls), blocks it must not touch stay as they are,
and clang accepts what comes out. On kernels: built with the pass and with
METAL_KERNEL_INTERLEAVE=0, poisoned outputs checked against numpy and the
two builds bit for bit, and the pass seen to reorder something."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import metal_kernel
from metal_kernel.runtime.toolchain import find_toolchain
from metal_kernel.runtime.workitem import interleave
from metal_kernel.runtime.workitem.interleave import MIN_CHAIN, interleave_module

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "perf"))
import kernels  # benchmarks/perf

HEAD = """%mk.slots.0 = type { [1040 x float], [1040 x i32], [1040 x float] }

declare float @llvm.fmuladd.f32(float, float, float)
declare void @opaque(ptr)
"""


def loop_fn(body: str) -> str:
    """A module with one loop function whose entry block is `body`."""
    return (HEAD + "\ndefine internal { i64, i64 } @__mk_wiloop_0(ptr noalias readonly %g, ptr noalias %slots, "
            "ptr noalias %stage, ptr %frames, ptr noalias %states, i32 %b, i32 %e, i32 %resume, "
            "ptr noalias readonly %spans, i32 %nspans) {\nentry:\n" + body + "  ret { i64, i64 } zeroinitializer\n}\n")


def chains(rows: int = 2, k: int = MIN_CHAIN, between: str = "") -> str:
    """`rows` rows in sequence, each loading its accumulator from slot field
    2, a chain of `k` fmuladds with operands through a loaded pointer, and a
    store of the result to slot field 0; `between` goes between the rows."""
    out = ["  %tg = load ptr, ptr %g, align 8"]
    for r in range(rows):
        out.append(f"  %acc.p{r} = getelementptr inbounds %mk.slots.0, ptr %slots, i64 0, i32 2, i64 {r}")
        out.append(f"  %a{r}.0 = load float, ptr %acc.p{r}, align 4")
        for j in range(k):
            out.append(f"  %x{r}.{j}.p = getelementptr inbounds float, ptr %tg, i64 {r * k + j}")
            out.append(f"  %x{r}.{j} = load float, ptr %x{r}.{j}.p, align 4")
            out.append(f"  %a{r}.{j + 1} = call float @llvm.fmuladd.f32(float %x{r}.{j}, float %x{r}.{j}, "
                       f"float %a{r}.{j})")
        out.append(f"  %out.p{r} = getelementptr inbounds %mk.slots.0, ptr %slots, i64 0, i32 0, i64 {r}")
        out.append(f"  store float %a{r}.{k}, ptr %out.p{r}, align 4")
        if between and r + 1 < rows:
            out.append(between)
    return "\n".join(out) + "\n"


def fma_rows(text: str) -> list[int]:
    """The row of each fmuladd, in the order they appear."""
    return [int(m.group(1)) for m in re.finditer(r"%a(\d+)\.\d+ = call float @llvm\.fmuladd", text)]


def position(text: str, needle: str) -> int:
    assert needle in text, needle
    return text.index(needle)


def test_rows_interleave():
    out, changed = interleave_module(loop_fn(chains()))
    assert changed == 1
    assert fma_rows(out) == [0, 1] * MIN_CHAIN  # the k-th of every row before the (k+1)-th of any


def test_row_one_starts_before_row_zero_stores():
    """Row 1's accumulator (slot field 2) is loaded before row 0's result is
    stored (field 0): different fields cannot overlap."""
    out, _ = interleave_module(loop_fn(chains()))
    assert position(out, "%a1.0 = load") < position(out, "store float %a0.")


def test_a_load_after_a_store_to_the_same_field_stays_after_it():
    body = chains().replace("i32 2, i64 1", "i32 0, i64 1")  # row 1 reads the field row 0 writes
    out, changed = interleave_module(loop_fn(body))
    assert position(out, "store float %a0.") < position(out, "%a1.0 = load")
    assert changed == 0 or fma_rows(out)[:MIN_CHAIN] == [0] * MIN_CHAIN


def test_loads_through_loaded_pointers_stay_behind_stores_through_them():
    """Row 1's operands come through the same loaded pointer row 0 stores
    through: they may be the same memory."""
    store = "  store float %a0.8, ptr %tg, align 4"
    out, _ = interleave_module(loop_fn(chains(between=store)))
    at = position(out, store.strip())
    assert all(position(out, f"%x1.{j} = load") > at for j in range(MIN_CHAIN))


def test_a_call_keeps_memory_on_its_side():
    call = "  call void @opaque(ptr %tg)"
    out, _ = interleave_module(loop_fn(chains(between=call)))
    at = position(out, call.strip())
    assert position(out, "store float %a0.") < at < position(out, "%a1.0 = load")


def test_one_chain_or_short_chains_are_left_alone():
    for text in (loop_fn(chains(rows=1)), loop_fn(chains(k=MIN_CHAIN - 1))):
        out, changed = interleave_module(text)
        assert changed == 0 and out == text


def test_other_functions_are_left_alone():
    text = loop_fn(chains()).replace("@__mk_wiloop_0", "@some_kernel")
    assert interleave_module(text) == (text, 0)


def test_volatile_and_atomic_accesses_are_barriers():
    for extra in ("  %v = load volatile float, ptr %tg, align 4",
                  "  %v = load atomic float, ptr %tg monotonic, align 4"):
        out, _ = interleave_module(loop_fn(chains(between=extra)))
        at = position(out, extra.strip())
        assert position(out, "store float %a0.") < at < position(out, "%a1.0 = load")


def numbered(rows: int = 2) -> str:
    """chains() with its values numbered as clang prints them."""
    text = loop_fn(chains(rows))
    defs = re.findall(r"^  (%[-\w.]+) = ", text, re.MULTILINE)
    number = {name: f"%{i}" for i, name in enumerate(defs)}
    return re.sub(r"%[-\w.]+", lambda m: number.get(m.group(0), m.group(0)), text)


def test_the_output_is_valid_ir(tmp_path):
    """Numbered values moved out of order get names; clang accepts the
    result (and rejects the reordered text without the renaming)."""
    text = numbered()
    out, changed = interleave_module(text)
    assert changed == 1 and "%mk.il." in out
    tc = find_toolchain()

    def compiles(ir: str) -> bool:
        path = tmp_path / "m.ll"
        path.write_text(ir)
        proc = subprocess.run(tc.cxx("-c", "-O0", "-w", str(path), "-o", str(tmp_path / "m.o")),
                              check=False, capture_output=True, text=True)
        return proc.returncode == 0

    assert compiles(text)
    assert compiles(out)
    assert not compiles(re.sub(r"%mk\.il\.(\d+)", r"%\1", out))


# ----------------------------------------------------------------- kernels --
# The benchmark's matmul_tiled (16x16 tiles, one accumulator per thread),
# and a matmul with two accumulators.
_MATMUL = kernels.MSL[kernels.MSL.index("// C = A * B"):kernels.MSL.index("// simd_sum within")]
KERNELS = "#include <metal_stdlib>\nusing namespace metal;\n" + _MATMUL + r"""
// Two accumulators, and the tile read back by a neighbour after the FMAs.
kernel void matmul_two_acc(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                           device float* C [[buffer(2)]], constant uint& N [[buffer(3)]],
                           uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[16][16];
  threadgroup float Bs[16][16];
  const uint row = gid.y, col = gid.x;
  float even = 0.0f, odd = 0.0f;
  for (uint t = 0; t < N; t += 16) {
    As[lid.y][lid.x] = A[row * N + t + lid.x];
    Bs[lid.y][lid.x] = B[(t + lid.y) * N + col];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 16; k += 2) {
      even += As[lid.y][k] * Bs[k][lid.x];
      odd += As[lid.y][k + 1] * Bs[k + 1][lid.x];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  C[row * N + col] = even + odd;
}
"""


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The kernels with the pass and without, and how many blocks it reordered."""
    counts = []
    original = interleave.interleave_module

    def spy(text):
        out, changed = original(text)
        counts.append(changed)
        return out, changed

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(interleave, "interleave_module", spy)  # pass2 imports it at each build
        tmp = tmp_path_factory.mktemp("interleave")
        libs = {}
        for value in ("1", "0"):
            mp.setenv("METAL_KERNEL_CACHE_DIR", str(tmp / value))
            mp.setenv("METAL_KERNEL_INTERLEAVE", value)
            libs[value] = metal_kernel.compile_shader(KERNELS)
            assert libs[value].matmul_tiled is not None  # built now, with the setting in force
    finally:
        mp.undo()
    return libs["1"], libs["0"], sum(counts)


def test_the_pass_reorders_the_matmul(builds):
    assert builds[2] >= 1


@pytest.mark.parametrize("name", ["matmul_tiled", "matmul_two_acc"])
@pytest.mark.parametrize("n", [16, 48, 128])
def test_same_bits_with_and_without(builds, name, n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    outs = []
    for lib in builds[:2]:
        out = np.full((n, n), np.nan, np.float32)
        getattr(lib, name)(a, b, out, n, threads=[n, n], group_size=[16, 16], arg_casts={3: "int32"})
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(n))
        outs.append(out)
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
