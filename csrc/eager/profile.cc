#include "eager/profile.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

namespace tpu::eager {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<std::shared_ptr<ProgramRun>> g_runs;

}  // namespace

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetProfiling(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool Profiling() { return g_on.load(std::memory_order_relaxed); }

void NoteRun(const rt::Executable& exe, int64_t ops, int64_t launch_ns,
             const std::vector<rt::BufferPtr>& outs) {
  const int64_t queued = NowNs();
  auto run = std::make_shared<ProgramRun>(ProgramRun{
      reinterpret_cast<uint64_t>(&exe), ops, launch_ns, queued, outs.empty() ? queued : -1});
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_runs.push_back(run);
  }
  // A program's outputs become ready together: the first one tells when it finished.
  if (!outs.empty()) {
    outs[0]->OnReady([run] {
      std::lock_guard<std::mutex> lock(g_mu);
      run->ready_ns = NowNs();
    });
  }
}

std::vector<ProgramRun> TakeRuns() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<ProgramRun> out;
  out.reserve(g_runs.size());
  for (const auto& r : g_runs) out.push_back(*r);
  g_runs.clear();
  return out;
}

}  // namespace tpu::eager
