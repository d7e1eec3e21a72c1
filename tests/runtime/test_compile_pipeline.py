"""How libraries are built: large files kernel by kernel on first use, with
errors still at compile_shader time; whether a kernel synchronises decided
from its compiled code, so only kernels that do go through the work-item
pass."""

import json

import pytest
import torch

import metal_kernel
from metal_kernel.runtime import compiler, workitem

# 2 x 12 instantiations: more than compiler.EAGER_KERNELS.
LARGE = r"""
#include <metal_stdlib>
using namespace metal;
template <typename T, int K>
kernel void add_k(device T* o [[buffer(0)]], device const T* x [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  o[i] = x[i] + T(K);
}
template <typename T, int K>
kernel void sum_k(device T* o [[buffer(0)]], device const T* x [[buffer(1)]],
                  uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  T s = simd_sum(x[i]);
  if (lane == 0) o[i / 32] = s + T(K);
}
#define INST(T, K) \
  template [[host_name("add_" #T "_" #K)]] kernel void add_k<T, K>(device T*, device const T*, uint); \
  template [[host_name("sum_" #T "_" #K)]] kernel void sum_k<T, K>(device T*, device const T*, uint, uint);
#define INST6(T) INST(T, 0) INST(T, 1) INST(T, 2) INST(T, 3) INST(T, 4) INST(T, 5)
INST6(float)
INST6(int)
"""


ADD_LINE = LARGE.splitlines().index("  o[i] = x[i] + T(K);") + 1
SUM_LINE = LARGE.splitlines().index("  if (lane == 0) o[i / 32] = s + T(K);") + 1


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    return tmp_path / "objects"


def _kernel_libraries(objects):
    return sorted(p.name for p in objects.glob("*.k*.so"))


def test_a_large_file_lists_every_kernel_and_compiles_none_until_used(cache):
    assert 24 > compiler.EAGER_KERNELS
    lib = metal_kernel.compile_shader(LARGE)
    assert len(dir(lib)) == 24 and "sum_int_5" in dir(lib)
    assert _kernel_libraries(cache) == []
    out = torch.full((64,), -1, dtype=torch.int32)
    lib.add_int_3(out, torch.arange(64, dtype=torch.int32))
    assert out.tolist() == [i + 3 for i in range(64)]
    # one clang run for the kernel and the other instantiations of its
    # template (12 add_k, fewer than EAGER_KERNELS); sum_k's wait
    built = sorted(p.name for p in cache.glob("*.k*.json") if not p.name.endswith((".facts.json", ".check.json")))
    assert len(built) == 12
    assert all(lib._compiled.kernels[int(n.split(".k")[1].split(".")[0])].host_name.startswith("add_") for n in built)
    assert len({n.split(".k")[1].split("-")[0] for n in _kernel_libraries(cache)}) == 1  # one unit


def test_a_large_file_is_checked_kernel_by_kernel(cache):
    lib = metal_kernel.compile_shader(LARGE)
    out = torch.full((8,), -1.0)
    with metal_kernel.check() as report:
        lib.sum_float_2(out, torch.ones(256), threads=256)
    assert out[:8].tolist() == [34.0] * 8
    assert report.ok and report.dispatches == 1
    checked = list(cache.glob("*.check.json"))
    assert len(checked) == 1  # sum_k's instantiations only, with their own sites
    sites = json.loads(checked[0].read_text())["sites"]
    assert sites and {line for _file, line, *_ in sites} >= {SUM_LINE}
    # an access out of bounds in a lazily built checked kernel names its line
    with metal_kernel.check() as report:
        lib.add_float_1(torch.full((4,), float("nan")), torch.ones(8), threads=8)
    assert [f.kind for f in report.findings][:1] == ["oob"]
    assert report.findings[0].line.endswith(f":{ADD_LINE}")


def test_kernels_built_on_first_use_are_cached(cache):
    lib = metal_kernel.compile_shader(LARGE)
    out = torch.zeros(64)
    lib.sum_float_2(out, torch.ones(64), group_size=64)
    built = _kernel_libraries(cache)
    again = metal_kernel.compile_shader(LARGE)
    again.sum_float_2(out, torch.ones(64), group_size=64)
    assert _kernel_libraries(cache) == built
    assert out[:2].tolist() == [34.0, 34.0]


def test_errors_in_a_large_file_surface_at_compile_shader():
    bad = LARGE.replace("o[i] = x[i] + T(K);", "o[i] = x[i] + T(K) + missing_name;")
    with pytest.raises(metal_kernel.MetalCompileError) as info:
        metal_kernel.compile_shader(bad)
    assert info.value.lineno == ADD_LINE and "missing_name" in str(info.value)


def test_error_in_one_instantiation_of_a_large_file_surfaces_at_compile_shader():
    bad = LARGE.replace("o[i] = x[i] + T(K);", "static_assert(K != 4, \"K must not be 4\"); o[i] = x[i] + T(K);")
    with pytest.raises(metal_kernel.MetalCompileError, match="K must not be 4") as info:
        metal_kernel.compile_shader(bad)
    assert info.value.lineno == ADD_LINE


def test_synchronisation_is_decided_per_kernel_from_the_compiled_code(cache, monkeypatch):
    seen = []
    real = workitem.transform

    def spy(text, symbols, *a, **k):
        seen.append(list(symbols))
        return real(text, symbols, *a, **k)

    monkeypatch.setattr(workitem, "transform", spy)
    lib = metal_kernel.compile_shader(LARGE)
    assert lib.add_float_1.execution_mode == "direct"  # the file mentions simd_sum; this kernel never calls it
    assert seen == []  # a kernel that does not synchronise never reaches the work-item pass
    sync_mode = lib.sum_float_1.execution_mode
    assert sync_mode == ("workitem-loops" if compiler.workitem_enabled() else "fibers")
    assert len(seen) == (1 if compiler.workitem_enabled() else 0)


def test_small_file_mixing_direct_and_synchronising_kernels():
    lib = metal_kernel.compile_shader(r"""
    #include <metal_stdlib>
    using namespace metal;
    kernel void copy(device float* o [[buffer(0)]], device const float* x [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) { o[i] = x[i]; }
    kernel void total(device float* o [[buffer(0)]], device const float* x [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) { o[i] = simd_sum(x[i]); }
    """)
    a, b = torch.full((32,), float("nan")), torch.full((32,), float("nan"))
    lib.copy(a, torch.arange(32.0))
    lib.total(b, torch.ones(32))
    assert a.tolist() == list(range(32)) and b.tolist() == [32.0] * 32
    assert lib.copy.execution_mode == "direct"
    assert lib.total.execution_mode == ("workitem-loops" if compiler.workitem_enabled() else "fibers")


def test_pytorch_headers_do_not_make_a_kernel_synchronise():
    # c10/metal/common.h names `simdgroup_size`: a word, not a synchronising call.
    lib = metal_kernel.compile_shader(r"""
    #include <c10/metal/common.h>
    #include <c10/metal/utils.h>
    kernel void twice(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = 2 * i; }
    """)
    assert lib.twice.execution_mode == "direct"


def test_cli_lists_a_large_files_kernels_without_building_them(cache, tmp_path):
    import json

    from click.testing import CliRunner

    from metal_kernel.cli import main

    f = tmp_path / "large.metal"
    f.write_text(LARGE)
    r = CliRunner().invoke(main, ["compile", str(f), "--json"])
    assert r.exit_code == 0, r.output
    kernels = json.loads(r.output)["kernels"]
    assert len(kernels) == 24 and kernels[0]["static_thread_group_memory_length"] is None
    assert _kernel_libraries(cache) == []
