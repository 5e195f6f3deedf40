// Fused mode's pending trace, one per device: ops are recorded instead of run, and at a flush
// point the whole trace becomes one program (compiled once, then found by its structural key).
//
// Only values still referenced outside the trace (live tensors) become program results, so
// temporaries never reach device memory. The trace is cut at host reads, explicit syncs, a size
// limit, and at the boundaries of a detected loop, so every iteration maps onto the same cached
// executables.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "eager/lazy.h"
#include "eager/origin.h"

namespace tpu::eager {

class Trace {
 public:
  explicit Trace(int device) : device_(device) {}

  // Records `g` applied to `inputs` (pending or ready values); returns g's results, pending.
  std::vector<LazyPtr> Record(ir::Graph g, const std::vector<LazyPtr>& inputs, std::string op,
                              OriginPtr origin);
  // The buffer of `v` (a value of this device), flushing first if it is pending.
  rt::BufferPtr Materialize(const LazyPtr& v);
  void Flush();
  size_t pending_ops();

  // The size limit (ops per program); 0 restores the default.
  static void SetMaxOps(size_t n);
  static size_t MaxOps();

 private:
  struct Op {
    std::shared_ptr<const ir::Graph> g;
    std::vector<int64_t> inputs;  // >= 0: external index; < 0: ~value (a result of an earlier op)
    uint32_t first_value = 0;     // this op's results are values first_value, first_value + 1, ...
    std::string name;
    OriginPtr origin;
  };
  struct Key {
    uint64_t a = 0x9e3779b97f4a7c15ULL, b = 0xc2b2ae3d27d4eb4fULL;
    void Mix(uint64_t x) {
      a = (a ^ x) * 0x100000001b3ULL;
      b = ((b ^ x) + 0x7f4a7c159e3779b9ULL) * 0xff51afd7ed558ccdULL;
    }
  };

  int64_t External(const rt::BufferPtr& buf);
  void FlushLocked();
  // Runs the ops one by one after the fused program failed: every value that does not depend on
  // the failing op is computed; the failure is raised naming the op and where it was recorded.
  void Replay(const std::vector<Op>& ops, const std::vector<rt::BufferPtr>& externals,
              const std::vector<LazyPtr>& live, size_t num_values);
  // Loop detection over the recent op hashes.
  void NoteOp(uint64_t h);
  bool RepeatsLastSpan() const;
  void DetectPeriod();

  const int device_;
  std::mutex mu_;
  std::vector<Op> ops_;
  std::vector<rt::BufferPtr> externals_;
  std::unordered_map<const rt::Buffer*, int64_t> external_index_;
  std::vector<std::weak_ptr<Lazy>> values_;
  Key key_;

  std::deque<uint64_t> history_;  // hashes of the most recent ops, across flushes
  size_t period_ = 0;             // detected loop length in ops (0: none)
  size_t span_ = 0;               // cut length: period_, or the largest multiple of it <= max ops
  size_t phase_ = 0;              // ops since the last loop boundary
};

Trace& TraceOf(int device);
void FlushAllTraces();

}  // namespace tpu::eager
