// Force-included in pass 1 of CUDA sources (device libraries and host
// programs): CUDA's own macros that must be expanded before parsing.
#ifndef MKCUDA_CUDA_H
#define MKCUDA_CUDA_H
#define __align__(n) alignas(n)
#define __builtin_align__(n) alignas(n)
#endif
