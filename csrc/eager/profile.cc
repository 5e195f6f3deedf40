#include "eager/profile.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

namespace tpu::eager {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::condition_variable g_ready;  // a run's ready time was noted
std::vector<std::shared_ptr<ProgramRun>> g_runs;
std::vector<CompileRun> g_compiles;
thread_local const ProgramLabel* t_label = nullptr;

}  // namespace

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetProfiling(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool Profiling() { return g_on.load(std::memory_order_relaxed); }

ProgramLabel::ProgramLabel(std::string name, std::string what)
    : outer_(t_label), name_(std::move(name)), what_(std::move(what)) {
  t_label = this;
}
ProgramLabel::~ProgramLabel() { t_label = outer_; }

void NoteRun(const rt::Executable& exe, int64_t ops, int64_t launch_ns,
             const std::vector<rt::BufferPtr>& outs, int device) {
  const int64_t queued = NowNs();
  const ProgramLabel* label = t_label;
  auto run = std::make_shared<ProgramRun>(ProgramRun{
      reinterpret_cast<uint64_t>(&exe), ops, launch_ns, queued, outs.empty() ? queued : -1, device,
      label ? label->name() : "tpu program", label ? label->what() : ""});
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_runs.push_back(run);
  }
  // A program's outputs become ready together: the first one tells when it finished.
  if (!outs.empty()) {
    outs[0]->OnReady([run] {
      {
        std::lock_guard<std::mutex> lock(g_mu);
        run->ready_ns = NowNs();
      }
      g_ready.notify_all();
    });
  }
}

void NoteCompile(int64_t start_ns, bool loaded) {
  CompileRun c{t_label ? t_label->name() : "tpu program", start_ns, NowNs(), loaded,
               static_cast<int64_t>(::syscall(SYS_gettid))};
  std::lock_guard<std::mutex> lock(g_mu);
  g_compiles.push_back(std::move(c));
}

std::vector<ProgramRun> TakeRuns() {
  std::unique_lock<std::mutex> lock(g_mu);
  // A run the host has already synced on may still have its ready callback in flight on a PJRT
  // thread (on a loaded machine, after the profile ends): wait a little for those.
  g_ready.wait_for(lock, std::chrono::seconds(2), [] {
    return std::all_of(g_runs.begin(), g_runs.end(),
                       [](const auto& r) { return r->ready_ns >= 0; });
  });
  std::vector<ProgramRun> out;
  out.reserve(g_runs.size());
  for (const auto& r : g_runs) out.push_back(*r);
  g_runs.clear();
  return out;
}

std::vector<CompileRun> TakeCompiles() {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(g_compiles, {});
}

}  // namespace tpu::eager
