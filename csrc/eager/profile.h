// Program timeline for profiling (benchmarks/llama_profile.py): while on, every program run on a
// device notes when it was launched and when its outputs became ready. Off, it costs one
// relaxed load per execution.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/client.h"

namespace tpu::eager {

struct ProgramRun {
  uint64_t program;   // the executable's identity while it stays loaded
  int64_t ops;        // ops it holds (1 outside fused mode)
  int64_t launch_ns;  // steady clock, when Execute was called
  int64_t queued_ns;  // when Execute returned (the host is free again)
  int64_t ready_ns;   // when its outputs were ready (-1 until then)
};

void SetProfiling(bool on);
bool Profiling();
// Notes one run; `launch_ns` was read before Execute. Call only while Profiling().
void NoteRun(const rt::Executable& exe, int64_t ops, int64_t launch_ns,
             const std::vector<rt::BufferPtr>& outs);
// The runs noted since the last call (ready_ns of runs still in flight are -1).
std::vector<ProgramRun> TakeRuns();
int64_t NowNs();

}  // namespace tpu::eager
