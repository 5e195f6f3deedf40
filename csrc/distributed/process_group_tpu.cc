#include "distributed/process_group_tpu.h"

#include <torch/csrc/distributed/c10d/exception.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "aten/storage.h"
#include "distributed/recorded.h"
#include "distributed/rendezvous.h"
#include "eager/executor.h"
#include "eager/profile.h"
#include "eager/trace.h"

namespace tpu::dist {

namespace {

using lowering::Collective;
using lowering::CollectiveSpec;
using lowering::Reduction;

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

// ---- Tensors in and out of collective programs ----

bool WholeStorage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 && t.nbytes() == t.storage().nbytes();
}

bool Matches(const ir::Type& type, const at::Tensor& t) {
  return type.dtype == aten::ToDType(t.scalar_type()) &&
         type.dims == std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
}

// The value of `t`, shaped and typed like t (pending in fused mode).
eager::LazyPtr InputValue(const at::Tensor& t) {
  eager::LazyPtr v = WholeStorage(t) ? aten::Current(t.storage()) : nullptr;
  if (v != nullptr && Matches(v->type, t)) return v;
  // A view, a reinterpretation or a never-written tensor: a fresh tensor holds exactly t.
  at::Tensor c = WholeStorage(t) && v == nullptr ? at::zeros_like(t, at::MemoryFormat::Contiguous)
                                                 : t.clone(at::MemoryFormat::Contiguous);
  v = aten::Current(c.storage());
  TORCH_CHECK(Matches(v->type, t), "tpu: the input of a collective has an unexpected layout");
  return v;
}

// The buffer of InputValue(t) (a host read: flushes t's device).
rt::BufferPtr InputBuffer(const at::Tensor& t) { return eager::Materialize(InputValue(t)); }

// A new tpu tensor holding `v`.
at::Tensor Wrap(const eager::LazyPtr& v) {
  c10::DeviceGuard guard(c10::Device(kTpu, static_cast<c10::DeviceIndex>(v->device)));
  at::Tensor t =
      at::empty(v->type.dims, at::TensorOptions()
                                  .dtype(aten::ToScalarType(v->type.dtype))
                                  .device(kTpu, static_cast<c10::DeviceIndex>(v->device)));
  aten::Assign(t.storage(), v);
  return t;
}

// Writes `src` into `dst` (same numel): swaps the buffer in when dst is its whole storage.
void Write(const at::Tensor& dst, const at::Tensor& src) {
  if (WholeStorage(dst) && WholeStorage(src) && dst.sizes() == src.sizes() &&
      dst.scalar_type() == src.scalar_type() && dst.device() == src.device()) {
    aten::Assign(dst.storage(), aten::Current(src.storage()));
    return;
  }
  dst.copy_(src.reshape(dst.sizes()));
}

void CheckTpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.device().type() == kTpu, what, " must be a tpu tensor, got one on ",
                    t.device());
  TORCH_CHECK_VALUE(!t.is_sparse(), what, " must be dense");
}

void CheckSingle(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu: ", op, " takes one tensor per rank, got ",
                    tensors.size());
  CheckTpu(tensors[0], "the tensor");
}

Reduction ToReduction(const c10d::ReduceOp& op, double* factor) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return Reduction::kSum;
    case c10d::ReduceOp::AVG:
      return Reduction::kAvg;
    case c10d::ReduceOp::PRODUCT:
      return Reduction::kProduct;
    case c10d::ReduceOp::MIN:
      return Reduction::kMin;
    case c10d::ReduceOp::MAX:
      return Reduction::kMax;
    case c10d::ReduceOp::BAND:
      return Reduction::kBand;
    case c10d::ReduceOp::BOR:
      return Reduction::kBor;
    case c10d::ReduceOp::BXOR:
      return Reduction::kBxor;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(s != nullptr, "tpu: PREMUL_SUM without a factor");
      *factor = s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
      return Reduction::kPremulSum;
    }
    default:
      TORCH_CHECK_VALUE(false, "tpu: unsupported ReduceOp ", static_cast<int>(op.op_));
  }
}

// Checks the reduction against the dtype now, at the caller's line.
void CheckReduction(Reduction r, const at::Tensor& t) {
  try {
    lowering::CombinerOp(r, aten::ToDType(t.scalar_type()));
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, "tpu: ", e.what(), ", got ", t.scalar_type());
  }
}

// ---- Programs: compiled (and cached, in memory and on disk) like every other program ----

// Runs `spec` with one replica per part (see RunReplicated for `ids`).
std::vector<std::vector<rt::BufferPtr>> LaunchProgram(const CollectiveSpec& spec,
                                                      const std::vector<Part>& parts,
                                                      std::vector<int> ids) {
  ir::Graph g = lowering::CollectiveProgram(spec);
  std::optional<eager::ProgramLabel>
      label;  // the profile's row, e.g. "all_reduce(sum) tensor<6xf32> over 2"
  if (eager::Profiling() && !parts.empty()) label.emplace(parts[0].signature);
  return RunReplicated(
      parts, ir::StructuralHash(g), [&] { return g; }, std::move(ids));
}

std::string DescribeTimeout(const std::string& what, std::chrono::milliseconds t) {
  return "tpu: " + what + " timed out after " + std::to_string(t.count()) + " ms";
}

}  // namespace

// ---- Work ----

TpuWork::TpuWork(int rank, c10d::OpType type, std::string what, std::string meeting, int group_size,
                 std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      what_(std::move(what)),
      meeting_(std::move(meeting)),
      group_size_(group_size),
      timeout_(timeout) {}

bool TpuWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool TpuWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && !error_;
}

std::exception_ptr TpuWork::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

int TpuWork::sourceRank() const {
  TORCH_CHECK(source_work_, "sourceRank() is only known for a receive from any source");
  return source_work_->sourceRank();
}

std::vector<at::Tensor> TpuWork::result() {
  std::lock_guard<std::mutex> lock(mu_);
  return outputs_;
}

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  std::chrono::milliseconds limit = timeout == kNoTimeout ? timeout_ : timeout;
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, limit, [&] { return done_; })) {
    lock.unlock();
    std::string msg = DescribeTimeout(what_, limit);
    if (!meeting_.empty()) {
      std::vector<int> missing = Missing(meeting_, group_size_);
      Abandon(meeting_);
      if (!missing.empty()) {
        msg += ": ranks";
        for (int r : missing) msg += " " + std::to_string(r);
        msg += " never issued it";
      }
    }
    Fail(msg);
    lock.lock();
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void TpuWork::Complete(std::vector<at::Tensor> outputs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    outputs_ = outputs;
  }
  cv_.notify_all();
  future_->markCompleted(c10::IValue(std::move(outputs)));
}

void TpuWork::Fail(const std::string& why) {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    e = std::make_exception_ptr(
        c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, why));
    error_ = e;
  }
  cv_.notify_all();
  future_->setError(e);
}

// ---- Backend ----

ProcessGroupTPU::ProcessGroupTPU(int rank, int size, std::chrono::milliseconds timeout,
                                 std::string uid, c10::intrusive_ptr<c10d::Backend> host,
                                 std::vector<int> device_ids, bool fuse)
    : c10d::Backend(rank, size),
      timeout_(timeout),
      uid_(std::move(uid)),
      host_(std::move(host)),
      device_ids_(std::move(device_ids)),
      fuse_(fuse && host_ == nullptr && device_ids_.empty()) {
  if (fuse_) InstallMeet();
}

ProcessGroupTPU::~ProcessGroupTPU() {
  // Joins its threads, so no callback runs after: this group made its host backend and holds
  // the only reference (torchtpu/distributed.py).
  host_.reset();
  deferred_->Drain();
}

void Deferred::Keep(std::shared_ptr<void> p) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.push_back(std::move(p));
}

void Deferred::Drain() {
  std::vector<std::shared_ptr<void>> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(kept_);
  }
}

void ProcessGroupTPU::OnDone(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                             std::function<void(c10::ivalue::Future&)> fn) {
  deferred_->Drain();  // on the caller's thread
  auto held = std::make_shared<std::function<void(c10::ivalue::Future&)>>(std::move(fn));
  // Moved into deferred_ once run: the callback itself then holds nothing when it is destroyed.
  future->addCallback(
      [held = std::move(held), deferred = deferred_](c10::ivalue::Future& f) mutable {
        try {
          (*held)(f);
        } catch (...) {
          deferred->Keep(std::move(held));
          throw;
        }
        deferred->Keep(std::move(held));
      });
}

void ProcessGroupTPU::startCoalescing() {
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::endCoalescing() {
  coalescing_ = false;
  auto works = std::move(coalesced_);
  coalesced_.clear();
  auto all = c10::make_intrusive<TpuWork>(rank_, c10d::OpType::COALESCED, "coalesced", "", size_,
                                          timeout_);
  if (works.empty()) {
    all->Complete({});
    return all;
  }
  // Complete once every member has; the first failure fails the whole.
  auto left = std::make_shared<std::atomic<size_t>>(works.size());
  for (auto& w : works) {
    OnDone(w->getFuture(), [all, left, w](c10::ivalue::Future& f) {
      if (f.hasError()) {
        all->Fail(f.tryRetrieveErrorMessage());
      } else if (--*left == 0) {
        all->Complete({});
      }
    });
  }
  return all;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::Track(c10::intrusive_ptr<TpuWork> w) {
  if (coalescing_) coalesced_.push_back(w);
  return w;
}

ProcessGroupTPU::PointToPoint ProcessGroupTPU::Pair(int src, int dst, int tag) {
  uint64_t n = p2p_seq_[{src, dst}]++;
  return {uid_ + "/p2p/" + std::to_string(src) + ">" + std::to_string(dst) + "/" +
              std::to_string(tag) + "/" + std::to_string(n),
          src == rank_ ? 0 : 1, src, dst};
}

CollectiveSpec ProcessGroupTPU::PermuteSpec(const at::Tensor& t) const {
  CollectiveSpec s = Spec(Collective::kPermute, {t});
  s.size = 2;  // replica 0 sends, replica 1 receives
  s.pairs = {{0, 1}};
  return s;
}

CollectiveSpec ProcessGroupTPU::Spec(Collective kind,
                                     const std::vector<at::Tensor>& operands) const {
  CollectiveSpec s;
  s.kind = kind;
  s.size = size_;
  for (const at::Tensor& t : operands) {
    s.operands.push_back(ir::Type{aten::ToDType(t.scalar_type()),
                                  std::vector<int64_t>(t.sizes().begin(), t.sizes().end())});
  }
  return s;
}

c10::intrusive_ptr<TpuWork> ProcessGroupTPU::Xla(c10d::OpType type, const CollectiveSpec& spec,
                                                 const std::vector<at::Tensor>& inputs,
                                                 Finish finish, const PointToPoint* p2p) {
  const std::string what = lowering::Describe(spec);
  if (Records(p2p, inputs)) return Record(type, spec, what, inputs, finish);
  const std::string key = p2p ? p2p->meeting : uid_ + "/" + std::to_string(seq_++);
  eager::GetMetrics().lone_collectives++;
  auto work =
      c10::make_intrusive<TpuWork>(rank_, type, what, key, static_cast<int>(spec.size), timeout_);
  Part part;
  part.device = inputs.empty() ? 0 : inputs[0].device().index();
  part.signature = what;
  for (const at::Tensor& t : inputs) part.inputs.push_back(InputBuffer(t));
  part.done = [work, finish](std::vector<rt::BufferPtr> outs, const std::string* error, bool) {
    if (error != nullptr) return work->Fail("tpu: " + *error);
    try {
      std::vector<at::Tensor> results;
      for (const rt::BufferPtr& b : outs) results.push_back(Wrap(eager::Lazy::Of(b, b->device())));
      work->Complete(finish(results));
    } catch (const std::exception& e) {
      work->Fail(std::string("tpu: writing the results of a collective failed: ") + e.what());
    }
  };
  if (device_ids_.empty()) {
    Join(key, static_cast<int>(spec.size), p2p ? p2p->meeting_rank : rank_, std::move(part),
         [spec](const std::vector<Part>& parts) { return LaunchProgram(spec, parts, {}); });
    return work;
  }
  // One client spans the processes: every rank launches the same program on its own device.
  std::vector<int> ids = device_ids_;
  if (p2p) ids = {device_ids_.at(p2p->src), device_ids_.at(p2p->dst)};
  try {
    auto outs = LaunchProgram(spec, {part}, ids);
    part.done(std::move(outs[0]), nullptr, false);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    part.done({}, &msg, false);
  }
  return work;
}

bool ProcessGroupTPU::Records(const PointToPoint* p2p, const std::vector<at::Tensor>& inputs) {
  return fuse_ && p2p == nullptr && device_ids_.empty() && !inputs.empty() &&
         eager::GetMode() == eager::Mode::kFused &&
         !eager::TraceOf(inputs[0].device().index()).CapturingHere();
}

c10::intrusive_ptr<TpuWork> ProcessGroupTPU::Record(c10d::OpType type, const CollectiveSpec& spec,
                                                    const std::string& what,
                                                    const std::vector<at::Tensor>& inputs,
                                                    const Finish& finish) {
  const int device = inputs[0].device().index();
  auto c = std::make_shared<eager::CollectiveOp>();
  c->group = uid_;
  c->seq = seq_++;
  c->what = what;
  c->size = static_cast<int>(spec.size);
  c->rank = rank_;
  c->timeout = timeout_;
  std::vector<eager::LazyPtr> values;
  for (const at::Tensor& t : inputs) values.push_back(InputValue(t));
  NoteRecorded(uid_, c->seq, rank_, device);
  std::vector<eager::LazyPtr> outs = eager::TraceOf(device).Record(
      lowering::CollectiveProgram(spec), values, what, eager::CaptureOrigin(), c);
  std::vector<at::Tensor> results;
  for (const eager::LazyPtr& v : outs) results.push_back(Wrap(v));
  // Issued, as on a stream: its results are values of the trace, so the work is complete.
  auto work = c10::make_intrusive<TpuWork>(rank_, type, what, "", size_, timeout_);
  work->Complete(finish(results));
  return work;
}

c10::intrusive_ptr<TpuWork> ProcessGroupTPU::Host(c10d::OpType type, const std::string& what,
                                                  c10::intrusive_ptr<c10d::Work> host_work,
                                                  std::function<std::vector<at::Tensor>()> finish) {
  auto work = c10::make_intrusive<TpuWork>(rank_, type, what, "", size_, timeout_);
  c10::intrusive_ptr<c10::ivalue::Future> future;
  try {
    future = host_work->getFuture();
  } catch (const c10::Error&) {
    // Some Gloo works have no future: finish this one now, on the caller's thread.
    try {
      host_work->wait();
      work->Complete(finish());
    } catch (const std::exception& e) {
      work->Fail(std::string("tpu (host transport): ") + e.what());
    }
    return work;
  }
  OnDone(future, [work, finish](c10::ivalue::Future& f) {
    if (f.hasError()) return work->Fail("tpu (host transport): " + f.tryRetrieveErrorMessage());
    try {
      work->Complete(finish());
    } catch (const std::exception& e) {
      work->Fail(std::string("tpu: copying results back failed: ") + e.what());
    }
  });
  return work;
}

namespace {

std::vector<at::Tensor> Cpu(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : ts) out.push_back(t.cpu());
  return out;
}

// On the CPU plugin a buffer is host memory: when `t` alone holds its buffer, a host backend can
// reduce that memory in place instead of a copy out and a copy back. Undefined otherwise.
at::Tensor HostAlias(const at::Tensor& t) {
  if (eager::Client().platform_name() != "cpu" || !WholeStorage(t)) return {};
  eager::LazyPtr v = aten::Current(t.storage());
  if (v == nullptr) return {};
  rt::BufferPtr b = eager::Materialize(v);
  eager::Synchronize(t.device().index());  // no program issued earlier still reads it
  // Holders: the slot and `v`; the buffer: `v` and `b`. Anyone else would see the change. A
  // padded value's `b` is a copy of its entries (eager/bounded.h), which this would not keep.
  if (v.use_count() > 2 || b.use_count() > 2 || b != v->buf || !Matches(v->type, t) ||
      aten::Current(t.storage()) != v) {
    return {};
  }
  return at::from_blob(
      b->UnsafePointer(), t.sizes(), [v](void*) {}, at::TensorOptions().dtype(t.scalar_type()));
}

// Gloo has neither AVG nor PREMUL_SUM: they travel as SUM with the scaling done on tpu.
c10d::ReduceOp HostOp(Reduction r, const c10d::ReduceOp& op) {
  return r == Reduction::kAvg || r == Reduction::kPremulSum ? c10d::ReduceOp(c10d::ReduceOp::SUM)
                                                            : op;
}
at::Tensor HostBefore(Reduction r, double factor, const at::Tensor& t) {
  return r == Reduction::kPremulSum ? (t * factor).cpu() : t.cpu();
}
void HostAfter(Reduction r, int size, const at::Tensor& dst, const at::Tensor& cpu) {
  if (r == Reduction::kAvg) cpu.div_(size);
  dst.copy_(cpu);
}

}  // namespace

// ---- Collectives ----

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  CheckSingle(tensors, "broadcast");
  at::Tensor t = tensors[0];
  if (host_) {
    auto cpu = Cpu(tensors);
    auto w = host_->broadcast(cpu, opts);
    return Track(Host(c10d::OpType::BROADCAST, "broadcast", w, [t, cpu] {
      t.copy_(cpu[0]);
      return std::vector<at::Tensor>{t};
    }));
  }
  CollectiveSpec s = Spec(Collective::kBroadcast, {t});
  s.root = opts.rootRank;
  return Track(Xla(c10d::OpType::BROADCAST, s, {t}, [t](const std::vector<at::Tensor>& r) {
    Write(t, r[0]);
    return std::vector<at::Tensor>{t};
  }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  CheckSingle(tensors, "allreduce");
  c10d::AllreduceCoalescedOptions o;
  o.reduceOp = opts.reduceOp;
  o.timeout = opts.timeout;
  return allreduce_coalesced(tensors, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  double factor = 1.0;
  Reduction r = ToReduction(opts.reduceOp, &factor);
  for (const at::Tensor& t : tensors) {
    CheckTpu(t, "the tensor");
    CheckReduction(r, t);
  }
  std::vector<at::Tensor> ts = tensors;
  if (host_) {
    std::vector<at::Tensor> cpu;
    std::vector<bool> aliased;
    for (const at::Tensor& t : ts) {
      at::Tensor alias = r == Reduction::kPremulSum ? at::Tensor() : HostAlias(t);
      aliased.push_back(alias.defined());
      cpu.push_back(alias.defined() ? alias : HostBefore(r, factor, t));
    }
    c10d::AllreduceCoalescedOptions o = opts;
    o.reduceOp = HostOp(r, opts.reduceOp);
    auto w = ts.size() == 1 ? host_->allreduce(cpu, o) : host_->allreduce_coalesced(cpu, o);
    int size = size_;
    return Track(Host(c10d::OpType::ALLREDUCE, "allreduce", w, [ts, cpu, aliased, r, size] {
      for (size_t i = 0; i < ts.size(); ++i) {
        if (!aliased[i]) {
          HostAfter(r, size, ts[i], cpu[i]);
        } else if (r == Reduction::kAvg) {
          cpu[i].div_(size);  // the tensor's own memory
        }
      }
      return ts;
    }));
  }
  CollectiveSpec s = Spec(Collective::kAllReduce, ts);
  s.reduction = r;
  s.factor = factor;
  return Track(Xla(c10d::OpType::ALLREDUCE, s, ts, [ts](const std::vector<at::Tensor>& res) {
    for (size_t i = 0; i < ts.size(); ++i) Write(ts[i], res[i]);
    return ts;
  }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  CheckSingle(tensors, "reduce");
  double factor = 1.0;
  Reduction r = ToReduction(opts.reduceOp, &factor);
  at::Tensor t = tensors[0];
  CheckReduction(r, t);
  const bool root = opts.rootRank == rank_;
  if (host_) {
    std::vector<at::Tensor> cpu{HostBefore(r, factor, t)};
    c10d::ReduceOptions o = opts;
    o.reduceOp = HostOp(r, opts.reduceOp);
    auto w = host_->reduce(cpu, o);
    int size = size_;
    return Track(Host(c10d::OpType::REDUCE, "reduce", w, [t, cpu, r, size, root] {
      if (root) HostAfter(r, size, t, cpu[0]);
      return std::vector<at::Tensor>{t};
    }));
  }
  CollectiveSpec s = Spec(Collective::kAllReduce, {t});
  s.reduction = r;
  s.factor = factor;
  return Track(Xla(c10d::OpType::REDUCE, s, {t}, [t, root](const std::vector<at::Tensor>& res) {
    if (root) Write(t, res[0]);
    return std::vector<at::Tensor>{t};
  }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckSingle(inputs, "allgather");
  TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                    "tpu: allgather needs one output list of world_size (", size_, ") tensors");
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  for (const at::Tensor& o : outs) {
    CheckTpu(o, "each output");
    TORCH_CHECK_VALUE(o.sizes() == in.sizes() && o.scalar_type() == in.scalar_type(),
                      "tpu: allgather outputs must match the input's size and dtype");
  }
  if (host_) {
    std::vector<std::vector<at::Tensor>> cpu_out{Cpu(outs)};
    std::vector<at::Tensor> cpu_in = Cpu(inputs);
    auto w = host_->allgather(cpu_out, cpu_in, opts);
    return Track(Host(c10d::OpType::ALLGATHER, "allgather", w, [outs, cpu_out] {
      for (size_t i = 0; i < outs.size(); ++i) outs[i].copy_(cpu_out[0][i]);
      return outs;
    }));
  }
  return Track(Xla(c10d::OpType::ALLGATHER, Spec(Collective::kAllGather, {in}), {in},
                   [outs](const std::vector<at::Tensor>& res) {
                     for (size_t i = 0; i < outs.size(); ++i) Write(outs[i], res[0][i]);
                     return outs;
                   }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // output_lists[rank][i] receives inputs[i] of `rank`.
  TORCH_CHECK_VALUE(static_cast<int>(output_lists.size()) == size_,
                    "tpu: allgather_coalesced needs world_size output lists");
  for (const auto& list : output_lists) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(),
                      "tpu: each output list of allgather_coalesced needs one tensor per input");
    for (size_t i = 0; i < list.size(); ++i) {
      CheckTpu(list[i], "each output");
      TORCH_CHECK_VALUE(
          list[i].sizes() == inputs[i].sizes() && list[i].scalar_type() == inputs[i].scalar_type(),
          "tpu: allgather_coalesced outputs must match their input's size and dtype");
    }
  }
  for (const at::Tensor& t : inputs) CheckTpu(t, "each input");
  std::vector<std::vector<at::Tensor>> outs = output_lists;
  if (host_) {
    std::vector<std::vector<at::Tensor>> cpu_out;
    for (const auto& list : outs) cpu_out.push_back(Cpu(list));
    std::vector<at::Tensor> cpu_in = Cpu(inputs);
    auto w = host_->allgather_coalesced(cpu_out, cpu_in, opts);
    return Track(Host(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", w, [outs, cpu_out] {
      std::vector<at::Tensor> all;
      for (size_t r = 0; r < outs.size(); ++r) {
        for (size_t i = 0; i < outs[r].size(); ++i) {
          outs[r][i].copy_(cpu_out[r][i]);
          all.push_back(outs[r][i]);
        }
      }
      return all;
    }));
  }
  return Track(Xla(c10d::OpType::ALLGATHER_COALESCED, Spec(Collective::kAllGather, inputs), inputs,
                   [outs](const std::vector<at::Tensor>& res) {
                     std::vector<at::Tensor> all;
                     for (size_t r = 0; r < outs.size(); ++r) {
                       for (size_t i = 0; i < outs[r].size(); ++i) {
                         Write(outs[r][i], res[i][r]);
                         all.push_back(outs[r][i]);
                       }
                     }
                     return all;
                   }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgather_into_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "tpu: one output per input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckTpu(inputs[i], "the input");
    CheckTpu(outputs[i], "the output");
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * size_,
                      "output tensor size must be equal to world_size times input tensor size");
    TORCH_CHECK_TYPE(outputs[i].scalar_type() == inputs[i].scalar_type(),
                     "output tensor must have the same type as input tensor");
  }
  std::vector<at::Tensor> outs = outputs;
  if (host_) {
    std::vector<at::Tensor> cpu_out = Cpu(outs), cpu_in = Cpu(inputs);
    c10::intrusive_ptr<c10d::Work> w;
    if (outs.size() == 1) {
      w = host_->_allgather_base(cpu_out[0], cpu_in[0], opts);
    } else {
      w = host_->allgather_into_tensor_coalesced(cpu_out, cpu_in, opts);
    }
    return Track(Host(c10d::OpType::_ALLGATHER_BASE, "allgather_into_tensor", w, [outs, cpu_out] {
      for (size_t i = 0; i < outs.size(); ++i) outs[i].copy_(cpu_out[i]);
      return outs;
    }));
  }
  return Track(Xla(c10d::OpType::_ALLGATHER_BASE, Spec(Collective::kAllGather, inputs), inputs,
                   [outs](const std::vector<at::Tensor>& res) {
                     for (size_t i = 0; i < outs.size(); ++i) Write(outs[i], res[i]);
                     return outs;
                   }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  CheckSingle(inputs, "gather");
  const bool root = opts.rootRank == rank_;
  std::vector<at::Tensor> outs = root ? outputs.at(0) : std::vector<at::Tensor>{};
  if (root) {
    TORCH_CHECK_VALUE(static_cast<int>(outs.size()) == size_,
                      "tpu: gather needs world_size outputs on the root");
  }
  if (host_) {
    std::vector<std::vector<at::Tensor>> cpu_out;
    if (root) cpu_out.push_back(Cpu(outs));
    std::vector<at::Tensor> cpu_in = Cpu(inputs);
    auto w = host_->gather(cpu_out, cpu_in, opts);
    return Track(Host(c10d::OpType::GATHER, "gather", w, [outs, cpu_out] {
      for (size_t i = 0; i < outs.size(); ++i) outs[i].copy_(cpu_out[0][i]);
      return outs;
    }));
  }
  return Track(Xla(c10d::OpType::GATHER, Spec(Collective::kAllGather, inputs), inputs,
                   [outs](const std::vector<at::Tensor>& res) {
                     for (size_t i = 0; i < outs.size(); ++i) Write(outs[i], res[0][i]);
                     return outs;
                   }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  CheckSingle(outputs, "scatter");
  at::Tensor out = outputs[0];
  const bool root = opts.rootRank == rank_;
  if (root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                      "tpu: scatter needs world_size inputs on the root");
  }
  if (host_) {
    std::vector<at::Tensor> cpu_out = Cpu(outputs);
    std::vector<std::vector<at::Tensor>> cpu_in;
    if (root) cpu_in.push_back(Cpu(inputs[0]));
    auto w = host_->scatter(cpu_out, cpu_in, opts);
    return Track(Host(c10d::OpType::SCATTER, "scatter", w, [out, cpu_out] {
      out.copy_(cpu_out[0]);
      return std::vector<at::Tensor>{out};
    }));
  }
  // The root's stacked inputs are broadcast; each rank keeps its row.
  std::vector<int64_t> dims = out.sizes().vec();
  dims.insert(dims.begin(), size_);
  at::Tensor stacked = root ? at::stack(inputs[0]) : at::zeros(dims, out.options());
  CollectiveSpec s = Spec(Collective::kBroadcast, {stacked});
  s.root = opts.rootRank;
  int rank = rank_;
  return Track(
      Xla(c10d::OpType::SCATTER, s, {stacked}, [out, rank](const std::vector<at::Tensor>& res) {
        Write(out, res[0][rank]);
        return std::vector<at::Tensor>{out};
      }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckSingle(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                    "tpu: reduce_scatter needs world_size inputs");
  at::Tensor stacked = at::stack(inputs[0]);
  at::Tensor out = outputs[0];
  return _reduce_scatter_base(out, stacked, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "tpu: one output per input");
  double factor = 1.0;
  Reduction r = ToReduction(opts.reduceOp, &factor);
  std::vector<at::Tensor> rows;  // each input as [world_size, *output.shape]
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckTpu(inputs[i], "the input");
    CheckTpu(outputs[i], "the output");
    CheckReduction(r, inputs[i]);
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * size_,
                      "input tensor must be the same size as output size times world size");
    TORCH_CHECK_TYPE(outputs[i].scalar_type() == inputs[i].scalar_type(),
                     "input tensor must be the same type as the output tensor.");
    std::vector<int64_t> dims = outputs[i].sizes().vec();
    dims.insert(dims.begin(), size_);
    rows.push_back(inputs[i].reshape(dims));
  }
  std::vector<at::Tensor> outs = outputs;
  if (host_) {
    std::vector<at::Tensor> cpu_in, cpu_out = Cpu(outs);
    for (const at::Tensor& t : inputs) cpu_in.push_back(HostBefore(r, factor, t));
    c10d::ReduceScatterOptions o = opts;
    o.reduceOp = HostOp(r, opts.reduceOp);
    c10::intrusive_ptr<c10d::Work> w;
    if (outs.size() == 1) {
      w = host_->_reduce_scatter_base(cpu_out[0], cpu_in[0], o);
    } else {
      w = host_->reduce_scatter_tensor_coalesced(cpu_out, cpu_in, o);
    }
    int size = size_;
    return Track(
        Host(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter", w, [outs, cpu_out, r, size] {
          for (size_t i = 0; i < outs.size(); ++i) {
            HostAfter(r, size, outs[i], cpu_out[i]);
          }
          return outs;
        }));
  }
  CollectiveSpec s = Spec(Collective::kReduceScatter, rows);
  s.reduction = r;
  s.factor = factor;
  return Track(
      Xla(c10d::OpType::_REDUCE_SCATTER_BASE, s, rows, [outs](const std::vector<at::Tensor>& res) {
        for (size_t i = 0; i < outs.size(); ++i) Write(outs[i], res[i]);
        return outs;
      }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions& opts) {
  CheckTpu(input, "the input");
  CheckTpu(output, "the output");
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                   "output tensor must have the same type as input tensor");
  if (host_) {
    std::vector<at::Tensor> cpu_out = Cpu({output}), cpu_in = Cpu({input});
    auto w = host_->alltoall_base(cpu_out[0], cpu_in[0], output_splits, input_splits, opts);
    at::Tensor out = output;
    return Track(Host(c10d::OpType::ALLTOALL_BASE, "all_to_all", w, [out, cpu_out] {
      out.copy_(cpu_out[0]);
      return std::vector<at::Tensor>{out};
    }));
  }
  if (!output_splits.empty() || !input_splits.empty()) {
    return AllToAllUneven(output, input, output_splits, input_splits);
  }
  TORCH_CHECK_VALUE(
      input.dim() > 0 && input.size(0) % size_ == 0 && output.sizes() == input.sizes(),
      "tpu: all_to_all_single needs input and output of equal size, dim 0 "
      "divisible by world_size");
  std::vector<int64_t> dims = input.sizes().vec();
  dims[0] /= size_;
  dims.insert(dims.begin(), size_);
  at::Tensor rows = input.reshape(dims);
  at::Tensor out = output;
  return Track(Xla(c10d::OpType::ALLTOALL_BASE, Spec(Collective::kAllToAll, {rows}), {rows},
                   [out](const std::vector<at::Tensor>& res) {
                     Write(out, res[0]);
                     return std::vector<at::Tensor>{out};
                   }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::AllToAllUneven(
    at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& output_splits,
    const std::vector<int64_t>& input_splits) {
  auto even = [&](const at::Tensor& t) { return std::vector<int64_t>(size_, t.size(0) / size_); };
  std::vector<int64_t> in_splits = input_splits.empty() ? even(input) : input_splits;
  std::vector<int64_t> out_splits = output_splits.empty() ? even(output) : output_splits;
  TORCH_CHECK_VALUE(
      static_cast<int>(in_splits.size()) == size_ && static_cast<int>(out_splits.size()) == size_,
      "tpu: split sizes must have world_size entries");
  int64_t in_rows = 0, out_rows = 0, longest = 0;
  for (int j = 0; j < size_; ++j) {
    in_rows += in_splits[j];
    out_rows += out_splits[j];
    longest = std::max({longest, in_splits[j], out_splits[j]});
  }
  TORCH_CHECK_VALUE(in_rows == input.size(0) && out_rows == output.size(0),
                    "tpu: split sizes must add up to dim 0 of the input and the output");
  // Every rank pads its chunks to the longest chunk of any rank (agreed by a MAX all_reduce),
  // exchanges [world_size, longest, ...] with one all_to_all and keeps the real rows.
  at::Tensor m = at::full({1}, longest, input.options().dtype(at::kLong));
  std::vector<at::Tensor> mv{m};
  c10d::AllreduceOptions mo;
  mo.reduceOp = c10d::ReduceOp::MAX;
  allreduce(mv, mo)->wait();
  longest = m.item<int64_t>();
  std::vector<int64_t> dims = input.sizes().vec();
  dims[0] = longest;
  dims.insert(dims.begin(), size_);
  at::Tensor padded = at::zeros(dims, input.options());
  int64_t at_row = 0;
  for (int j = 0; j < size_; ++j) {
    if (in_splits[j] > 0) {
      padded.select(0, j).narrow(0, 0, in_splits[j]).copy_(input.narrow(0, at_row, in_splits[j]));
    }
    at_row += in_splits[j];
  }
  at::Tensor out = output;
  int size = size_;
  return Track(
      Xla(c10d::OpType::ALLTOALL_BASE, Spec(Collective::kAllToAll, {padded}), {padded},
          [out, out_splits, size](const std::vector<at::Tensor>& res) {
            int64_t row = 0;
            for (int j = 0; j < size; ++j) {
              if (out_splits[j] > 0) {
                out.narrow(0, row, out_splits[j]).copy_(res[0][j].narrow(0, 0, out_splits[j]));
              }
              row += out_splits[j];
            }
            return std::vector<at::Tensor>{out};
          }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(
      static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
      "tpu: all_to_all needs world_size inputs and outputs");
  // As one uneven all_to_all_single over the flattened tensors.
  std::vector<at::Tensor> flat_in, flat_out;
  std::vector<int64_t> in_splits, out_splits;
  for (int j = 0; j < size_; ++j) {
    CheckTpu(inputs[j], "each input");
    CheckTpu(outputs[j], "each output");
    flat_in.push_back(inputs[j].reshape({-1}));
    in_splits.push_back(inputs[j].numel());
    out_splits.push_back(outputs[j].numel());
  }
  at::Tensor in = at::cat(flat_in);
  at::Tensor out =
      at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})}, in.options());
  auto inner = alltoall_base(out, in, out_splits, in_splits, opts);
  std::vector<at::Tensor> outs = outputs;
  auto work = c10::make_intrusive<TpuWork>(rank_, c10d::OpType::ALLTOALL, "all_to_all", "", size_,
                                           timeout_);
  OnDone(inner->getFuture(), [work, outs, out, out_splits](c10::ivalue::Future& f) {
    if (f.hasError()) return work->Fail(f.tryRetrieveErrorMessage());
    int64_t at_elem = 0;
    for (size_t j = 0; j < outs.size(); ++j) {
      outs[j].copy_(out.narrow(0, at_elem, out_splits[j]).view(outs[j].sizes()));
      at_elem += out_splits[j];
    }
    work->Complete(outs);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  CheckSingle(tensors, "send");
  TORCH_CHECK_VALUE(dst != rank_ && dst >= 0 && dst < size_, "tpu: invalid destination rank ", dst);
  at::Tensor t = tensors[0];
  if (host_) {
    auto cpu = Cpu(tensors);
    auto w = host_->send(cpu, dst, tag);
    return Track(
        Host(c10d::OpType::SEND, "send", w, [t, cpu] { return std::vector<at::Tensor>{t}; }));
  }
  PointToPoint p2p = Pair(rank_, dst, tag);
  return Track(Xla(
      c10d::OpType::SEND, PermuteSpec(t), {t},
      [t](const std::vector<at::Tensor>&) { return std::vector<at::Tensor>{t}; }, &p2p));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  CheckSingle(tensors, "recv");
  TORCH_CHECK_VALUE(src != rank_ && src >= 0 && src < size_, "tpu: invalid source rank ", src);
  at::Tensor t = tensors[0];
  if (host_) {
    auto cpu = Cpu(tensors);
    auto w = host_->recv(cpu, src, tag);
    return Track(Host(c10d::OpType::RECV, "recv", w, [t, cpu] {
      t.copy_(cpu[0]);
      return std::vector<at::Tensor>{t};
    }));
  }
  PointToPoint p2p = Pair(src, rank_, tag);
  // The receiver's replica contributes a placeholder of the message's type.
  at::Tensor zeros = at::zeros_like(t, at::MemoryFormat::Contiguous);
  return Track(Xla(
      c10d::OpType::RECV, PermuteSpec(t), {zeros},
      [t](const std::vector<at::Tensor>& res) {
        Write(t, res[0]);
        return std::vector<at::Tensor>{t};
      },
      &p2p));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
  CheckSingle(tensors, "recv");
  TORCH_CHECK(host_,
              "tpu: a receive from any source needs the host transport (ranks in "
              "separate processes); name the source rank");
  at::Tensor t = tensors[0];
  auto cpu = Cpu(tensors);
  auto w = host_->recvAnysource(cpu, tag);
  auto work = Host(c10d::OpType::RECVANYSOURCE, "recv", w, [t, cpu] {
    t.copy_(cpu[0]);
    return std::vector<at::Tensor>{t};
  });
  work->SetSourceWork(w);
  return Track(work);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::barrier(const c10d::BarrierOptions& opts) {
  if (host_) {
    auto w = host_->barrier(opts);
    return Host(c10d::OpType::BARRIER, "barrier", w, [] { return std::vector<at::Tensor>{}; });
  }
  c10::DeviceIndex dev = c10::impl::getDeviceGuardImpl(kTpu)->getDevice().index();
  std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().device(kTpu, dev))};
  auto work = allreduce(one, c10d::AllreduceOptions());
  InputBuffer(one[0]);  // a barrier waits for every rank: when recorded, run it now
  return work;
}

}  // namespace tpu::dist
