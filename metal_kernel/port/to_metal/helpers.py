"""Metal helper functions the port emits at the top of the .metal file, each
only when a translated construct needs it (table.py's `helpers`).

They are written in Metal Shading Language for CUDA constructs with no
one-call Metal equivalent: cooperative groups over simd_* / quad_*
functions, shuffles narrower than a simdgroup, strong compare-and-swap,
the math functions Metal lacks. Metal pointers carry an address space, so
helpers that take pointers are templates over the pointer type, and the
call site casts to the type it needs in the right space.
"""

from __future__ import annotations

_SHFL = """\
// CUDA shuffles with width < 32, as PTX's shfl.sync defines them: lanes form
// segments of `width`; the offset is taken mod 32; a source past the end of
// the lane's segment (before its start, for up) leaves the lane's own value.
template <typename T> inline T mk_shfl(T v, int src, int width, uint lane) {
  const uint lo = lane & ~uint(width - 1);
  return simd_shuffle(v, ushort(lo | (uint(src) & uint(width - 1))));
}
// A lane whose source lies outside its segment reads no other lane (it
// reads its own): the lanes of the next segment may be inactive (past the
// threadgroup's end), and reading them is undefined in Metal where CUDA
// reads nothing.
template <typename T> inline T mk_shfl_up(T v, uint delta, int width, uint lane) {
  const uint lo = lane & ~uint(width - 1), d = delta & 31u;
  return simd_shuffle(v, ushort(int(lane) - int(d) >= int(lo) ? lane - d : lane));
}
template <typename T> inline T mk_shfl_down(T v, uint delta, int width, uint lane) {
  const uint hi = (lane & ~uint(width - 1)) | uint(width - 1), d = delta & 31u;
  return simd_shuffle(v, ushort(lane + d <= hi ? lane + d : lane));
}
template <typename T> inline T mk_shfl_xor(T v, int mask, int width, uint lane) {
  const uint hi = (lane & ~uint(width - 1)) | uint(width - 1), m = uint(mask) & 31u;
  return simd_shuffle(v, ushort((lane ^ m) <= hi ? lane ^ m : lane));
}
"""

_MATCH = """\
// __match_any_sync / __match_all_sync: every lane compares its value with
// every other lane's (all 32 lanes must be active).
// Values are compared bit for bit, as CUDA does (-0.0 and 0.0 differ).
template <typename T> inline uint mk_match_any(T v, uint lane) {
  uint bits = 0;
  for (ushort i = 0; i < 32; ++i)
    if (simd_shuffle(v, i) == v) bits |= 1u << i;
  return bits;
}
inline uint mk_match_any(float v, uint lane) { return mk_match_any(as_type<uint>(v), lane); }
inline uint mk_match_any(half v, uint lane) { return mk_match_any(as_type<ushort>(v), lane); }
template <typename T, typename P> inline uint mk_match_all(T v, thread P* pred, uint lane) {
  const uint bits = mk_match_any(v, lane);
  const bool all = simd_all(bits == 0xffffffffu);
  *pred = all;
  return all ? 0xffffffffu : 0u;
}
"""

# The call site casts the address to a Metal atomic pointer in its address
# space (Metal pointers carry one), so these take any atomic pointer type.
_ATOMIC_CAS = """\
// atomicCAS: a strong compare-and-swap from Metal's weak one (retried while
// it fails spuriously); returns the old value.
template <typename A, typename T> inline T mk_atomic_cas(A p, T compare, T value) {
  T expected = compare;
  while (!atomic_compare_exchange_weak_explicit(p, &expected, value, memory_order_relaxed,
                                                memory_order_relaxed) && expected == compare) {
  }
  return expected;
}
// 16-bit compare-and-swap on the 32-bit word that holds it (`shift`: 0 or 16).
template <typename A, typename T> inline T mk_atomic_cas16(A word, uint shift, T compare, T value) {
  uint old = atomic_load_explicit(word, memory_order_relaxed);
  while (true) {
    const T cur = as_type<T>(ushort(old >> shift));
    if (cur != compare) return cur;
    const uint next = (old & ~(0xffffu << shift)) | (uint(as_type<ushort>(value)) << shift);
    if (atomic_compare_exchange_weak_explicit(word, &old, next, memory_order_relaxed, memory_order_relaxed))
      return cur;
  }
}
"""

_ATOMIC_INC_DEC = """\
// atomicInc / atomicDec: wrapping at `limit`, by compare-and-swap.
template <typename A> inline uint mk_atomic_inc(A p, uint limit) {
  uint old = atomic_load_explicit(p, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(p, &old, old >= limit ? 0u : old + 1u, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  return old;
}
template <typename A> inline uint mk_atomic_dec(A p, uint limit) {
  uint old = atomic_load_explicit(p, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(p, &old, (old == 0u || old > limit) ? limit : old - 1u,
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
  return old;
}
"""

_ATOMIC_UPDATE = """\
// Read-modify-writes Metal has no atomic for (half / bfloat adds, float
// min / max): compare-and-swap loops on the 32-bit word holding the value.
// No lambdas in Metal: one function per operation.
template <typename A, typename T> inline T mk_atomic_add_cas32(A word, T v) {
  uint old = atomic_load_explicit(word, memory_order_relaxed);
  while (true) {
    const T cur = as_type<T>(old);
    if (atomic_compare_exchange_weak_explicit(word, &old, as_type<uint>(T(cur + v)), memory_order_relaxed,
                                              memory_order_relaxed))
      return cur;
  }
}
template <typename A, typename T> inline T mk_atomic_add_cas16(A word, uint shift, T v) {
  uint old = atomic_load_explicit(word, memory_order_relaxed);
  while (true) {
    const T cur = as_type<T>(ushort(old >> shift));
    const uint bits = (old & ~(0xffffu << shift)) | (uint(as_type<ushort>(T(cur + v))) << shift);
    if (atomic_compare_exchange_weak_explicit(word, &old, bits, memory_order_relaxed, memory_order_relaxed))
      return cur;
  }
}
$MINMAX"""

_ATOMIC_UPDATE = _ATOMIC_UPDATE.replace("$MINMAX", "\n".join(f"""\
template <typename A> inline float mk_atomic_f{op}(A word, float v) {{
  uint old = atomic_load_explicit(word, memory_order_relaxed);
  while (true) {{
    const float cur = as_type<float>(old);
    if (atomic_compare_exchange_weak_explicit(word, &old, as_type<uint>(f{op}(cur, v)), memory_order_relaxed,
                                              memory_order_relaxed))
      return cur;
  }}
}}""" for op in ("min", "max")) + "\n")

_SYNC_VOTE = """\
// __syncthreads_count / _and / _or: a barrier that also counts a predicate,
// through a threadgroup counter the kernel declares.
inline int mk_syncthreads_count(bool p, threadgroup atomic_int& counter, uint3 threadIdx) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    atomic_store_explicit(&counter, 0, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (p) atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int n = atomic_load_explicit(&counter, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return n;
}
inline int mk_syncthreads_and(bool p, threadgroup atomic_int& counter, uint3 threadIdx) {
  return mk_syncthreads_count(!p, counter, threadIdx) == 0;
}
inline int mk_syncthreads_or(bool p, threadgroup atomic_int& counter, uint3 threadIdx) {
  return mk_syncthreads_count(p, counter, threadIdx) != 0;
}
"""

_ERF = """\
// erf / erfc (Metal has neither). erf(x) = 2x/sqrt(pi) e^-x^2 sum (2x^2)^n / (2n+1)!!:
// positive terms, no cancellation; x^2 is split into its rounded value and
// the rounding error so that e^-x^2 keeps float accuracy. erfc for x >= 1 by
// its continued fraction (modified Lentz).
inline float mk_erf(float x) {
  const float a = fabs(x);
  if (a >= 4.0f) return copysign(1.0f, x);
  const float x2 = a * a;
  const float lo = fma(a, a, -x2);
  float term = 1.0f, sum = 1.0f;
  for (int n = 1; n < 80 && term > 1e-9f * sum; ++n) {
    term *= 2.0f * x2 / float(2 * n + 1);
    sum += term;
  }
  const float r = 1.1283791670955126f * a * precise::exp(-x2) * (1.0f - lo) * sum;
  return copysign(min(r, 1.0f), x);
}
inline float mk_erfc(float x) {
  if (x < 1.0f) return 1.0f - mk_erf(x);
  if (x > 10.5f) return 0.0f;
  // erfc(x) = e^-x^2 / sqrt(pi) * 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))
  const float tiny = 1e-30f;
  float f = x, c = x, d = 0.0f;
  for (int k = 1; k < 120; ++k) {
    const float ak = 0.5f * float(k);
    d = x + ak * d;
    d = fabs(d) < tiny ? tiny : d;
    c = x + ak / c;
    c = fabs(c) < tiny ? tiny : c;
    d = 1.0f / d;
    const float delta = c * d;
    f *= delta;
    if (fabs(delta - 1.0f) < 1e-7f) break;
  }
  const float x2 = x * x;
  const float lo = fma(x, x, -x2);
  return precise::exp(-x2) * (1.0f - lo) * 0.5641895835477563f / f;
}
"""

_LOG1P = """\
// log1p: log(1 + x) corrected for the rounding of 1 + x (Goldberg's trick).
inline float mk_log1p(float x) {
  const float u = 1.0f + x;
  if (u == 1.0f) return x;
  return precise::log(u) * x / (u - 1.0f);
}
"""

_EXPM1 = """\
// expm1: exp(x) - 1 without cancellation for small x (Kahan's trick).
inline float mk_expm1(float x) {
  const float u = precise::exp(x);
  if (u == 1.0f) return x;
  const float um1 = u - 1.0f;
  if (um1 == -1.0f) return -1.0f;
  return um1 * x / precise::log(u);
}
"""

_CBRT = """\
// cbrt: the real cube root, refined by one Newton step.
inline float mk_cbrt(float x) {
  if (x == 0.0f || isinf(x) || isnan(x)) return x;
  const float a = fabs(x);
  float y = precise::pow(a, 1.0f / 3.0f);
  y = y - (y * y * y - a) / (3.0f * y * y);
  return copysign(y, x);
}
"""

_HYPOT = """\
// hypot: sqrt(x^2 + y^2) without overflow or underflow.
inline float mk_hypot(float x, float y) {
  const float a = fabs(x), b = fabs(y);
  const float hi = max(a, b), lo = min(a, b);
  if (hi == 0.0f || isinf(hi)) return hi;
  const float r = lo / hi;
  return hi * precise::sqrt(1.0f + r * r);
}
"""

_SINCOS = """\
// sincosf(x, &s, &c): the pointers keep their address spaces as template types.
template <typename P, typename Q> inline void mk_sincos(float x, P s, Q c) {
  *s = precise::sin(x);
  *c = precise::cos(x);
}
template <typename P, typename Q> inline void mk_sincos_fast(float x, P s, Q c) {
  *s = fast::sin(x);
  *c = fast::cos(x);
}
"""

_ROUND = """\
// Directed rounding to half / bfloat (Metal rounds to nearest even): round to
// nearest, then step one value toward the direction when that went the wrong
// way. Exact for every float.
template <typename T> inline T mk_step(T h, bool up) {
  ushort b = as_type<ushort>(h);
  if (isnan(float(h))) return h;
  if ((b & 0x7fffu) == 0u) return as_type<T>(ushort(up ? 0x0001u : 0x8001u));
  const bool negative = (b & 0x8000u) != 0u;
  b = (up != negative) ? ushort(b + 1u) : ushort(b - 1u);
  return as_type<T>(b);
}
template <typename T> inline T mk_round_rd(float x) { const T h = T(x); return float(h) > x ? mk_step(h, false) : h; }
template <typename T> inline T mk_round_ru(float x) { const T h = T(x); return float(h) < x ? mk_step(h, true) : h; }
template <typename T> inline T mk_round_rz(float x) {
  const T h = T(x);
  return fabs(float(h)) > fabs(x) ? mk_step(h, x < 0.0f) : h;
}
"""

_HMATH = """\
// CUDA's half/bfloat intrinsics over both types. Metal's math library has
// half overloads but none for bfloat (a bfloat argument becomes a float, and
// a float does not convert back implicitly): bfloat goes through float,
// rounded once. fma: a*b is exact in float (8-bit significands), the sum's
// rounding error is recovered (two-sum) and moves a result that landed on a
// bfloat halfway point off it, so the one rounding to bfloat is CUDA's.
inline half mk_hfma(half a, half b, half c) { return fma(a, b, c); }
inline half2 mk_hfma(half2 a, half2 b, half2 c) { return fma(a, b, c); }
inline bfloat mk_hfma(bfloat a, bfloat b, bfloat c) {
  const float p = float(a) * float(b), q = float(c);
  float s = p + q;
  const float t = s - p;
  const float e = (p - (s - t)) + (q - t);
  const uint bits = as_type<uint>(s);
  if (e != 0.0f && (bits & 0xffffu) == 0x8000u && isfinite(s)) {
    s = as_type<float>(((e > 0.0f) == (s > 0.0f)) ? bits + 1u : bits - 1u);
  }
  return bfloat(s);
}
inline bfloat2 mk_hfma(bfloat2 a, bfloat2 b, bfloat2 c) {
  return bfloat2(mk_hfma(a.x, b.x, c.x), mk_hfma(a.y, b.y, c.y));
}
template <typename T> inline T mk_habs(T x) { return abs(x); }
template <> inline bfloat mk_habs(bfloat x) { return bfloat(abs(float(x))); }
template <> inline bfloat2 mk_habs(bfloat2 x) { return bfloat2(abs(float2(x))); }
template <typename T> inline T mk_hmax(T a, T b) { return max(a, b); }
template <> inline bfloat mk_hmax(bfloat a, bfloat b) { return bfloat(max(float(a), float(b))); }
template <> inline bfloat2 mk_hmax(bfloat2 a, bfloat2 b) { return bfloat2(max(float2(a), float2(b))); }
template <typename T> inline T mk_hmin(T a, T b) { return min(a, b); }
template <> inline bfloat mk_hmin(bfloat a, bfloat b) { return bfloat(min(float(a), float(b))); }
template <> inline bfloat2 mk_hmin(bfloat2 a, bfloat2 b) { return bfloat2(min(float2(a), float2(b))); }
"""

_CONVERT = """\
// CUDA's float -> int conversions saturate and map NaN to 0 (PTX cvt).
inline int mk_f2i(float x) {
  return isnan(x) ? 0 : x >= 2147483648.0f ? 2147483647 : x <= -2147483648.0f ? int(-2147483647 - 1) : int(x);
}
inline uint mk_f2u(float x) {
  return (isnan(x) || x <= 0.0f) ? 0u : x >= 4294967296.0f ? 4294967295u : uint(x);
}
"""

_BITS = """\
// Integer intrinsics without a Metal builtin.
template <typename T> inline int mk_ffs(T x) { return x == 0 ? 0 : int(ctz(x)) + 1; }
inline uint mk_byte_perm(uint x, uint y, uint s) {
  const ulong v = (ulong(y) << 32) | x;
  uint r = 0;
  for (uint i = 0; i < 4; ++i) r |= uint((v >> (((s >> (4 * i)) & 7) * 8)) & 0xff) << (8 * i);
  return r;
}
inline uint mk_funnelshift_l(uint lo, uint hi, uint shift) {
  const ulong v = (ulong(hi) << 32) | lo;
  return uint((v << (shift & 31)) >> 32);
}
inline uint mk_funnelshift_r(uint lo, uint hi, uint shift) {
  const ulong v = (ulong(hi) << 32) | lo;
  return uint(v >> (shift & 31));
}
inline int mk_dp4a(int a, int b, int c) {
  const char4 x = as_type<char4>(a), y = as_type<char4>(b);
  return c + int(x.x) * y.x + int(x.y) * y.y + int(x.z) * y.z + int(x.w) * y.w;
}
inline uint mk_dp4a(uint a, uint b, uint c) {
  const uchar4 x = as_type<uchar4>(a), y = as_type<uchar4>(b);
  return c + uint(x.x) * y.x + uint(x.y) * y.y + uint(x.z) * y.z + uint(x.w) * y.w;
}
"""

_MEMCPY = """\
// memcpy / memset: byte loops (Metal has neither); the call site casts the
// pointers to uchar pointers in their address spaces.
template <typename D, typename S> inline void mk_memcpy(D dst, S src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}
template <typename D> inline void mk_memset(D dst, int value, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = uchar(value);
}
"""

_CG = """\
// cooperative_groups for Metal: the thread block and its tiles of 1 to 32
// threads. A 32-thread tile is the simdgroup (simd_* functions); smaller
// tiles are segments of it (width-limited shuffles, quad_* for 4 threads).
namespace cooperative_groups {
struct thread_block {
  uint3 index, group, dim;
  uint rank, count, lane;
  void sync() const { threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup); }
  uint thread_rank() const { return rank; }
  uint size() const { return count; }
  uint num_threads() const { return count; }
  uint3 thread_index() const { return index; }
  uint3 group_index() const { return group; }
  uint3 dim_threads() const { return dim; }
  uint3 group_dim() const { return dim; }
};
inline thread_block this_thread_block(uint3 threadIdx, uint3 blockIdx, uint3 blockDim) {
  thread_block b;
  b.index = threadIdx;
  b.group = blockIdx;
  b.dim = blockDim;
  b.rank = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  b.count = blockDim.x * blockDim.y * blockDim.z;
  b.lane = b.rank % 32u;
  return b;
}
inline void sync(thread_block b) { b.sync(); }

template <uint N, typename Parent = void>
struct thread_block_tile {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8 || N == 16 || N == 32, "tiles of 1 to 32 threads");
  uint rank, meta_rank, meta_count, lane;
  thread_block_tile() = default;
  template <typename P>
  thread_block_tile(thread_block_tile<N, P> o) : rank(o.rank), meta_rank(o.meta_rank), meta_count(o.meta_count),
                                                 lane(o.lane) {}
  uint thread_rank() const { return rank; }
  static constexpr uint size() { return N; }
  static constexpr uint num_threads() { return N; }
  uint meta_group_rank() const { return meta_rank; }
  uint meta_group_size() const { return meta_count; }
  void sync() const { simdgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup); }
  // Shuffles within the tile's segment of the simdgroup (PTX shfl.sync with width N).
  template <typename T> T shfl(T v, int src) const {
    return simd_shuffle(v, ushort((lane & ~(N - 1u)) | (uint(src) & (N - 1u))));
  }
  template <typename T> T shfl_up(T v, uint delta) const {
    const uint d = delta & 31u;
    const T r = simd_shuffle_up(v, ushort(d));
    return rank >= d ? r : v;
  }
  template <typename T> T shfl_down(T v, uint delta) const {
    const uint d = delta & 31u;
    const T r = simd_shuffle_down(v, ushort(d));
    return rank + d < N ? r : v;
  }
  template <typename T> T shfl_xor(T v, uint mask) const {
    const uint m = mask & 31u;
    const T r = simd_shuffle_xor(v, ushort(m));
    return (lane ^ m) <= ((lane & ~(N - 1u)) | (N - 1u)) ? r : v;
  }
  // Ballots in tile ranks (bit i = the tile's thread i).
  uint ballot(bool p) const {
    const uint bits = uint(simd_vote::vote_t(simd_ballot(p)));
    return N == 32 ? bits : (bits >> (lane & ~(N - 1u))) & ((1u << N) - 1u);
  }
  template <typename T> uint match_any(T v) const {
    uint bits = 0;
    for (uint i = 0; i < N; ++i)
      if (shfl(v, int(i)) == v) bits |= 1u << i;
    return bits;
  }
  bool any(bool p) const { return ballot(p) != 0u; }
  bool all(bool p) const { return ballot(p) == ballot(true); }
};
template <uint N, typename Parent>
inline thread_block_tile<N> tiled_partition(Parent parent) {
  thread_block_tile<N> t;
  const uint r = parent.thread_rank();
  t.rank = r % N;
  t.meta_rank = r / N;
  t.meta_count = (parent.size() + N - 1u) / N;
  t.lane = parent.lane;
  return t;
}

template <typename T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <typename T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };
template <typename T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };
template <typename T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <typename T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <typename T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

// Butterfly reduction: every thread of the tile gets the result.
template <uint N, typename P, typename T, typename Op>
inline T reduce(thread_block_tile<N, P> g, T v, Op op) {
  for (uint m = N / 2u; m > 0u; m /= 2u) v = op(v, g.shfl_xor(v, m));
  return v;
}
template <typename P, typename T> inline T reduce(thread_block_tile<32, P>, T v, plus<T>) { return simd_sum(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<32, P>, T v, less<T>) { return simd_min(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<32, P>, T v, greater<T>) { return simd_max(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<32, P>, T v, bit_and<T>) { return simd_and(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<32, P>, T v, bit_or<T>) { return simd_or(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<32, P>, T v, bit_xor<T>) { return simd_xor(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<4, P>, T v, plus<T>) { return quad_sum(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<4, P>, T v, less<T>) { return quad_min(v); }
template <typename P, typename T> inline T reduce(thread_block_tile<4, P>, T v, greater<T>) { return quad_max(v); }

template <uint N, typename P, typename T, typename Op>
inline T inclusive_scan(thread_block_tile<N, P> g, T v, Op op) {
  for (uint d = 1u; d < N; d *= 2u) {
    const T y = g.shfl_up(v, d);
    if (g.thread_rank() >= d) v = op(v, y);
  }
  return v;
}
template <uint N, typename P, typename T>
inline T inclusive_scan(thread_block_tile<N, P> g, T v) { return inclusive_scan(g, v, plus<T>()); }
template <typename P, typename T>
inline T inclusive_scan(thread_block_tile<32, P>, T v) { return simd_prefix_inclusive_sum(v); }
template <uint N, typename P, typename T, typename Op>
inline T exclusive_scan(thread_block_tile<N, P> g, T v, Op op) {
  const T inc = inclusive_scan(g, v, op);
  const T prev = g.shfl_up(inc, 1u);
  return g.thread_rank() == 0u ? T() : prev;
}
template <uint N, typename P, typename T>
inline T exclusive_scan(thread_block_tile<N, P> g, T v) { return exclusive_scan(g, v, plus<T>()); }
template <typename P, typename T>
inline T exclusive_scan(thread_block_tile<32, P>, T v) { return simd_prefix_exclusive_sum(v); }
}  // namespace cooperative_groups
"""

_ACQUIRE = """\
// MK1040: after an atomic of a kernel that hands device memory to other
// threadgroups with __threadfence(): Metal's atomics are relaxed, so the
// thread that sees another group's release through one fences to acquire it.
template <typename T> inline T mk_acquire(T v) {
  atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);
  return v;
}
"""

# name -> (Metal text, helpers it needs first)
HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "shfl": (_SHFL, ()),
    "match": (_MATCH, ()),
    "atomic_cas": (_ATOMIC_CAS, ()),
    "atomic_inc_dec": (_ATOMIC_INC_DEC, ()),
    "atomic_update": (_ATOMIC_UPDATE, ()),
    "acquire": (_ACQUIRE, ()),
    "syncthreads_vote": (_SYNC_VOTE, ()),
    "erf": (_ERF, ()),
    "log1p": (_LOG1P, ()),
    "expm1": (_EXPM1, ()),
    "cbrt": (_CBRT, ()),
    "hypot": (_HYPOT, ()),
    "sincos": (_SINCOS, ()),
    "bits": (_BITS, ()),
    "round": (_ROUND, ()),
    "hmath": (_HMATH, ()),
    "convert": (_CONVERT, ()),
    "memcpy": (_MEMCPY, ()),
        "cg": (_CG, ()),
}


def helper_text(names) -> str:
    """The helpers `names` need, each once, dependencies first, in a fixed order."""
    wanted: list[str] = []

    def add(n):
        if n in wanted:
            return
        for dep in HELPERS[n][1]:
            add(dep)
        wanted.append(n)

    for n in sorted(set(names), key=list(HELPERS).index):
        add(n)
    return "\n".join(HELPERS[n][0] for n in wanted)
