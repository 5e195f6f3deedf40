#include "python/profiler.h"

#include <kineto/libkineto.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "eager/profile.h"

namespace tpu::python {
namespace {

using libkineto::ActivityType;

// Kineto's activities point at a span that must outlive the trace that copies them.
const libkineto::TraceSpan& Span() {
  static const libkineto::TraceSpan span(0, 0, "tpu", "");
  return span;
}

// Steady-clock nanoseconds (ours) to Unix-time nanoseconds (Kineto's and PyTorch's events).
int64_t UnixOffsetNs() {
  int64_t unix_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  return unix_now - eager::NowNs();
}

class Session : public libkineto::IActivityProfilerSession {
 public:
  explicit Session(bool kernels, bool runtime) : kernels_(kernels), runtime_(runtime) {}

  void start() override {
    eager::TakeRuns();  // drop what an earlier user of the timeline left
    eager::TakeCompiles();
    eager::SetProfiling(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    eager::SetProfiling(false);
    runs_ = eager::TakeRuns();
    compiles_ = eager::TakeCompiles();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    const int64_t offset = UnixOffsetNs();
    const int32_t pid = libkineto::processId();
    if (kernels_) {
      // One queue per device: a program starts when it was launched and the one before it is done.
      std::map<int, int64_t> free_at;
      std::stable_sort(runs_.begin(), runs_.end(),
                       [](const auto& a, const auto& b) { return a.launch_ns < b.launch_ns; });
      for (const eager::ProgramRun& r : runs_) {
        if (r.ready_ns < 0) continue;  // still running when the profile stopped
        // Ready callbacks may run out of order: a "previous" program noted ready after this
        // one bounds nothing, and the launch is then the best start known.
        int64_t prev = free_at[r.device];
        int64_t start = prev < r.ready_ns ? std::max(r.launch_ns, prev) : r.launch_ns;
        free_at[r.device] = std::max(start, r.ready_ns);
        libkineto::GenericTraceActivity a(Span(), ActivityType::CONCURRENT_KERNEL, r.name);
        a.startTime = start + offset;
        a.endTime = std::max(start, r.ready_ns) + offset;
        a.device = r.device;
        a.resource = 0;
        // (Quoted: Kineto's unquoted metadata goes through fmt, which libtorch does not export.)
        a.addMetadataQuoted("ops", std::to_string(r.ops));
        a.addMetadataQuoted("launch_us", std::to_string((r.queued_ns - r.launch_ns) / 1000));
        if (!r.what.empty()) a.addMetadataQuoted("aten_ops", r.what);
        a.log(logger);
      }
    }
    if (runtime_) {
      for (const eager::CompileRun& c : compiles_) {
        libkineto::GenericTraceActivity a(Span(), ActivityType::PRIVATEUSE1_RUNTIME,
                                          (c.loaded ? "tpu load: " : "tpu compile: ") + c.name);
        a.startTime = c.start_ns + offset;
        a.endTime = c.end_ns + offset;
        a.device = pid;
        a.resource = c.thread;  // the compiling thread's row, as Kineto numbers threads
        a.log(logger);
      }
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  bool kernels_, runtime_;
  std::vector<eager::ProgramRun> runs_;
  std::vector<eager::CompileRun> compiles_;
};

class Profiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    bool kernels = types.count(ActivityType::CONCURRENT_KERNEL) > 0;
    bool runtime = types.count(ActivityType::PRIVATEUSE1_RUNTIME) > 0;
    if (!kernels && !runtime) return nullptr;
    return std::make_unique<Session>(kernels, runtime);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torchtpu";
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL,
                                     ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace

void RegisterProfiler() {
  libkineto::api().registerProfilerFactory([] { return std::make_unique<Profiler>(); });
}

}  // namespace tpu::python
