// The c10d backend "tpu". Every collective is a StableHLO collective (lowering/collective.h)
// when the group's ranks drive devices of one PJRT client (ranks as threads of one process);
// across processes on a plugin that cannot span them (XLA:CPU) the same collectives travel
// through a host backend (Gloo) on host copies, with the same semantics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "lowering/collective.h"

namespace tpu::dist {

// The result of one collective on one rank: complete once its outputs hold their values.
class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType type, std::string what, std::string meeting, int group_size,
          std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;
  // A receive from any source: the host work that knows who sent.
  void SetSourceWork(c10::intrusive_ptr<c10d::Work> w) { source_work_ = std::move(w); }

  void Complete(std::vector<at::Tensor> outputs);
  void Fail(const std::string& why);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::string what_;
  std::string meeting_;
  int group_size_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Work> source_work_;
};

// What a host backend's callbacks captured (works, the caller's tensors), kept once they ran
// and dropped later on a caller's thread. Dropping a tensor that Python holds takes the GIL:
// on a Gloo thread that would wait forever while the caller holding the GIL joins that thread,
// as destroying the process group at exit does.
class Deferred {
 public:
  void Keep(std::shared_ptr<void> p);
  void Drain();

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<void>> kept_;
};

class ProcessGroupTPU : public c10d::Backend {
 public:
  // `uid` is the same on every rank of the group and unique to it. `host` (Gloo over the same
  // store), when given, carries every collective instead of XLA. `device_ids`, when given, are
  // the global PJRT device ids of the group's ranks on a client that spans their processes:
  // each rank then launches every collective program on its own device. `fuse`: in fused mode
  // the collectives are recorded into the ranks' traces (recorded.h), with ranks as threads.
  ProcessGroupTPU(int rank, int size, std::chrono::milliseconds timeout, std::string uid,
                  c10::intrusive_ptr<c10d::Backend> host, std::vector<int> device_ids = {},
                  bool fuse = false);
  ~ProcessGroupTPU() override;

  const std::string getBackendName() const override { return "tpu"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  // Collectives issued so far on this rank (every rank issues them in the same order).
  void setSequenceNumberForGroup() override {
    if (host_) host_->setSequenceNumberForGroup();
  }
  uint64_t getSequenceNumberForGroup() override {
    return host_ ? host_->getSequenceNumberForGroup() : seq_;
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  // Host transport only: the XLA transports need the source to build the program.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  using Finish = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& results)>;
  // A message from `src` to `dst`: its own meeting, where the sender is participant 0.
  struct PointToPoint {
    std::string meeting;
    int meeting_rank;
    int src, dst;
  };
  // The XLA path: joins this collective's meeting (the group's next one, or p2p's) with
  // `inputs`; `finish` writes the rank's results (as tpu tensors) into the caller's outputs and
  // returns them.
  c10::intrusive_ptr<TpuWork> Xla(c10d::OpType type, const lowering::CollectiveSpec& spec,
                                  const std::vector<at::Tensor>& inputs, Finish finish,
                                  const PointToPoint* p2p = nullptr);
  // Fused mode: whether this collective is recorded into the caller's trace, and recording it.
  bool Records(const PointToPoint* p2p, const std::vector<at::Tensor>& inputs);
  c10::intrusive_ptr<TpuWork> Record(c10d::OpType type, const lowering::CollectiveSpec& spec,
                                     const std::string& what, const std::vector<at::Tensor>& inputs,
                                     const Finish& finish);
  PointToPoint Pair(int src, int dst, int tag);
  lowering::CollectiveSpec PermuteSpec(const at::Tensor& t) const;
  // The host path: `run` issues the host backend's collective on `cpu` copies; when it
  // completes, `finish` copies results back.
  c10::intrusive_ptr<TpuWork> Host(c10d::OpType type, const std::string& what,
                                   c10::intrusive_ptr<c10d::Work> host_work,
                                   std::function<std::vector<at::Tensor>()> finish);
  c10::intrusive_ptr<c10d::Work> Track(c10::intrusive_ptr<TpuWork> w);
  // Runs `fn(f)` when `future` completes; what `fn` captured is dropped through deferred_.
  void OnDone(const c10::intrusive_ptr<c10::ivalue::Future>& future,
              std::function<void(c10::ivalue::Future&)> fn);
  lowering::CollectiveSpec Spec(lowering::Collective kind,
                                const std::vector<at::Tensor>& operands) const;
  c10::intrusive_ptr<c10d::Work> AllToAllUneven(at::Tensor& output, const at::Tensor& input,
                                                const std::vector<int64_t>& output_splits,
                                                const std::vector<int64_t>& input_splits);

  std::chrono::milliseconds timeout_;
  std::string uid_;
  c10::intrusive_ptr<c10d::Backend> host_;
  std::vector<int> device_ids_;
  bool fuse_;
  uint64_t seq_ = 0;
  std::map<std::pair<int, int>, uint64_t> p2p_seq_;  // (src, dst) -> messages so far
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<TpuWork>> coalesced_;
  std::shared_ptr<Deferred> deferred_ = std::make_shared<Deferred>();
};

}  // namespace tpu::dist
