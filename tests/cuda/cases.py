"""The CUDA conformance set: one kernel file per rule (kernels/*.cu) and how
to launch it. Read by the GPU harness (golden/run_gpu.py, which saves what
an NVIDIA GPU computes) and by the CPU test (test_conformance.py, which
compares metal_kernel.port with it). Needs numpy only: no GPU, no torch.

Inputs come from a generator seeded by the case's name and are saved with
the outputs, so the CPU test runs on exactly the GPU's inputs. Outputs are
poisoned before each launch (NaN for floats, 0xA5 bytes for integers).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
GOLDEN = HERE / "golden"

# ------------------------------------------------------------ comparisons --
EXACT = ("exact",)  # the same bits (integers, warp results, correctly rounded ops)


def ULP(n):
    """Within n units in the last place of the GPU's value: CUDA's documented
    bound, plus 1 for the CPU's own C library (a bound of 0, IEEE's correctly
    rounded operations, stays exact). A list gives each column of an output
    written as out[i * len(n) + k] its own bound."""
    return ("ulp", tuple(float(x) for x in n) if isinstance(n, (list, tuple)) else (float(n),))


def CLOSE(rtol: float, atol: float = 0.0):
    """Sums whose order differs between the GPU and the CPU."""
    return ("close", rtol, atol)


# -------------------------------------------------------------- arguments --
@dataclass
class In:
    name: str
    dtype: str  # numpy dtype name, or "bfloat16" (stored as uint16)
    n: int
    gen: tuple = ("uniform", -1.0, 1.0)


@dataclass
class Out:
    name: str
    dtype: str
    n: int
    compare: tuple = EXACT


@dataclass
class InOut:
    name: str
    dtype: str
    n: int
    gen: tuple = ("uniform", -1.0, 1.0)
    compare: tuple = EXACT


@dataclass
class Scalar:
    dtype: str  # numpy dtype of the parameter (bool, int8, ..., float64)
    value: object


@dataclass
class Struct:
    data: bytes  # the struct's bytes, as the kernel declares it


@dataclass
class Case:
    name: str
    file: str
    kernel: str  # as CUDA spells it (`scale<float>`)
    args: list
    grid: tuple = (1, 1, 1)
    block: tuple = (32, 1, 1)
    shared_mem: int = 0
    constants: dict = field(default_factory=dict)  # name -> (dtype, values), set before the launch
    printf: bool = False  # compare what the kernel prints
    expect_error: str | None = None  # the launch fails; text the CPU's error contains
    gpu: bool = True  # False: a GPU would hang (deadlocks): CPU-only
    before: list = field(default_factory=list)  # (kernel, arg names, grid, block) launched first
    extra: list = field(default_factory=list)  # In arrays only the `before` launches take

    def seed(self) -> int:
        return zlib.crc32(self.name.encode())


def dims(v) -> tuple[int, int, int]:
    v = (v,) if isinstance(v, int) else tuple(v)
    return v + (1,) * (3 - len(v))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def bf16_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def storage_dtype(dtype: str):
    return np.uint16 if dtype == "bfloat16" else np.dtype(dtype)


def make_input(arg, rng: np.random.Generator) -> np.ndarray:
    kind, *p = arg.gen
    dt = arg.dtype
    if kind == "uniform":
        v = rng.uniform(p[0], p[1], arg.n)
    elif kind == "normal":
        v = rng.normal(0.0, p[0] if p else 1.0, arg.n)
    elif kind == "ints":
        v = rng.integers(p[0], p[1], arg.n, endpoint=False)
    elif kind == "arange":
        v = np.arange(arg.n) * (p[0] if p else 1) + (p[1] if len(p) > 1 else 0)
    elif kind == "values":
        v = np.resize(np.array(p[0], dtype=np.float32 if dt == "bfloat16" else dt), arg.n)
    elif kind == "bits":  # random bit patterns of the storage type
        st = storage_dtype(dt)
        return rng.integers(0, 256, arg.n * np.dtype(st).itemsize, dtype=np.uint8).view(st).copy()
    else:
        raise ValueError(kind)
    if dt == "bfloat16":
        return bf16_bits(np.asarray(v, dtype=np.float32))
    return np.asarray(v).astype(dt)


def poison(arg) -> np.ndarray:
    st = storage_dtype(arg.dtype)
    if np.dtype(st).kind == "f":
        return np.full(arg.n, np.nan, dtype=st)
    return np.full(arg.n * np.dtype(st).itemsize, 0xA5, dtype=np.uint8).view(st).copy()


def inputs(case: Case) -> dict[str, np.ndarray]:
    """Every array argument's initial contents (outputs poisoned)."""
    rng = np.random.default_rng(case.seed())
    out = {}
    for a in [*case.args, *case.extra]:
        if isinstance(a, (In, InOut)):
            out[a.name] = make_input(a, rng)
        elif isinstance(a, Out):
            out[a.name] = poison(a)
    return out


def outputs(case: Case) -> list:
    return [a for a in case.args if isinstance(a, (Out, InOut))]


# ----------------------------------------------------------------- compare --
def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in units in the last place of b (float32/float64/float16)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype == np.float16 or b.dtype == np.float16:
        spacing = np.spacing(np.abs(b.astype(np.float16))).astype(np.float64)
    else:
        spacing = np.spacing(np.abs(b)).astype(np.float64)
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return np.where(same, 0.0, diff / spacing)


def compare(arg, cpu: np.ndarray, gpu: np.ndarray) -> str | None:
    """None when the CPU's output matches the GPU's under the argument's rule,
    else what differs."""
    rule = arg.compare
    if cpu.shape != gpu.shape:
        return f"shape {cpu.shape} vs {gpu.shape}"
    if gpu.dtype != cpu.dtype and gpu.itemsize == cpu.itemsize:
        gpu = gpu.view(cpu.dtype)
    if arg.dtype == "bfloat16":  # compare as floats (NaN payloads are not specified)
        cpu, gpu = bf16_float(cpu), bf16_float(gpu)
    if rule[0] == "exact" or cpu.dtype.kind not in "f":
        bad = np.flatnonzero(cpu.view(f"u{cpu.itemsize}") != gpu.view(f"u{gpu.itemsize}"))
        if cpu.dtype.kind == "f":  # any NaN matches any NaN
            bad = bad[~(np.isnan(cpu[bad]) & np.isnan(gpu[bad]))]
    elif rule[0] == "ulp":
        bound = np.resize(np.array(rule[1]), len(cpu))
        bad = np.flatnonzero(ulp_distance(cpu, gpu) > np.where(bound > 0, bound + 1, 0))
    else:
        bad = np.flatnonzero(~np.isclose(cpu.astype(np.float64), gpu.astype(np.float64), rtol=rule[1],
                                         atol=rule[2], equal_nan=True))
    if len(bad) == 0:
        return None
    i = int(bad[0])
    return (f"{arg.name}: {len(bad)} of {len(cpu)} elements differ ({rule[0]}), first at [{i}]: "
            f"cpu {cpu[i]!r} gpu {gpu[i]!r}")



# ------------------------------------------------------------------- cases --
def _u(n, lo=-1.0, hi=1.0):
    return ("uniform", lo, hi)


def _ints(lo, hi):
    return ("ints", lo, hi)


SPECIAL_FLOATS = [0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 3.49999, -7.5, 1e10, -1e10, 3e9, 65504.0, 65520.0, 1e-8, -1e-8,
                  6e-5, 1.0009765625, 0.333333, 123.456, -0.0001, float("inf"), float("-inf"), float("nan"),
                  2147483520.0, -2147483904.0, 4294967040.0, 1e30, 7.0e-6, -65519.0, 0.1, -0.7, 99.99]

CASES = [
    # indices and launch
    Case("idx_1d", "idx_1d.cu", "idx_1d", [Out("out", "int32", 3 * 70), Scalar("int32", 200)], grid=3, block=70),
    Case("idx_3d", "idx_3d.cu", "idx_3d", [Out("out", "uint32", 4 * 2 * 3 * 2 * 4 * 3 * 2)],
         grid=(2, 3, 2), block=(4, 3, 2)),
    Case("warp_size", "warp_size.cu", "warp_size", [Out("out", "int32", 3 * 80)], block=80),
    # memory
    Case("shared_static", "shared_static.cu", "shared_static",
         [In("in", "float32", 256), Out("out", "float32", 256)], grid=2, block=128),
    Case("shared_2d", "shared_2d.cu", "shared_2d", [In("in", "float32", 32 * 32), Out("out", "float32", 32 * 32),
                                                    Scalar("int32", 32)], grid=(2, 2), block=(16, 16)),
    Case("extern_shared", "extern_shared.cu", "extern_shared",
         [In("in", "int32", 192, _ints(-50, 50)), Out("out", "int32", 192)], grid=3, block=64, shared_mem=64 * 4),
    Case("extern_shared_carve", "extern_shared_carve.cu", "extern_shared_carve",
         [In("a", "float32", 48), In("b", "int32", 48, _ints(-9, 9)), Out("out", "float32", 48), Scalar("int32", 48)],
         block=48, shared_mem=48 * 8),
    Case("constant_mem", "constant_mem.cu", "constant_mem", [In("x", "float32", 128), Out("y", "float32", 128, ULP(2))],
         grid=2, block=64, constants={"coef": ("float32", [0.5, -1.25, 2.0, 0.75]), "offset": ("int32", [3])}),
    Case("device_global", "device_global.cu", "device_global",
         [In("x", "float32", 128), Out("out", "float32", 128)], extra=[In("flags", "int32", 128, _ints(-3, 4))],
         grid=2, block=64,
         before=[("device_reset", [], 1, 1), ("device_count", ["flags"], 2, 64)]),
    Case("device_template", "device_template.cu", "device_template",
         [In("x", "float32", 64), In("k", "int32", 64, _ints(-60, 60)), Out("y", "float32", 64),
          Out("z", "int32", 64)], block=64),
    Case("kernel_template_f", "kernel_template.cu", "axpy<float, 1>",
         [In("x", "float32", 100), InOut("y", "float32", 100), Scalar("float32", 2.0), Scalar("int32", 100)],
         grid=2, block=64),
    Case("kernel_template_i", "kernel_template.cu", "axpy<int, 3>",
         [In("x", "int32", 100, _ints(-1000, 1000)), InOut("y", "int32", 100, _ints(-1000, 1000)),
          Scalar("int32", 5), Scalar("int32", 100)], grid=2, block=64),
    Case("kernel_template_d", "kernel_template.cu", "axpy<double, 2>",
         [In("x", "float64", 64), InOut("y", "float64", 64), Scalar("float64", -1.5), Scalar("int32", 64)],
         block=64),
    Case("restrict_ldg", "restrict_ldg.cu", "restrict_ldg",
         [In("x", "float32", 96), In("w", "float32", 4), Out("y", "float32", 96), Scalar("int32", 96)],
         grid=3, block=32),
    Case("launch_bounds", "launch_bounds.cu", "launch_bounds",
         [In("x", "int32", 256, _ints(-100, 100)), Out("y", "int32", 256)], grid=2, block=128),
    Case("shared_per_instantiation", "shared_per_instantiation.cu", "shared_per_instantiation",
         [In("x", "float32", 256), Out("out", "float32", 2, CLOSE(1e-5, 1e-5))], block=256),
    Case("struct_arg", "struct_arg.cu", "struct_arg",
         [In("x", "float32", 32), Out("y", "float32", 32),
          Struct(np.array([(1.5, 7, 0.25, -2)], dtype=np.dtype({"names": ["s", "i", "b", "t"],
                                                                "formats": ["<f4", "<i4", "<f8", "<i2"],
                                                                "offsets": [0, 4, 8, 16], "itemsize": 24})
                          ).tobytes())]),
    Case("vector_types", "vector_types.cu", "vector_types",
         [In("in", "float32", 4 * 32), Out("out", "float32", 4 * 32), Out("sizes", "int32", 8)]),
    Case("scalar_params", "scalar_params.cu", "scalar_params",
         [Out("out", "int64", 7), Scalar("int8", -100), Scalar("uint16", 65000), Scalar("uint64", 2**63 + 12345),
          Scalar("bool", True), Scalar("float32", 3.25), Scalar("float64", 0.123456789), Scalar("int32", -2**31)],
         block=1),
    # synchronisation
    Case("sync_tree", "sync_tree.cu", "sync_tree", [In("x", "int32", 512, _ints(-1000, 1000)), Out("out", "int32", 2)],
         grid=2, block=256),
    Case("sync_count", "sync_count.cu", "sync_count", [In("x", "int32", 192, _ints(-20, 100)), Out("out", "int32", 9)],
         grid=3, block=64),
    Case("syncwarp", "syncwarp.cu", "syncwarp", [In("x", "int32", 64, _ints(0, 1000)), Out("out", "int32", 64)],
         block=64),
    Case("syncwarp_sites", "syncwarp_sites.cu", "syncwarp_sites",
         [In("x", "int32", 32, _ints(0, 1000)), Out("out", "int32", 32)]),
    Case("threadfence", "threadfence.cu", "threadfence",
         [In("x", "float32", 256), Out("partial", "float32", 4, CLOSE(1e-5, 1e-5)),
          Out("total", "float32", 1, CLOSE(1e-5, 1e-5))], grid=4, block=64),
    # warp functions
    Case("shfl_idx", "shfl_idx.cu", "shfl_idx",
         [In("x", "float32", 64), Out("bcast", "float32", 64), Out("gather", "float32", 64)], block=64),
    Case("shfl_up_scan", "shfl_up_scan.cu", "shfl_up_scan", [In("x", "int32", 64, _ints(-50, 50)),
                                                            Out("out", "int32", 64)], block=64),
    Case("shfl_down_reduce", "shfl_down_reduce.cu", "shfl_down_reduce",
         [In("x", "int32", 64, _ints(-50, 50)), Out("out", "int32", 64), Out("raw", "int32", 64)], block=64),
    Case("shfl_xor_butterfly", "shfl_xor_butterfly.cu", "shfl_xor_butterfly",
         [In("x", "int32", 96, _ints(-50, 50)), Out("out", "int32", 96)], block=96),
    Case("shfl_width", "shfl_width.cu", "shfl_width", [In("x", "int32", 64, ("arange", 1, 0)),
                                                      Out("out", "int32", 8 * 64)], block=64),
    Case("shfl_partial_mask", "shfl_partial_mask.cu", "shfl_partial_mask",
         [In("x", "int32", 64, ("arange", 1, 0)), Out("out", "int32", 64)], block=64),
    Case("shfl_types", "shfl_types.cu", "shfl_types",
         [In("d", "float64", 32), In("l", "int64", 32, _ints(-2**62, 2**62)), In("h", "float16", 64),
          Out("od", "float64", 32), Out("ol", "int64", 32), Out("oh", "float16", 64)]),
    Case("vote_ballot", "vote_ballot.cu", "vote_ballot", [In("x", "int32", 64, _ints(-5, 5)), Out("out", "uint32", 128)], block=64),
    Case("vote_any_all", "vote_any_all.cu", "vote_any_all",
         [In("x", "int32", 64, _ints(0, 100)), Out("out", "int32", 256)], block=64),
    Case("active_mask", "active_mask.cu", "active_mask", [Out("out", "uint32", 128)], block=64),
    Case("warp_match_any", "warp_match_any.cu", "warp_match_any",
         [In("x", "int32", 64, _ints(0, 5)), In("f", "float32", 64, ("values", [0.5, -0.0, 0.0, 1.5, 0.5, 2.5])),
          Out("out", "uint32", 128)], block=64),
    Case("warp_match_all", "warp_match_all.cu", "warp_match_all",
         [In("x", "int32", 64, ("values", [7] * 40 + [105] * 24)), Out("out", "uint32", 256)], block=64),
    Case("reduce_sync", "reduce_sync.cu", "reduce_sync",
         [In("x", "int32", 64, _ints(-1000, 1000)), Out("out", "int32", 320)], block=64),
    Case("reduce_bits", "reduce_bits.cu", "reduce_bits",
         [In("x", "uint32", 64, ("bits",)), Out("out", "uint32", 192)], block=64),
    Case("shfl_exited_source", "shfl_exited_source.cu", "shfl_exited_source",
         [In("x", "int32", 64, ("arange", 1, 0)), InOut("out", "int32", 64, ("values", [-7]))], block=64),
    Case("its_converge", "its_converge.cu", "its_converge", [In("x", "int32", 64, ("arange", 1, 0)),
                                                            Out("out", "int32", 64)], block=64),
    Case("warp_deadlock", "warp_deadlock.cu", "warp_deadlock", [Out("out", "int32", 32)],
         expect_error="deadlock: __shfl_sync", gpu=False),
    # cooperative groups and cub
    Case("cg_block", "cg_block.cu", "cg_block", [In("x", "int32", 256, _ints(0, 100)), Out("out", "int32", 256)],
         grid=2, block=128),
    Case("cg_tile32", "cg_tile32.cu", "cg_tile32", [In("x", "int32", 96, _ints(-100, 100)),
                                                   Out("out", "int32", 5 * 96)], block=96),
    Case("cg_tile_small", "cg_tile_small.cu", "cg_tile_small",
         [In("x", "int32", 64, _ints(-100, 100)), Out("out", "int32", 6 * 64)], block=64),
    Case("cg_tile_vote", "cg_tile_vote.cu", "cg_tile_vote",
         [In("x", "int32", 64, _ints(0, 100)), Out("out", "uint32", 4 * 64)], block=64),
    Case("cg_scan", "cg_scan.cu", "cg_scan", [In("x", "int32", 64, _ints(-20, 20)), Out("out", "int32", 128)],
         block=64),
    Case("cub_block", "cub_block.cu", "cub_block",
         [In("x", "int32", 256, _ints(-100, 100)), Out("sums", "int32", 2), Out("scan", "int32", 256),
          Out("warp_sums", "int32", 8)], grid=2, block=128),
    # atomics
    Case("atomic_int", "atomic_int.cu", "atomic_int",
         [In("x", "int32", 1000, _ints(0, 1000)), InOut("hist", "int32", 16, ("values", [0])), Scalar("int32", 1000)],
         grid=8, block=128),
    Case("atomic_float", "atomic_float.cu", "atomic_float",
         [In("x", "float32", 512), InOut("sum", "float32", 1, ("values", [0.0]), CLOSE(1e-4, 1e-4)),
          InOut("dsum", "float64", 1, ("values", [0.0]), CLOSE(1e-12, 1e-12))], grid=4, block=128),
    Case("atomic_u64", "atomic_u64.cu", "atomic_u64",
         [In("x", "uint32", 256, _ints(0, 2**31)), InOut("out", "uint64", 3, ("values", [0, 0, 2**63]))],
         grid=2, block=128),
    Case("atomic_minmax", "atomic_minmax.cu", "atomic_minmax",
         [In("x", "int32", 256, _ints(-1000, 1000)), InOut("iout", "int32", 4, ("values", [0, 0, 0, -1])),
          InOut("uout", "uint32", 3, ("values", [2**32 - 1, 0, 1000])), InOut("lout", "int64", 2, ("values", [0, 0]))],
         grid=2, block=128),
    Case("atomic_inc_dec", "atomic_inc_dec.cu", "atomic_inc_dec",
         [InOut("counters", "uint32", 3, ("values", [0, 0, 0]))], grid=3, block=100),
    Case("atomic_cas", "atomic_cas.cu", "atomic_cas",
         [In("x", "float32", 256, _u(0, -100.0, 100.0)), InOut("out", "float32", 1, ("values", [-1e30])),
          InOut("counts", "uint16", 8, ("values", [0]))], grid=2, block=128),
    Case("atomic_bits", "atomic_bits.cu", "atomic_bits",
         [InOut("out", "uint32", 3, ("values", [0, 2**32 - 1, 0])), InOut("out64", "uint64", 1, ("values", [0]))],
         grid=2, block=100),
    Case("atomic_scopes", "atomic_scopes.cu", "atomic_scopes",
         [InOut("out", "int32", 2, ("values", [0, 0])), InOut("fout", "float32", 3, ("values", [0.0]))],
         grid=3, block=64),
    Case("atomic_half2", "atomic_half2.cu", "atomic_half2",
         [InOut("h", "float16", 8, ("values", [0.0])), InOut("b", "bfloat16", 8, ("values", [0.0])),
          InOut("hs", "float16", 2, ("values", [0.0]))], block=64),
    # numerics
    Case("half_convert", "half_convert.cu", "half_convert",
         [In("x", "float32", 32, ("values", SPECIAL_FLOATS)), Out("out", "float16", 128), Out("back", "float32", 32)]),
    Case("half_arith", "half_arith.cu", "half_arith",
         [In("a", "float16", 64, _u(0, -4.0, 4.0)), In("b", "float16", 64, _u(0, 0.5, 3.0)),
          # nvcc contracts a half multiply and add into one fma (-fmad=true),
          # the CPU rounds each: equal within half precision, not bit for bit.
          In("c", "float16", 64, _u(0, -2.0, 2.0)), Out("out", "float16", 6 * 64, CLOSE(2e-3, 2e-3)),
          Out("out2", "float16", 4 * 64, CLOSE(2e-3, 2e-3))],
         block=64),
    Case("half2_float2", "half2_float2.cu", "half2_float2",
         [In("in", "float32", 64, ("values", SPECIAL_FLOATS)), Out("out", "float32", 64), Out("parts", "float32", 96)]),
    Case("bf16", "bf16.cu", "bf16",
         [In("x", "float32", 64, ("values", SPECIAL_FLOATS)), In("a", "bfloat16", 64, _u(0, -8.0, 8.0)),
          In("b", "bfloat16", 64, _u(0, -3.0, 3.0)), Out("out", "bfloat16", 5 * 64), Out("back", "float32", 64)],
         block=64),
    Case("math_precise", "math_precise.cu", "math_precise",
         [In("x", "float32", 64, _u(0, -4.0, 4.0)), In("y", "float32", 64, _u(0, -3.0, 3.0)),
          # CUDA Math API bounds: expf 2, logf 1, sinf 2, cosf 2, tanf 4, powf 4, erff 2, erfcf 4,
          # tanhf 2, sqrtf 0, rsqrtf 2, cbrtf 1, atan2f 3, log1pf 1, exp2f 2, division 0
          Out("out", "float32", 16 * 64, ULP([2, 1, 2, 2, 4, 4, 2, 4, 2, 0, 2, 1, 3, 1, 2, 0]))], block=64),
    Case("math_fast", "math_fast.cu", "math_fast",
         [In("x", "float32", 64, _u(0, -4.0, 4.0)), In("y", "float32", 64, _u(0, -1.0, 1.0)),
          Out("out", "float32", 5 * 64, CLOSE(2e-6, 2e-6))], block=64),
    Case("math_minmax", "math_minmax.cu", "math_minmax",
         [In("x", "float32", 64), In("y", "float32", 64), In("k", "int32", 64, _ints(-20, 20)),
          Out("out", "float32", 6 * 64), Out("iout", "int32", 3 * 64)], block=64),
    Case("int_intrinsics", "int_intrinsics.cu", "int_intrinsics",
         [In("x", "uint32", 64, ("bits",)), In("y", "uint32", 64, ("bits",)), Out("out", "uint32", 12 * 64)],
         block=64),
    Case("conversions", "conversions.cu", "conversions",
         [In("x", "float32", 32, ("values", SPECIAL_FLOATS)), Out("out", "int32", 128), Out("uout", "uint32", 64),
          Out("fout", "float32", 32)]),
    Case("double_math", "double_math.cu", "double_math",
         [In("x", "float64", 100, _u(0, -3.0, 3.0)), InOut("y", "float64", 300, _u(0, -1.0, 1.0), ULP(2)),
          Scalar("float64", 0.75), Scalar("int32", 100)], grid=2, block=64),
    # output
    Case("printf_order", "printf_order.cu", "printf_order", [In("x", "int32", 96, _ints(0, 1000))],
         grid=3, block=32, printf=True),
    Case("assert_fail", "assert_fail.cu", "assert_fail",
         [In("x", "int32", 128, ("values", [1] * 70 + [77] + [1] * 57)), Out("out", "int32", 128)],
         grid=2, block=64, expect_error="Assertion `x[i] != 77` failed"),
    # host code
    Case("host_inst_half", "host_instantiations.cu", "fill<__half, 4>", [Out("out", "float16", 64), Scalar("float32", 0.5)],
         grid=2),
    Case("host_inst_float", "host_instantiations.cu", "fill<float, 4>", [Out("out", "float32", 64), Scalar("float32", 0.25)],
         grid=2),
    Case("host_inst_explicit", "host_instantiations.cu", "fill<unsigned char, 2>",
         [Out("out", "uint8", 64), Scalar("float32", 1.75)], grid=2),
    Case("host_inst_namespace", "host_instantiations.cu", "work::ns_kernel<int>", [Out("out", "int32", 32)]),
]
