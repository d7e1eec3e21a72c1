// Launch capture for a whole CUDA program run on the CPU (port/to_metal/
// capture.py): with MKCUDA_CAPTURE defined and $MK_CUDA_CAPTURE naming a
// folder, the first launch of each kernel writes its geometry, its scalar
// arguments and, for each pointer into cudaMalloc'd memory, the allocation's
// bytes as the kernel is about to read them, so that a port can be verified
// on the file's own sizes and inputs. $MK_CUDA_CAPTURE_SKIP=1 skips the later
// launches of a kernel already captured (a run then costs one launch per
// kernel). Each kernel notes its __PRETTY_FUNCTION__ when it runs, which
// names the template arguments a launch deduced.
#pragma once
// Plain arrays, no STL containers: their headers collide with the CUDA
// prelude's macros (__noinline__).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mk {
namespace cuda {
namespace capture {

struct Allocation {
  uintptr_t base;
  size_t size;
};
struct Table {
  Allocation* items = nullptr;
  size_t count = 0, capacity = 0;
};
inline Table& allocations() {
  static Table t;
  return t;
}
inline void on_malloc(void* p, size_t n) {
  if (!p) return;
  Table& t = allocations();
  if (t.count == t.capacity) {
    t.capacity = t.capacity ? 2 * t.capacity : 64;
    t.items = static_cast<Allocation*>(realloc(t.items, t.capacity * sizeof(Allocation)));
  }
  t.items[t.count++] = {reinterpret_cast<uintptr_t>(p), n};
}
inline void on_free(void* p) {
  Table& t = allocations();
  for (size_t i = 0; i < t.count; ++i)
    if (t.items[i].base == reinterpret_cast<uintptr_t>(p)) {
      t.items[i] = t.items[--t.count];
      return;
    }
}
inline const Allocation* find(uintptr_t p) {
  Table& t = allocations();
  for (size_t i = 0; i < t.count; ++i)
    if (t.items[i].base <= p && p < t.items[i].base + t.items[i].size) return &t.items[i];
  return nullptr;
}

inline std::atomic<const char*>& last_kernel() {
  static std::atomic<const char*> k{nullptr};
  return k;
}
inline void note(const char* pretty) { last_kernel().store(pretty, std::memory_order_relaxed); }

inline const char* folder() { return getenv("MK_CUDA_CAPTURE"); }
// The kernels captured so far (by the launch's spelling).
inline bool seen(const char* name) {
  static const char* names[4096];
  static int count = 0;
  for (int i = 0; i < count; ++i)
    if (strcmp(names[i], name) == 0) return true;
  if (count < 4096) names[count++] = strdup(name);
  return false;
}
inline int& launches() {
  static int n = 0;
  return n;
}

inline void json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if (static_cast<unsigned char>(*s) >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

// A pointer argument: the bytes of its allocation from the pointer on.
template <class T>
void arg(FILE* f, int launch, int i, T* v) {
  if (i) fputc(',', f);
  const uintptr_t p = reinterpret_cast<uintptr_t>(v);
  const Allocation* a = p ? find(p) : nullptr;
  if (!a) {
    fprintf(f, "{\"kind\":\"pointer\",\"null\":%s}", p ? "false" : "true");
    return;
  }
  char name[64], path[4096];
  snprintf(name, sizeof name, "%d_%d.bin", launch, i);
  snprintf(path, sizeof path, "%s/%s", folder(), name);
  const size_t n = a->base + a->size - p;
  if (FILE* d = fopen(path, "wb")) {
    fwrite(reinterpret_cast<const void*>(p), 1, n, d);
    fclose(d);
  }
  fprintf(f, "{\"kind\":\"buffer\",\"file\":\"%s\",\"bytes\":%zu}", name, n);
}
// NULL / nullptr passed for a pointer parameter.
inline void arg(FILE* f, int, int i, decltype(nullptr)) {
  if (i) fputc(',', f);
  fprintf(f, "{\"kind\":\"pointer\",\"null\":true}");
}
// A value: its bytes and what they are (the host's type; the kernel's
// parameter may be another one the launch converts to).
template <class T>
void arg(FILE* f, int, int i, const T& v) {
  if (i) fputc(',', f);
  const char* type = __is_floating_point(T) ? "f" : __is_integral(T) ? (__is_signed(T) ? "i" : "u") : "struct";
  fprintf(f, "{\"kind\":\"value\",\"type\":\"%s\",\"hex\":\"", type);
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
  for (size_t k = 0; k < sizeof(T); ++k) fprintf(f, "%02x", b[k]);
  fprintf(f, "\"}");
}

// Before a launch: whether to run it; records it when it is the first of its kernel.
template <class... A>
bool begin(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
           size_t smem, FILE** record, const A&... args) {
  *record = nullptr;
  if (!folder()) return true;
  if (seen(name)) {
    const char* skip = getenv("MK_CUDA_CAPTURE_SKIP");
    return !(skip && skip[0] == '1');
  }
  const int n = launches()++;
  char path[4096];
  snprintf(path, sizeof path, "%s/launches.jsonl", folder());
  FILE* f = fopen(path, "a");
  if (!f) return true;
  fprintf(f, "{\"launch\":%d,\"name\":", n);
  json_string(f, name);
  fprintf(f, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"smem\":%zu,\"args\":[", gx, gy, gz, bx, by, bz, smem);
  int i = 0;
  (arg(f, n, i++, args), ...);
  fprintf(f, "]");
  last_kernel().store(nullptr);
  *record = f;
  return true;
}

// After it: the instantiation the kernel reported (its __PRETTY_FUNCTION__).
inline void end(FILE* record) {
  if (!record) return;
  fprintf(record, ",\"pretty\":");
  const char* k = last_kernel().load();
  json_string(record, k ? k : "");
  fprintf(record, "}\n");
  fclose(record);
}

}  // namespace capture
}  // namespace cuda
}  // namespace mk
