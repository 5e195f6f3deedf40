// Sizes and counts that switch a code path (cache capacities, limits, bounds) are read through
// this, so that every one can be set from the environment: the tests reach each path by setting
// its threshold to its most aggressive value (make test's last pass).
#pragma once

#include <cstdint>
#include <cstdlib>

namespace tpu::rt {

// The positive integer in environment variable `name`, or `fallback` when it is unset or is not
// one. Read where the value is first needed; later changes to the environment are not seen.
inline int64_t EnvCount(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return *end == '\0' && n > 0 ? static_cast<int64_t>(n) : fallback;
}

}  // namespace tpu::rt
