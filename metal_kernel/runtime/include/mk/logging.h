// metal-kernel: metal::os_log (<metal_logging>, MSL 3.2 shader logging).
//
// On a GPU the messages go to the unified log once the command queue has a
// log state; here every message is written to the process's stderr, one
// line per call (`[subsystem:category] message`, or just the message for
// os_log_default). The format string is printf's; each argument is passed
// the way C passes variadic arguments (half and bfloat as double).
#pragma once
#include <stddef.h>
#include <type_traits>

#include "bfloat.h"

namespace mk {
// libc's, declared here so that no <stdio.h> name lands in the kernel's
// global namespace.
extern "C" int snprintf(char* buf, size_t n, const char* fmt, ...) noexcept;  // as glibc declares them
extern "C" long write(int fd, const void* buf, size_t n);

template <class A> __attribute__((always_inline)) inline auto log_arg(const A& a) {
  if constexpr (std::is_same<A, _Float16>::value || std::is_same<A, bfloat>::value || std::is_same<A, float>::value)
    return (double)(float)a;
  else if constexpr (std::is_enum<A>::value)
    return (long)a;
  else
    return a;
}

// One write(2) per message, so that the lines of concurrent threads never mix.
template <class... A>
inline void log_line(const char* subsystem, const char* category, const char* fmt, const A&... args) {
  char buf[1024];
  int n = 0;
  if (subsystem && subsystem[0]) n = snprintf(buf, sizeof buf, "[%s:%s] ", subsystem, category ? category : "");
  if (n < 0) n = 0;
  int m = snprintf(buf + n, sizeof buf - n, fmt, log_arg(args)...);
  if (m < 0) m = 0;
  size_t len = size_t(n) + size_t(m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  (void)write(2, buf, len);
}
}  // namespace mk

namespace metal {

struct os_log {
  const char* subsystem;
  const char* category;
  constexpr os_log(const char* s, const char* c) : subsystem(s), category(c) {}
  template <class... A> void log(const char* fmt, const A&... a) const { ::mk::log_line(subsystem, category, fmt, a...); }
  template <class... A> void log_debug(const char* fmt, const A&... a) const { log(fmt, a...); }
  template <class... A> void log_info(const char* fmt, const A&... a) const { log(fmt, a...); }
  template <class... A> void log_error(const char* fmt, const A&... a) const { log(fmt, a...); }
  template <class... A> void log_fault(const char* fmt, const A&... a) const { log(fmt, a...); }
};
constexpr os_log os_log_default(nullptr, nullptr);
}  // namespace metal
