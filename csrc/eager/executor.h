// Runs graphs: structural-hash cache lookup, compile on a miss, execute on a device.
// Modes decide only when we wait: debug waits for every op, strict lets PJRT run ahead.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/client.h"
#include "runtime/disk_cache.h"

namespace tpu::eager {

enum class Mode { kDebug, kStrict };

struct Metrics {
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cpu_fallbacks{0};
  std::atomic<int64_t> compile_ns{0};
  std::atomic<int64_t> disk_hits{0};  // programs loaded from the persistent cache
};

Metrics& GetMetrics();

// Turns on the persistent compile cache in `dir` (empty: off). Returns a warning to show the user
// when the directory is unsafe (then the cache stays off), else "". `version` is torchtpu's.
std::string ConfigureDiskCache(const std::string& dir, const std::string& version,
                               int64_t max_bytes);
// Statistics of the persistent cache (all zero when it is off).
rt::DiskCacheStats DiskCacheStats();
Mode GetMode();
void SetMode(Mode m);

// The process-wide client. Configure records where the plugin is (cheap); the client is
// created on first use, so importing torchtpu does not load the plugin.
void Configure(const rt::ClientOptions& options);
bool Configured();
void Init(const rt::ClientOptions& options);  // Configure + create now
bool Initialized();
rt::Client& Client();

// Compiles (or finds in the cache) and runs `g` on `device`. `inputs` match g.params.
std::vector<rt::BufferPtr> Run(const ir::Graph& g, const std::vector<rt::BufferPtr>& inputs,
                               int device);

// A 0-d buffer holding `bits` (a host value of dtype t), cached by value: scalars enter
// programs as parameters, so a new value never means a new compile.
rt::BufferPtr ScalarBuffer(const void* bits, rt::DType t, int device);

// The most recent program output on `device` (what an event recorded now waits for).
std::weak_ptr<rt::Buffer> LastOutput(int device);

// Waits for all work issued so far on `device` to finish.
void Synchronize(int device);

}  // namespace tpu::eager
