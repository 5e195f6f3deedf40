// Runs graphs: structural-hash cache lookup, compile on a miss, execute on a device.
// Modes decide only when ops run: debug runs each op and waits, strict runs each op and lets
// PJRT run ahead, fused records ops and runs them as one program at a flush point (trace.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "eager/lazy.h"
#include "ir/graph.h"
#include "runtime/client.h"
#include "runtime/disk_cache.h"

namespace tpu::eager {

enum class Mode { kDebug, kStrict, kFused };

// A program failed: the message names the op (and, in fused mode, the line that recorded it).
struct OpError : std::runtime_error {
  OpError(const std::string& msg, bool oom, bool dist = false)
      : std::runtime_error(msg), out_of_memory(oom), distributed(dist) {}
  bool out_of_memory;
  bool distributed;          // a collective's ranks did not meet (c10d's DistBackendError)
  bool index_error = false;  // a value check of an index (Python's IndexError)
};
// Puts a runtime error into words for the user; `what` names the op.
OpError DescribeFailure(const rt::Error& e, const std::string& what);

struct Metrics {
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cpu_fallbacks{0};
  std::atomic<int64_t> compile_ns{0};
  std::atomic<int64_t> disk_hits{0};     // programs loaded from the persistent cache
  std::atomic<int64_t> recorded_ops{0};  // ops recorded in fused mode
  std::atomic<int64_t> replayed_ops{0};  // op calls the op cache replayed without lowering
  std::atomic<int64_t> flushes{0};       // fused traces run as one program
  // Collectives (per rank) that ran inside a program with other ops, and those that ran as
  // programs of their own.
  std::atomic<int64_t> fused_collectives{0};
  std::atomic<int64_t> lone_collectives{0};
  // Loads that ran out of JIT resources and were retried after unloading older programs.
  std::atomic<int64_t> retried_loads{0};
  // Parameter buffers given to fused programs for their outputs (input-output aliasing).
  std::atomic<int64_t> donated_buffers{0};
  // Python scalars uploaded to the device (a value in use, or kept, is not uploaded again).
  std::atomic<int64_t> scalar_uploads{0};
  // Host time in fused flushes (keys, lookups, building graphs, compiling, launching) and in
  // PJRT's Execute calls (launching; XLA:CPU may run a small program inside the call).
  std::atomic<int64_t> flush_ns{0};
  std::atomic<int64_t> execute_ns{0};
  // Fused programs run as a family's bounded program (eager/bounded.h).
  std::atomic<int64_t> bounded_runs{0};
};

Metrics& GetMetrics();

// Turns on the persistent compile cache in `dir` (empty: off). Returns a warning to show the user
// when the directory is unsafe (then the cache stays off), else "". `version` is torchtpu's.
std::string ConfigureDiskCache(const std::string& dir, const std::string& version,
                               int64_t max_bytes);
// Statistics of the persistent cache (all zero when it is off).
rt::DiskCacheStats DiskCacheStats();
Mode GetMode();
// Leaving fused mode flushes every pending trace first.
void SetMode(Mode m);

// The process-wide client. Configure records where the plugin is (cheap); the client is
// created on first use, so importing torchtpu does not load the plugin.
void Configure(const rt::ClientOptions& options);
bool Configured();
// No plugin can be configured (the platform asked for is absent): each use of the client throws
// `why` instead of a generic message.
void SetUnavailable(const std::string& why);
void Init(const rt::ClientOptions& options);  // Configure + create now
bool Initialized();
rt::Client& Client();

// The entry point for every op: runs `g` applied to `inputs` now (debug, strict) or records it
// (fused). Returns g's results. `op` names the op in error messages.
std::vector<LazyPtr> Submit(ir::Graph g, const std::vector<LazyPtr>& inputs, int device,
                            std::string op);
// The same for a graph already hashed (`h` is its StructuralHash) and shared: the op cache
// replays one graph for many calls.
std::vector<LazyPtr> Submit(std::shared_ptr<const ir::Graph> g, const ir::Hash128& h,
                            const std::vector<LazyPtr>& inputs, int device, std::string op);
// The buffer of `v`: a host read, so in fused mode it flushes v's device first.
rt::BufferPtr Materialize(const LazyPtr& v);
// Runs everything recorded on `device` (fused mode); does not wait.
void Flush(int device);

// Compiles (or finds in the cache) and runs `g` on `device` now. `inputs` match g.params.
std::vector<rt::BufferPtr> Run(const ir::Graph& g, const std::vector<rt::BufferPtr>& inputs,
                               int device);
// The executable cached under `key` (in memory and on disk); on a miss `build` makes the graph
// to compile: for one device, portable, or with one replica per global id in `device_ids`.
rt::ExecutablePtr Executable(const ir::Hash128& key, const std::function<ir::Graph()>& build,
                             const std::vector<int>& device_ids = {});
// Runs an executable, then notes its last output for Synchronize and events.
// `ops`: how many recorded ops the program holds (for the profile).
std::vector<rt::BufferPtr> Execute(const rt::Executable& exe,
                                   const std::vector<rt::BufferPtr>& inputs, int device,
                                   int64_t ops = 1);

// A 0-d value holding `bits` (a host value of dtype t), cached by value: scalars enter
// programs as parameters, so a new value never means a new compile.
LazyPtr ScalarBuffer(const void* bits, rt::DType t, int device);

// Runs a replicated executable (collectives) on this process's `devices`, one input list each.
std::vector<std::vector<rt::BufferPtr>> ExecuteReplicated(
    const rt::Executable& exe, const std::vector<std::vector<rt::BufferPtr>>& inputs,
    const std::vector<int>& devices);
// The most recent program output on `device` (what an event recorded now waits for).
std::weak_ptr<rt::Buffer> LastOutput(int device);

// Whether the platform computes in float64: TPUs do not. `RefuseFloat64(true)` makes any
// platform answer no, so that tests on the CPU plugin check what a TPU user sees.
bool HasFloat64();
void RefuseFloat64(bool on);

// Runs what is pending on `device` and waits for all work issued so far to finish.
void Synchronize(int device);

}  // namespace tpu::eager
