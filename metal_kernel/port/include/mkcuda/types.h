// CUDA's built-in vector types (vector_types.h) with their sizes and
// alignments (float3 is 12 bytes here, 16 in Metal), make_<type>(), dim3,
// and the runtime's enums and handles that device code may name.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define MKCUDA_VEC1(T, N, A) struct __attribute__((aligned(A))) N##1 { T x; };
#define MKCUDA_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; };
#define MKCUDA_VEC3(T, N, A) struct N##3 { T x, y, z; };
#define MKCUDA_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; };
#define MKCUDA_MAKERS(T, N)                                                                          \
  inline N##1 make_##N##1(T x) { return N##1{x}; }                                                 \
  inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                                         \
  inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                                 \
  inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
// (element type, name, alignment of the 1-, 2- and 4-vectors)
#define MKCUDA_VECTORS(T, N, A1, A2, A4) \
  MKCUDA_VEC1(T, N, A1) MKCUDA_VEC2(T, N, A2) MKCUDA_VEC3(T, N, A1) MKCUDA_VEC4(T, N, A4) MKCUDA_MAKERS(T, N)

MKCUDA_VECTORS(signed char, char, 1, 2, 4)
MKCUDA_VECTORS(unsigned char, uchar, 1, 2, 4)
MKCUDA_VECTORS(short, short, 2, 4, 8)
MKCUDA_VECTORS(unsigned short, ushort, 2, 4, 8)
MKCUDA_VECTORS(int, int, 4, 8, 16)
MKCUDA_VECTORS(unsigned int, uint, 4, 8, 16)
MKCUDA_VECTORS(long, long, 8, 16, 16)
MKCUDA_VECTORS(unsigned long, ulong, 8, 16, 16)
MKCUDA_VECTORS(long long, longlong, 8, 16, 16)
MKCUDA_VECTORS(unsigned long long, ulonglong, 8, 16, 16)
MKCUDA_VECTORS(float, float, 4, 8, 16)
MKCUDA_VECTORS(double, double, 8, 16, 16)
#undef MKCUDA_VEC1
#undef MKCUDA_VEC2
#undef MKCUDA_VEC3
#undef MKCUDA_VEC4
#undef MKCUDA_MAKERS
#undef MKCUDA_VECTORS

static_assert(sizeof(float3) == 12 && alignof(float4) == 16 && sizeof(char3) == 3, "CUDA layouts");

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// Runtime types device code may mention (cudaGetLastError is callable on
// the device; streams and events appear in signatures kept for device code).
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
typedef cudaError_t cudaError;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "no error"; }
