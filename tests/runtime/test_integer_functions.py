"""The MSL integer functions (Table 6.2 of the specification) at the edges of
every integer type, against exact Python integer arithmetic: `Tu absdiff(T, T)`
returns the unsigned type, the saturating and half-add functions never
overflow, mulhi/madhi/madsat use the full double-width product, and the bit
functions treat the operand as its bit pattern."""

import numpy as np
import pytest

import metal_kernel

TYPES = {  # Metal type: numpy dtype
    "char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
    "int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
}
NFUN = 16

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
template <typename T>
kernel void intfn(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],
                  device const T* c [[buffer(2)]], device T* out [[buffer(3)]],
                  device make_unsigned_t<T>* diff [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  T x = a[i], y = b[i], z = c[i];
  static_assert(is_same_v<decltype(absdiff(x, y)), make_unsigned_t<T>>, "Tu absdiff(T x, T y)");
  static_assert(is_same_v<decltype(absdiff(vec<T, 2>(x), vec<T, 2>(y))), vec<make_unsigned_t<T>, 2>>, "vectors");
  diff[i] = absdiff(x, y);
  device T* o = out + 16 * i;
  o[0] = abs(x);
  o[1] = addsat(x, y);
  o[2] = subsat(x, y);
  o[3] = hadd(x, y);
  o[4] = rhadd(x, y);
  o[5] = mulhi(x, y);
  o[6] = madhi(x, y, z);
  o[7] = madsat(x, y, z);
  o[8] = clz(x);
  o[9] = ctz(x);
  o[10] = popcount(x);
  o[11] = rotate(x, y);
  o[12] = extract_bits(x, 3u, 5u);
  o[13] = insert_bits(x, y, 4u, 7u);
  o[14] = reverse_bits(x);
  o[15] = median3(x, y, z);
}
""" + "".join(
    f'template [[host_name("intfn_{t}")]] kernel void intfn<{t}>(device const {t}*, device const {t}*, '
    f"device const {t}*, device {t}*, device make_unsigned_t<{t}>*, uint);\n" for t in TYPES)


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def reference(x, y, z, bits, signed):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    mask = (1 << bits) - 1

    def wrap(v):
        v &= mask
        return v - (1 << bits) if signed and v >> (bits - 1) else v

    def sat(v):
        return min(max(v, lo), hi)

    ux, uy = x & mask, y & mask
    s = (y & mask) % bits
    ex = (ux >> 3) & 31
    if signed and ex >> 4:
        ex -= 32
    ins = (ux & ~(0x7F << 4)) | ((uy << 4) & (0x7F << 4))
    mulhi = (x * y) >> bits
    return [
        wrap(abs(x)), sat(x + y), sat(x - y), (x + y) >> 1, (x + y + 1) >> 1, wrap(mulhi), wrap(mulhi + z),
        sat(x * y + z), bits - ux.bit_length(), (ux & -ux).bit_length() - 1 if ux else bits,
        bin(ux).count("1"), wrap(((ux << s) | (ux >> (bits - s))) & mask), ex, wrap(ins),
        wrap(int(format(ux, f"0{bits}b")[::-1], 2)), sorted([x, y, z])[1],
    ], abs(x - y)


@pytest.mark.parametrize("metal_type", list(TYPES))
def test_integer_functions_at_the_edges_of_each_type(lib, metal_type):
    dt = np.dtype(TYPES[metal_type])
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    edges = [lo, hi, 0, 1, hi - 1, lo + 1] + ([-1, -2] if lo < 0 else [2, hi // 2])
    rng = np.random.default_rng(7)
    pairs = [(p, q) for p in edges for q in edges]
    pairs += [(int(p), int(q)) for p, q in rng.integers(lo, hi, size=(24, 2), dtype=dt, endpoint=True)]
    zs = [edges[k % len(edges)] for k in range(len(pairs))]
    # products that overflow T while product + addend does not (madsat must be exact)
    extra = [(hi, -2, hi), (lo, 2, hi), (lo + 1, -1, lo)] if lo < 0 else [(hi, 2, 0), (hi, hi, hi)]
    pairs += [(p, q) for p, q, _ in extra]
    zs += [r for _, _, r in extra]
    n = len(pairs)
    a = np.array([p for p, _ in pairs], dtype=dt)
    b = np.array([q for _, q in pairs], dtype=dt)
    c = np.array(zs, dtype=dt)
    out = np.full(NFUN * n, 0x5A, dtype=dt)  # poisoned
    diff = np.full(n, 0x5A, dtype=np.dtype(f"u{dt.itemsize}"))
    getattr(lib, f"intfn_{metal_type}")(a, b, c, out, diff, threads=n)
    names = ["abs", "addsat", "subsat", "hadd", "rhadd", "mulhi", "madhi", "madsat", "clz", "ctz", "popcount",
             "rotate", "extract_bits", "insert_bits", "reverse_bits", "median3"]
    for k in range(n):
        x, y, z = int(a[k]), int(b[k]), int(c[k])
        want, want_diff = reference(x, y, z, dt.itemsize * 8, lo < 0)
        got = [int(v) for v in out[NFUN * k: NFUN * (k + 1)]]
        for name, g, w in zip(names, got, want):
            assert g == w, f"{name}({x}, {y}, {z}) as {metal_type}: got {g}, want {w}"
        assert int(diff[k]) == want_diff, f"absdiff({x}, {y}) as {metal_type}: got {int(diff[k])}"


def test_absdiff_of_int_min_and_int_max_is_unsigned(lib):
    a = np.array([-2**31], dtype=np.int32)
    b = np.array([2**31 - 1], dtype=np.int32)
    diff = np.zeros(1, dtype=np.uint32)
    lib.intfn_int(a, b, a, np.zeros(NFUN, dtype=np.int32), diff, threads=1)
    assert int(diff[0]) == 2**32 - 1
