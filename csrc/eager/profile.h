// Program timeline for profiling (torch.profiler's device rows, benchmarks/llama_profile.py):
// while on, every program run on a device notes when it was launched and when its outputs became
// ready, and every compile notes how long it took. Off, it costs one relaxed load per execution.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/client.h"

namespace tpu::eager {

struct ProgramRun {
  uint64_t program;   // the executable's identity while it stays loaded
  int64_t ops;        // ops it holds (1 outside fused mode)
  int64_t launch_ns;  // steady clock, when Execute was called
  int64_t queued_ns;  // when Execute returned (the host is free again)
  int64_t ready_ns;   // when its outputs were ready (-1 until then)
  int device;
  std::string name;  // the ATen op, or "fused program <key> (N ops)"
  std::string what;  // a fused program's ops by count ("aten::mm x4, aten::add.Tensor x2")
};

// A compile, or a load from the persistent cache, on the host thread that needed the program.
struct CompileRun {
  std::string name;  // the program's name, as in ProgramRun
  int64_t start_ns;
  int64_t end_ns;
  bool loaded;     // found in the persistent cache: deserialized, not compiled
  int64_t thread;  // the OS thread that compiled (or loaded) it
};

void SetProfiling(bool on);
bool Profiling();

// Names the programs this thread compiles and runs while it lives (set only while Profiling()).
class ProgramLabel {
 public:
  ProgramLabel(std::string name, std::string what = "");
  ~ProgramLabel();
  ProgramLabel(const ProgramLabel&) = delete;
  ProgramLabel& operator=(const ProgramLabel&) = delete;
  const std::string& name() const { return name_; }
  const std::string& what() const { return what_; }

 private:
  const ProgramLabel* outer_;
  std::string name_, what_;
};

// Notes one run; `launch_ns` was read before Execute. Call only while Profiling().
void NoteRun(const rt::Executable& exe, int64_t ops, int64_t launch_ns,
             const std::vector<rt::BufferPtr>& outs, int device);
// Notes a compile (or a load, `loaded`) that started at `start_ns` and ends now.
void NoteCompile(int64_t start_ns, bool loaded);
// The runs noted since the last call (ready_ns of runs still in flight are -1).
std::vector<ProgramRun> TakeRuns();
std::vector<CompileRun> TakeCompiles();
int64_t NowNs();

}  // namespace tpu::eager
