// Fused mode's pending trace, one per device: ops are recorded instead of run, and at a flush
// point the trace becomes one program, or two when a read runs its own dependencies first
// (compiled once, then found by a key built while recording).
//
// Only values still referenced outside the trace (live tensors) become program results, so
// temporaries never reach device memory. The trace is cut at host reads, explicit syncs, a size
// limit, and at the boundaries of a detected loop, so every iteration maps onto the same cached
// executables.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "eager/executor.h"
#include "eager/lazy.h"
#include "eager/origin.h"

namespace tpu::eager {

// A recorded op that spans devices: a collective of a process group whose ranks are threads of
// this process, each driving its own device. A program holding collectives runs on every rank's
// device at once, in one replicated execution; the ranks meet for it (distributed/ installs how).
struct CollectiveOp {
  std::string group;  // the group's id, the same on every rank
  uint64_t seq = 0;   // its number among the group's collectives
  std::string what;   // "all_reduce(sum) tensor<4xf32>"
  int size = 0;       // the group's ranks
  int rank = 0;       // this device's rank in it
  std::chrono::milliseconds timeout{0};
};
using CollectivePtr = std::shared_ptr<const CollectiveOp>;

// One rank's program at a meeting: `fused` when it is a flushed trace holding `collectives`
// (the ranks meet at the first), else the one collective `collectives[0]`.
struct Meeting {
  std::vector<CollectivePtr> collectives;
  bool fused = false;
  std::string signature;  // compared across ranks
};
// The ranks brought different fused programs: each runs its trace op by op instead, every
// collective on its own.
struct CollectiveMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Runs the program `build` makes (cached under `key`) with this rank's `inputs`, once every rank
// of the meeting has joined; returns this rank's outputs. Throws CollectiveMismatch, or OpError.
using MeetFn = std::function<std::vector<rt::BufferPtr>(
    const Meeting& m, int device, const std::vector<rt::BufferPtr>& inputs, const ir::Hash128& key,
    const std::function<ir::Graph()>& build)>;
void SetMeet(MeetFn meet);

// Buffer donation on or off (TORCHTPU_DONATE=0 starts it off): for benchmarks, on against off
// in one process.
void SetDonation(bool on);

class Trace {
 public:
  explicit Trace(int device) : device_(device) {}

  // Records `g` applied to `inputs` (pending or ready values); returns g's results, pending.
  // `collective`: g is a collective (its results are computed even when nobody holds them, as
  // the other ranks wait for it).
  std::vector<LazyPtr> Record(ir::Graph g, const std::vector<LazyPtr>& inputs, std::string op,
                              OriginPtr origin, CollectivePtr collective = nullptr);
  // The same for a shared graph whose StructuralHash is `h`.
  std::vector<LazyPtr> Record(std::shared_ptr<const ir::Graph> g, const ir::Hash128& h,
                              const std::vector<LazyPtr>& inputs, std::string op, OriginPtr origin,
                              CollectivePtr collective = nullptr);
  // The buffer of `v` (a value of this device), flushing first if it is pending.
  rt::BufferPtr Materialize(const LazyPtr& v);
  void Flush();
  size_t pending_ops();
  // Ops recorded here so far (all time): unchanged for a while, the recording thread is idle.
  uint64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }

  // A capture (torch.compile): from BeginCapture, this device records the calling thread's ops
  // whatever the mode, and cuts nothing; EndCapture runs everything recorded as one program that
  // returns `results` and hands back that program, so the same graph can run again on new
  // buffers. Anything that flushes in between (a host read, another thread) spoils the capture:
  // EndCapture then runs what is pending as usual and returns nothing.
  struct Program {
    rt::ExecutablePtr exe;  // null when no recorded op produced a result
    std::vector<rt::BufferPtr> params;
    // Per result: the program output that computes it, or -1 when it was not computed by the
    // capture: then `held` is the buffer it held (an input or a constant).
    std::vector<int64_t> output;
    std::vector<rt::BufferPtr> held;
  };
  void BeginCapture();
  std::optional<Program> EndCapture(const std::vector<LazyPtr>& results);
  // Whether the calling thread is capturing on this device (Submit records then).
  bool CapturingHere() const {
    return capturing_.load(std::memory_order_relaxed) &&
           capture_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

  // The size limit (ops per program); 0 restores the default. Setting it, even to its value,
  // restarts every trace's loop detection, so the cuts that follow do not depend on the past.
  static void SetMaxOps(size_t n);
  static size_t MaxOps();

 private:
  struct Op {
    std::shared_ptr<const ir::Graph> g;
    ir::Hash128 hash;
    std::vector<int64_t> inputs;  // >= 0: external index; < 0: ~value (a result of an earlier op)
    uint32_t first_value = 0;     // this op's results are values first_value, first_value + 1, ...
    std::string name;
    OriginPtr origin;
    CollectivePtr collective;
  };
  // What a flush takes out of the trace.
  struct Taken {
    std::vector<Op> ops;
    std::vector<rt::BufferPtr> externals;
    std::vector<LazyPtr> live;            // per value: the value, if anything still holds it
    std::vector<uint32_t> value_op;       // per value: the op that produces it
    std::vector<rt::BufferPtr> computed;  // per value: its buffer, once a program returned it
    std::vector<std::shared_ptr<const std::string>> lost;  // per value: why it was not computed
  };

  int64_t External(const rt::BufferPtr& buf);
  // One shared graph per op structure: a loop records the same ops every step, and a flush then
  // frees no graphs (freeing a thousand small graphs at once was a tenth of the host's time).
  std::shared_ptr<const ir::Graph> Intern(const ir::Hash128& h, ir::Graph&& g);
  Taken Take();
  // Gives live values the buffers a flush computed, or the reason they were lost.
  static void Settle(Taken& t);
  // Runs everything recorded. With `wanted` (a host read), the ops `wanted` depends on run first
  // as their own program, so the read returns while the rest of the trace still runs.
  void FlushLocked(const Lazy* wanted = nullptr);
  // Runs the ops with part[i] == which as one program; returns the failure, if any.
  // With `program`, it also reports the program it ran, its parameters and outputs (values).
  std::optional<OpError> RunPart(Taken& t, const std::vector<char>& part, char which,
                                 const std::vector<char>& needed_later, Program* program = nullptr,
                                 std::vector<uint32_t>* program_outputs = nullptr);
  // The {parameter, output} pairs of a part's program whose output may reuse the parameter's
  // buffer: buffers that nothing outside the trace holds any more (in-place updates), given to
  // an output of the type of the value the buffer holds (`logical`: a padded buffer holds a
  // smaller value, and only a bounded program can give it away). Off with TORCHTPU_DONATE=0.
  static std::vector<std::pair<int64_t, int64_t>> Donations(
      const Taken& t, const std::vector<char>& part, char which,
      const std::vector<rt::BufferPtr>& params, const std::vector<ir::Type>& logical,
      const std::vector<int64_t>& param_src, const std::vector<uint32_t>& outputs);
  // Runs a part op by op after its program failed: every value that does not depend on the
  // failing op is computed; returns the first failure, naming the op and where it was recorded.
  // Each collective meets the other ranks on its own, or fails with `met` (its meeting failed).
  std::optional<OpError> Replay(Taken& t, const std::vector<size_t>& ops,
                                const OpError* met = nullptr);
  // Runs a part whose ranks brought different programs: the ops between collectives as programs
  // of this device, each collective on its own with the other ranks, in recorded order.
  std::optional<OpError> RunSegments(Taken& t, const std::vector<size_t>& ops);
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
  std::vector<uint32_t> value_op_;
  std::thread::id recorder_;  // the thread that recorded the last op
  std::unordered_map<ir::Hash128, std::shared_ptr<const ir::Graph>, ir::Hash128Hasher> interned_;
  // The group of the collectives held (empty: none). A program's collectives are all of one
  // group: its ranks are the program's replicas.
  std::string collective_group_;
  std::atomic<uint64_t> recorded_{0};
  std::atomic<bool> capturing_{false};
  std::atomic<std::thread::id> capture_thread_;
  bool capture_spoiled_ = false;

  std::deque<uint64_t> history_;  // hashes of the most recent ops, across flushes
  size_t period_ = 0;             // detected loop length in ops (0: none)
  size_t span_ = 0;               // cut length: period_, or the largest multiple of it <= max ops
  size_t phase_ = 0;              // ops since the last loop boundary
  bool cut_due_ = false;          // the last op ended a program: the next Record runs it first
  uint64_t limit_epoch_ = 0;      // SetMaxOps calls seen: each one starts loop detection over
};

Trace& TraceOf(int device);
void FlushAllTraces();

}  // namespace tpu::eager
