"""The work-item loops' thread loops are marked parallel for LLVM
(emit_loop.parallel_loop, rewrite_module._number_loop_metadata): every
memory access of a region's loop is in its kernel's access group, and the
loop's metadata names that group in llvm.loop.parallel_accesses. Without
it the vectoriser guarded 16-thread rows with run-time checks and ran them
scalar on AVX2."""

import re
import uuid

import numpy as np
import pytest

from metal_kernel.runtime.compiler import workitem_enabled
from metal_kernel.runtime.workitem.rewrite_module import _number_loop_metadata

TRANSPOSE = r"""
#include <metal_stdlib>
using namespace metal;
constant int token_TOKEN = 0;  // a new program each run (a comment would be preprocessed away)
// out = in^T through a 16x16 tile in threadgroup memory (n a multiple of 16).
kernel void transpose_tiled(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                            constant uint& n [[buffer(2)]], uint2 tg [[threadgroup_position_in_grid]],
                            uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float tile[16][17];
  tile[lid.y][lid.x] = in[(tg.y * 16 + lid.y) * n + tg.x * 16 + lid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[(tg.x * 16 + lid.y) * n + tg.y * 16 + lid.x] = tile[lid.x][lid.y];
}
"""


def test_placeholders_become_nodes_after_the_modules_own():
    text = ("define void @f() {\n  call void @g(), !llvm.access.group !mk.ag.3\n"
            "  br label %x, !llvm.loop !mk.lp.3.0.i\n  br label %y, !llvm.loop !mk.lp.3.1.c\n}\n"
            "!7 = !{!\"x\"}\n")
    out = _number_loop_metadata(text)
    assert "!mk." not in out
    assert "!llvm.access.group !8" in out  # numbered after !7, the group first
    assert "!8 = distinct !{}" in out
    for loop in re.findall(r"!llvm\.loop !(\d+)", out):
        node = re.search(rf"^!{loop} = distinct !{{!{loop}, !(\d+), !(\d+)}}$", out, re.MULTILINE)
        assert node, f"loop node !{loop} is not self-referential"
        assert f'!{node.group(1)} = !{{!"llvm.loop.parallel_accesses", !8}}' in out
        assert f'!{node.group(2)} = !{{!"llvm.loop.vectorize.enable", i1 true}}' in out


def test_text_without_placeholders_is_unchanged():
    text = "define void @f() {\n  ret void\n}\n!0 = !{}\n"
    assert _number_loop_metadata(text) == text


@pytest.mark.skipif(not workitem_enabled(), reason="work-item loops are off")
def test_thread_loops_of_a_real_kernel_are_parallel(compile_with_ir):
    lib, text = compile_with_ir(TRANSPOSE.replace("TOKEN", uuid.uuid4().hex))  # a new source: compiled here
    assert lib.transpose_tiled.execution_mode == "workitem-loops"
    loops = re.findall(r"^define internal \{ i64, i64 \} @__mk_wiloop_\d+\(.*?^}$", text, re.MULTILINE | re.DOTALL)
    assert loops
    for body in loops:
        calls = re.findall(r"call i32 @__mk_wistep_\S+\(.*", body)
        stores = [ln for ln in body.splitlines() if "store i32 %r" in ln]
        assert calls and all("!llvm.access.group !" in ln for ln in calls + stores)
        groups = {re.search(r"!llvm\.access\.group !(\d+)", ln).group(1) for ln in calls + stores}
        assert len(groups) == 1
        (group,) = groups
        for loop in re.findall(r"!llvm\.loop !(\d+)", body):
            node = re.search(rf"^!{loop} = distinct !{{!{loop}, !(\d+)", text, re.MULTILINE)
            assert f'!{node.group(1)} = !{{!"llvm.loop.parallel_accesses", !{group}}}' in text
    # and it still transposes (output poisoned first)
    n = 48
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    out = np.full((n, n), np.nan, np.float32)
    lib.transpose_tiled(a, out, n, threadgroups=[n // 16, n // 16], group_size=[16, 16], arg_casts={2: "int32"})
    np.testing.assert_array_equal(out, a.T)


def test_jammed_loops_get_the_interleave_count():
    """emit_loop._jammed_rows' loops (placeholder suffix .j): an interleave
    count where pass2 asks for one (AVX2), and none on the other loops."""
    text = ("define void @f() {\n  br label %x, !llvm.loop !mk.lp.3.0.i\n  br label %y, !llvm.loop !mk.lp.3.0.j\n}\n"
            "  call void @g(), !llvm.access.group !mk.ag.3\n")
    out = _number_loop_metadata(text, jam_interleave=2)
    (inner,) = re.findall(r"br label %x, !llvm\.loop !(\d+)", out)
    (jam,) = re.findall(r"br label %y, !llvm\.loop !(\d+)", out)
    jam_node = re.search(rf"^!{jam} = distinct !{{(.*)}}$", out, re.MULTILINE).group(1).split(", ")
    inner_node = re.search(rf"^!{inner} = distinct !{{(.*)}}$", out, re.MULTILINE).group(1).split(", ")
    count = [n for n in jam_node[1:] if f'{n} = !{{!"llvm.loop.interleave.count", i32 2}}' in out]
    assert len(count) == 1 and len(jam_node) == 4
    assert len(inner_node) == 3 and "llvm.loop.interleave.count" not in "".join(
        ln for ln in out.splitlines() if ln.split(" = ")[0] in inner_node)
    assert "interleave" not in _number_loop_metadata(text)  # 1: no hint
