// metal-kernel: the MSL integer functions (Table 6.2 of the specification).
// Included by mk/math.h inside namespace metal, where its overload machinery
// (MK_GENN, MK_INT_SCALARS, _mk::apply) is defined; not a header of its own.
namespace _mk {
// ---- integer element operations -------------------------------------------
template <class T> using uns_t = std::make_unsigned_t<std::conditional_t<std::is_same<T, bool>::value, unsigned char, T>>;
template <class T> constexpr int bits_v = int(sizeof(T) * 8);

// |x - y| without overflow, as the unsigned type (MSL: `Tu absdiff(T, T)`).
template <class T> MK_INLINE constexpr uns_t<T> i_absdiff(T x, T y) {
  typedef uns_t<T> U;
  return x > y ? U(U(x) - U(y)) : U(U(y) - U(x));
}
template <class T> MK_INLINE constexpr T i_addsat(T x, T y) {
  T r;
  if (!__builtin_add_overflow(x, y, &r))
    return r;
  if constexpr (std::is_signed<T>::value)
    return y > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  else
    return std::numeric_limits<T>::max();
}
template <class T> MK_INLINE constexpr T i_subsat(T x, T y) {
  T r;
  if (!__builtin_sub_overflow(x, y, &r))
    return r;
  if constexpr (std::is_signed<T>::value)
    return y < 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  else
    return T(0);
}
template <class T> MK_INLINE constexpr T i_hadd(T x, T y) { return T((x >> 1) + (y >> 1) + (x & y & 1)); }
template <class T> MK_INLINE constexpr T i_rhadd(T x, T y) { return T((x >> 1) + (y >> 1) + ((x | y) & 1)); }
template <class T> MK_INLINE constexpr T i_clz(T x) {
  typedef uns_t<T> U;
  U u = U(x);
  if (u == 0)
    return T(bits_v<T>);
  return T(__builtin_clzll((unsigned long long)u) - (64 - bits_v<T>));
}
template <class T> MK_INLINE constexpr T i_ctz(T x) {
  typedef uns_t<T> U;
  U u = U(x);
  if (u == 0)
    return T(bits_v<T>);
  return T(__builtin_ctzll((unsigned long long)u));
}
template <class T> MK_INLINE constexpr T i_popcount(T x) {
  return T(__builtin_popcountll((unsigned long long)uns_t<T>(x)));
}
template <class T> MK_INLINE constexpr T i_mulhi(T x, T y) {
  if constexpr (sizeof(T) == 8) {
    typedef std::conditional_t<std::is_signed<T>::value, __int128, unsigned __int128> W;
    return T((W(x) * W(y)) >> 64);
  } else {
    typedef std::conditional_t<std::is_signed<T>::value, long, unsigned long> W;
    return T((W(x) * W(y)) >> bits_v<T>);
  }
}
// saturate(a * b + c), exact: a * b + c always fits in 128 bits.
template <class T> MK_INLINE constexpr T i_madsat(T a, T b, T c) {
  typedef std::conditional_t<std::is_signed<T>::value, __int128, unsigned __int128> W;
  const W lo = W(std::numeric_limits<T>::min()), hi = W(std::numeric_limits<T>::max());
  const W s = W(a) * W(b) + W(c);
  return T(s < lo ? lo : (s > hi ? hi : s));
}
template <class T> MK_INLINE constexpr T i_mul24(T x, T y) {
  if constexpr (std::is_signed<T>::value) {
    int a = int(uint(x) << 8) >> 8, b = int(uint(y) << 8) >> 8;
    return T(int(uint(a) * uint(b)));
  } else {
    return T((uint(x) & 0xffffffu) * (uint(y) & 0xffffffu));
  }
}
template <class T> MK_INLINE constexpr T i_rotate(T v, T i) {
  typedef uns_t<T> U;
  U u = U(v);
  int s = int(U(i) & U(bits_v<T> - 1));
  if (s == 0)
    return v;
  return T(U(U(u << s) | U(u >> (bits_v<T> - s))));
}
template <class T> MK_INLINE constexpr T i_extract_bits(T x, uint offset, uint bits) {
  typedef uns_t<T> U;
  if (bits == 0)
    return T(0);
  U u = U(U(x) >> (offset & (bits_v<T> - 1)));
  if (bits >= uint(bits_v<T>))
    return T(u);
  U mask = U((U(1) << bits) - 1);
  u &= mask;
  if constexpr (std::is_signed<T>::value) {
    U sbit = U(U(1) << (bits - 1));
    u = U((u ^ sbit) - sbit); // sign-extend
  }
  return T(u);
}
template <class T> MK_INLINE constexpr T i_insert_bits(T base, T ins, uint offset, uint bits) {
  typedef uns_t<T> U;
  if (bits == 0)
    return base;
  U mask = bits >= uint(bits_v<T>) ? U(~U(0)) : U((U(1) << bits) - 1);
  mask = U(mask << (offset & (bits_v<T> - 1)));
  return T(U((U(base) & U(~mask)) | (U(U(ins) << (offset & (bits_v<T> - 1))) & mask)));
}
template <class T> MK_INLINE constexpr T i_reverse_bits(T x) {
  typedef uns_t<T> U;
  if constexpr (sizeof(T) == 1)
    return T(__builtin_bitreverse8(U(x)));
  else if constexpr (sizeof(T) == 2)
    return T(__builtin_bitreverse16(U(x)));
  else if constexpr (sizeof(T) == 4)
    return T(__builtin_bitreverse32(U(x)));
  else
    return T(__builtin_bitreverse64(U(x)));
}

#define MK_IOP1(name)                                                                   \
  struct op_##name {                                                                    \
    template <class R, class X> static MK_AI R call(const X& x) { return i_##name<R>(R(x)); } \
  };
#define MK_IOP2(name)                                                                   \
  struct op_##name {                                                                    \
    template <class R, class X, class Y> static MK_AI R call(const X& x, const Y& y) {  \
      return i_##name<R>(R(x), R(y));                                                   \
    }                                                                                   \
  };
MK_IOP1(clz)
MK_IOP1(ctz)
MK_IOP1(popcount)
MK_IOP1(reverse_bits)
MK_IOP2(addsat)
MK_IOP2(subsat)
MK_IOP2(hadd)
MK_IOP2(rhadd)
MK_IOP2(mulhi)
MK_IOP2(mul24)
MK_IOP2(rotate)
struct op_madhi {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return R(i_mulhi<R>(R(x), R(y)) + R(z));
  }
};
struct op_mad24 {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return R(uns_t<R>(i_mul24<R>(R(x), R(y))) + uns_t<R>(R(z)));
  }
};
struct op_madsat {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return i_madsat<R>(R(x), R(y), R(z));
  }
};

template <class... X> constexpr bool int_args = (is_int_v<elem_t<X>> && ...);
} // namespace _mk

// ---- integer functions ------------------------------------------------------
#define MK_DEF_I1(name)                                                                 \
  MK_INLINE char name(char x) { return _mk::op_##name::call<char>(x); }                  \
  MK_INLINE signed char name(signed char x) { return _mk::op_##name::call<signed char>(x); } \
  MK_INLINE uchar name(uchar x) { return _mk::op_##name::call<uchar>(x); }               \
  MK_INLINE short name(short x) { return _mk::op_##name::call<short>(x); }               \
  MK_INLINE ushort name(ushort x) { return _mk::op_##name::call<ushort>(x); }            \
  MK_INLINE int name(int x) { return _mk::op_##name::call<int>(x); }                     \
  MK_INLINE uint name(uint x) { return _mk::op_##name::call<uint>(x); }                  \
  MK_INLINE long name(long x) { return _mk::op_##name::call<long>(x); }                  \
  MK_INLINE ulong name(ulong x) { return _mk::op_##name::call<ulong>(x); }               \
  MK_GENN(name, 1, _mk::int_args<X...>)
#define MK_DEF_I2(name)                                                                 \
  MK_INLINE char name(char x, char y) { return _mk::op_##name::call<char>(x, y); }       \
  MK_INLINE signed char name(signed char x, signed char y) { return _mk::op_##name::call<signed char>(x, y); } \
  MK_INLINE uchar name(uchar x, uchar y) { return _mk::op_##name::call<uchar>(x, y); }   \
  MK_INLINE short name(short x, short y) { return _mk::op_##name::call<short>(x, y); }   \
  MK_INLINE ushort name(ushort x, ushort y) { return _mk::op_##name::call<ushort>(x, y); } \
  MK_INLINE int name(int x, int y) { return _mk::op_##name::call<int>(x, y); }           \
  MK_INLINE uint name(uint x, uint y) { return _mk::op_##name::call<uint>(x, y); }       \
  MK_INLINE long name(long x, long y) { return _mk::op_##name::call<long>(x, y); }       \
  MK_INLINE ulong name(ulong x, ulong y) { return _mk::op_##name::call<ulong>(x, y); }   \
  MK_GENN(name, 2, _mk::int_args<X...>)
#define MK_DEF_I3(name)                                                                 \
  MK_INLINE char name(char x, char y, char z) { return _mk::op_##name::call<char>(x, y, z); } \
  MK_INLINE signed char name(signed char x, signed char y, signed char z) {              \
    return _mk::op_##name::call<signed char>(x, y, z);                                   \
  }                                                                                     \
  MK_INLINE uchar name(uchar x, uchar y, uchar z) { return _mk::op_##name::call<uchar>(x, y, z); } \
  MK_INLINE short name(short x, short y, short z) { return _mk::op_##name::call<short>(x, y, z); } \
  MK_INLINE ushort name(ushort x, ushort y, ushort z) { return _mk::op_##name::call<ushort>(x, y, z); } \
  MK_INLINE int name(int x, int y, int z) { return _mk::op_##name::call<int>(x, y, z); }  \
  MK_INLINE uint name(uint x, uint y, uint z) { return _mk::op_##name::call<uint>(x, y, z); } \
  MK_INLINE long name(long x, long y, long z) { return _mk::op_##name::call<long>(x, y, z); } \
  MK_INLINE ulong name(ulong x, ulong y, ulong z) { return _mk::op_##name::call<ulong>(x, y, z); } \
  MK_GENN(name, 3, _mk::int_args<X...>)
MK_DEF_I1(clz)
MK_DEF_I1(ctz)
MK_DEF_I1(popcount)
MK_DEF_I1(reverse_bits)
// absdiff returns the unsigned type: absdiff(INT_MIN, INT_MAX) == 0xffffffffu.
#define MK_ABSDIFF_ONE(T)                                                               \
  MK_INLINE _mk::uns_t<T> absdiff(T x, T y) { return _mk::i_absdiff<T>(x, y); }
MK_INT_SCALARS(MK_ABSDIFF_ONE)
#undef MK_ABSDIFF_ONE
template <class T, int N, std::enable_if_t<_mk::is_int_v<T>, int> = 0>
MK_INLINE vec<_mk::uns_t<T>, N> absdiff(const vec<T, N>& x, const vec<T, N>& y) {
  vec<_mk::uns_t<T>, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = _mk::i_absdiff<T>(x[i], y[i]);
  return r;
}
MK_DEF_I2(addsat)
MK_DEF_I2(subsat)
MK_DEF_I2(hadd)
MK_DEF_I2(rhadd)
MK_DEF_I2(mulhi)
MK_DEF_I2(rotate)
MK_DEF_I3(madhi)
MK_DEF_I3(madsat)
// mul24 / mad24: int and uint only
MK_INLINE int mul24(int x, int y) { return _mk::i_mul24<int>(x, y); }
MK_INLINE uint mul24(uint x, uint y) { return _mk::i_mul24<uint>(x, y); }
MK_INLINE int mad24(int x, int y, int z) { return _mk::op_mad24::call<int>(x, y, z); }
MK_INLINE uint mad24(uint x, uint y, uint z) { return _mk::op_mad24::call<uint>(x, y, z); }
MK_GENN(mul24, 2, _mk::int_args<X...>)
MK_GENN(mad24, 3, _mk::int_args<X...>)

// extract_bits(x, offset, bits) / insert_bits(base, insert, offset, bits)
#define MK_XB_ONE(T)                                                                    \
  MK_INLINE T extract_bits(T x, uint offset, uint bits) { return _mk::i_extract_bits<T>(x, offset, bits); } \
  MK_INLINE T insert_bits(T base, T insert, uint offset, uint bits) {                    \
    return _mk::i_insert_bits<T>(base, insert, offset, bits);                            \
  }
MK_INT_SCALARS(MK_XB_ONE)
#undef MK_XB_ONE
template <class T, int N> MK_INLINE vec<T, N> extract_bits(const vec<T, N>& x, uint offset, uint bits) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = _mk::i_extract_bits<T>(x[i], offset, bits);
  return r;
}
template <class T, int N>
MK_INLINE vec<T, N> insert_bits(const vec<T, N>& base, const vec<T, N>& ins, uint offset, uint bits) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = _mk::i_insert_bits<T>(base[i], ins[i], offset, bits);
  return r;
}

