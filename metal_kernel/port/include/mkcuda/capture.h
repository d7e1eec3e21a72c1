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
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <type_traits>

namespace mk {
namespace cuda {
namespace capture {

inline std::map<uintptr_t, size_t>& allocations() {
  static std::map<uintptr_t, size_t> m;
  return m;
}
inline void on_malloc(void* p, size_t n) {
  if (p) allocations()[reinterpret_cast<uintptr_t>(p)] = n;
}
inline void on_free(void* p) { allocations().erase(reinterpret_cast<uintptr_t>(p)); }

inline std::atomic<const char*>& last_kernel() {
  static std::atomic<const char*> k{nullptr};
  return k;
}
inline void note(const char* pretty) { last_kernel().store(pretty, std::memory_order_relaxed); }

inline const char* folder() { return getenv("MK_CUDA_CAPTURE"); }
inline std::set<std::string>& captured() {
  static std::set<std::string> s;
  return s;
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

template <class T>
void arg(FILE* f, int launch, int i, const T& v) {
  if (i) fputc(',', f);
  if constexpr (std::is_pointer_v<T>) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(v);
    auto& m = allocations();
    auto it = m.upper_bound(p);
    if (p && it != m.begin()) {
      --it;
      if (p < it->first + it->second) {
        char name[64];
        snprintf(name, sizeof name, "%d_%d.bin", launch, i);
        std::string path = std::string(folder()) + "/" + name;
        if (FILE* d = fopen(path.c_str(), "wb")) {
          fwrite(reinterpret_cast<const void*>(p), 1, it->first + it->second - p, d);
          fclose(d);
        }
        fprintf(f, "{\"kind\":\"buffer\",\"file\":\"%s\",\"bytes\":%zu}", name, size_t(it->first + it->second - p));
        return;
      }
    }
    fprintf(f, "{\"kind\":\"pointer\",\"null\":%s}", p ? "false" : "true");
  } else {
    fprintf(f, "{\"kind\":\"value\",\"hex\":\"");
    const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
    for (size_t k = 0; k < sizeof(T); ++k) fprintf(f, "%02x", b[k]);
    fprintf(f, "\"}");
  }
}

// Before a launch: whether to run it; records it when it is the first of its kernel.
template <class... A>
bool begin(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
           size_t smem, FILE** record, const A&... args) {
  *record = nullptr;
  if (!folder()) return true;
  if (captured().count(name)) {
    const char* skip = getenv("MK_CUDA_CAPTURE_SKIP");
    return !(skip && skip[0] == '1');
  }
  captured().insert(name);
  const int n = launches()++;
  std::string path = std::string(folder()) + "/launches.jsonl";
  FILE* f = fopen(path.c_str(), "a");
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
