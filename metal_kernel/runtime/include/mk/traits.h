// metal-kernel: <metal_type_traits> and <metal_limits>: the metal:: type
// traits (scalar-or-vector aware where Metal's are), numeric_limits for half,
// bfloat and vectors, and the internal names Metal libraries specialise
// (`_numeric_limits_impl`).
//
// Only the names Apple's headers declare live in metal::, so that user code
// that completes the library itself (MLX's steel/utils/type_traits.h defines
// metal::is_empty, for one) declares its own names without a collision.
#ifndef MK_TRAITS_H
#define MK_TRAITS_H

#include "types.h"

namespace metal {
// ---------------------------------------------------------------------------
// Type traits (metal::), on top of <type_traits>: the C++14 set Apple's
// <metal_type_traits> has (Metal is C++14-based) plus the `_v` variable
// templates and bool_constant it also offers. Not here, because Apple's
// library lacks them and real libraries define them in metal:: themselves:
// void_t / make_void, is_empty, conjunction, disjunction, negation (MLX).
using std::add_const;
using std::add_const_t;
using std::add_cv;
using std::add_cv_t;
using std::add_lvalue_reference;
using std::add_lvalue_reference_t;
using std::add_pointer;
using std::add_pointer_t;
using std::add_rvalue_reference;
using std::add_rvalue_reference_t;
using std::add_volatile;
using std::add_volatile_t;
using std::bool_constant;
using std::common_type;
using std::common_type_t;
using std::conditional;
using std::conditional_t;
using std::decay;
using std::decay_t;
using std::declval;
using std::enable_if;
using std::enable_if_t;
using std::extent;
using std::extent_v;
using std::false_type;
using std::integral_constant;
using std::is_array;
using std::is_array_v;
using std::is_base_of;
using std::is_base_of_v;
using std::is_class;
using std::is_class_v;
using std::is_const;
using std::is_const_v;
using std::is_constructible;
using std::is_constructible_v;
using std::is_convertible;
using std::is_convertible_v;
using std::is_enum;
using std::is_enum_v;
using std::is_function;
using std::is_function_v;
using std::is_lvalue_reference;
using std::is_lvalue_reference_v;
using std::is_pointer;
using std::is_pointer_v;
using std::is_reference;
using std::is_reference_v;
using std::is_rvalue_reference;
using std::is_rvalue_reference_v;
using std::is_same;
using std::is_same_v;
using std::is_trivially_copyable;
using std::is_trivially_copyable_v;
using std::is_union;
using std::is_union_v;
using std::is_void;
using std::is_void_v;
using std::is_volatile;
using std::is_volatile_v;
using std::rank;
using std::remove_all_extents;
using std::remove_all_extents_t;
using std::remove_const;
using std::remove_const_t;
using std::remove_cv;
using std::remove_cv_t;
using std::remove_extent;
using std::remove_extent_t;
using std::remove_pointer;
using std::remove_pointer_t;
using std::remove_reference;
using std::remove_reference_t;
using std::remove_volatile;
using std::remove_volatile_t;
using std::true_type;
using std::underlying_type;
using std::underlying_type_t;
// Metal's own spellings of conjunction & co. (MLX uses them).
template <class... B> using _disjunction = std::disjunction<B...>;
template <class... B> using _conjunction = std::conjunction<B...>;
template <class B> using _negation = std::negation<B>;

// Address spaces are empty macros on the CPU: removing them is the identity.
// (Apple's spelling, as MLX's steel/utils/integral_constant.h uses it.)
template <class T> struct remove_addrspace { typedef T type; };
template <class T> using remove_addrspace_t = typename remove_addrspace<T>::type;

// Scalar-or-vector aware traits (MSL: true for the scalar and its vectors).
template <class T>
struct is_floating_point : bool_constant<_mk::is_fp_v<_mk::elem_t<remove_cv_t<T>>>> {};
template <class T> constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T>
struct is_integral : bool_constant<_mk::is_int_v<_mk::elem_t<remove_cv_t<T>>>> {};
template <class T> constexpr bool is_integral_v = is_integral<T>::value;
template <class T>
struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <class T> constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T>
struct is_signed : bool_constant<std::is_signed<_mk::elem_t<remove_cv_t<T>>>::value ||
                                 _mk::is_fp_v<_mk::elem_t<remove_cv_t<T>>>> {};
template <class T> constexpr bool is_signed_v = is_signed<T>::value;
template <class T>
struct is_unsigned : bool_constant<std::is_unsigned<_mk::elem_t<remove_cv_t<T>>>::value> {};
template <class T> constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T>
struct is_scalar : bool_constant<std::is_scalar<T>::value || _mk::is_fp_v<T>> {};
template <class T> constexpr bool is_scalar_v = is_scalar<T>::value;
template <class T> struct is_vector : bool_constant<_mk::is_vec_v<T>> {};
template <class T> constexpr bool is_vector_v = is_vector<T>::value;
template <class T> struct is_packed_vector : bool_constant<_mk::is_packed_v<T>> {};
template <class T> constexpr bool is_packed_vector_v = is_packed_vector<T>::value;
template <class T> struct vec_elements : integral_constant<int, _mk::vinfo<remove_cv_t<T>>::n> {};
template <class T> constexpr int vec_elements_v = vec_elements<T>::value;
template <class T> struct make_scalar { typedef _mk::elem_t<remove_cv_t<T>> type; };
template <class T> using make_scalar_t = typename make_scalar<T>::type;
template <class T, int N> struct make_vector { typedef vec<T, N> type; };
template <class T, int N> using make_vector_t = typename make_vector<T, N>::type;

template <class T> struct make_signed { typedef std::make_signed_t<T> type; };
template <class T, int N> struct make_signed<vec<T, N>> { typedef vec<std::make_signed_t<T>, N> type; };
template <class T> using make_signed_t = typename make_signed<T>::type;
template <class T> struct make_unsigned { typedef std::make_unsigned_t<T> type; };
template <class T, int N> struct make_unsigned<vec<T, N>> { typedef vec<std::make_unsigned_t<T>, N> type; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;

// ---------------------------------------------------------------------------
// numeric_limits: as in Apple's <metal_limits>, numeric_limits<T> derives
// from _numeric_limits_impl<T>, which libraries specialise for their own
// types (candle: `_numeric_limits_impl<indexed<T>>`). std for the usual
// scalars; half, bfloat and vectors here.
template <class T> struct _numeric_limits_impl : std::numeric_limits<T> {};
template <class T> struct numeric_limits : _numeric_limits_impl<T> {};

namespace _mk {
template <class T, unsigned short MaxB, unsigned short MinB, unsigned short EpsB, unsigned short DenB,
          int Digits, int Digits10, int MaxDigits10, int MinExp, int MinExp10, int MaxExp, int MaxExp10>
struct small_float_limits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = Digits;
  static constexpr int digits10 = Digits10;
  static constexpr int max_digits10 = MaxDigits10;
  static constexpr int radix = 2;
  static constexpr int min_exponent = MinExp;
  static constexpr int min_exponent10 = MinExp10;
  static constexpr int max_exponent = MaxExp;
  static constexpr int max_exponent10 = MaxExp10;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr T min() noexcept { return __builtin_bit_cast(T, MinB); }
  static constexpr T max() noexcept { return __builtin_bit_cast(T, MaxB); }
  static constexpr T lowest() noexcept { return __builtin_bit_cast(T, (unsigned short)(MaxB | 0x8000)); }
  static constexpr T epsilon() noexcept { return __builtin_bit_cast(T, EpsB); }
  static constexpr T round_error() noexcept { return T(0.5f); }
  static constexpr T infinity() noexcept { return T(__builtin_inff()); }
  static constexpr T quiet_NaN() noexcept { return T(__builtin_nanf("")); }
  static constexpr T signaling_NaN() noexcept { return T(__builtin_nansf("")); }
  static constexpr T denorm_min() noexcept { return __builtin_bit_cast(T, DenB); }
};
} // namespace _mk
// half: max 65504 (0x7bff), min normal 2^-14 (0x0400), eps 2^-10 (0x1400), denorm 2^-24
template <>
struct _numeric_limits_impl<half>
    : _mk::small_float_limits<half, 0x7bff, 0x0400, 0x1400, 0x0001, 11, 3, 5, -13, -4, 16, 4> {};
// bfloat: max 0x1.fep127 (0x7f7f), min 2^-126 (0x0080), eps 2^-7 (0x3c00), denorm 2^-133
template <>
struct _numeric_limits_impl<bfloat>
    : _mk::small_float_limits<bfloat, 0x7f7f, 0x0080, 0x3c00, 0x0001, 8, 2, 4, -125, -37, 128, 38> {};
template <class T> struct numeric_limits<const T> : numeric_limits<T> {};
template <class T> struct numeric_limits<volatile T> : numeric_limits<T> {};
template <class T> struct numeric_limits<const volatile T> : numeric_limits<T> {};
// vectors: every component holds the scalar's value
template <class T, int N> struct _numeric_limits_impl<vec<T, N>> : numeric_limits<T> {
  typedef numeric_limits<T> S;
  static constexpr vec<T, N> min() noexcept { return vec<T, N>(S::min()); }
  static constexpr vec<T, N> max() noexcept { return vec<T, N>(S::max()); }
  static constexpr vec<T, N> lowest() noexcept { return vec<T, N>(S::lowest()); }
  static constexpr vec<T, N> epsilon() noexcept { return vec<T, N>(S::epsilon()); }
  static constexpr vec<T, N> round_error() noexcept { return vec<T, N>(S::round_error()); }
  static constexpr vec<T, N> infinity() noexcept { return vec<T, N>(S::infinity()); }
  static constexpr vec<T, N> quiet_NaN() noexcept { return vec<T, N>(S::quiet_NaN()); }
  static constexpr vec<T, N> signaling_NaN() noexcept { return vec<T, N>(S::signaling_NaN()); }
  static constexpr vec<T, N> denorm_min() noexcept { return vec<T, N>(S::denorm_min()); }
};

} // namespace metal

#endif // MK_TRAITS_H
