// Builds one program from tpu tensors: reads tensors (through their view programs), takes
// scalars as parameters, writes results back into storages, runs it and swaps the buffers.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <unordered_map>
#include <vector>

#include "aten/storage.h"
#include "eager/checks.h"
#include "ir/builder.h"
#include "lowering/rule.h"

namespace tpu::aten {

using ir::Value;

class GraphBuilder {
 public:
  // `op` names the op in error messages.
  GraphBuilder(int device, std::string op) : device_(device), op_(std::move(op)) {}

  ir::Graph g;

  // A graph parameter bound to `v`.
  Value Input(const eager::LazyPtr& v);
  // The value of a tpu tensor (its view of its storage's current buffer, with its conjugate and
  // negative bits applied).
  Value Read(const at::Tensor& t);
  // A 0-d parameter holding a host scalar (bool -> pred, integral -> s64, else f64).
  Value Scalar(const at::Scalar& s);
  // A CPU tensor uploaded as a parameter.
  Value Upload(const at::Tensor& cpu);
  // Schedules writing `v` (shaped like t) into t's storage at t's view.
  void Write(const at::Tensor& t, Value v);
  // The op's value checks (see eager/checks.h): their flag becomes one more result, read by Run.
  void Checks(const std::vector<lowering::Check>& checks);
  // Runs (or records, in fused mode) the graph and swaps written values into their slots.
  // Returns the graph's own results. Run now, a failed check raises before anything is written.
  std::vector<eager::LazyPtr> Run();
  int device() const { return device_; }

  // What the op cache (aten/op_cache.h) needs to replay this graph, known after Run. Each input
  // is a storage's current buffer or a scalar's value; other inputs (uploads, random state)
  // make the graph unreplayable.
  struct Source {
    const c10::StorageImpl* storage = nullptr;  // null: the scalar below
    uint64_t bits = 0;
    rt::DType dtype = rt::DType::kInvalid;
  };
  // Run keeps the graph (shared and hashed) for the op cache, when it is replayable.
  void KeepGraph() { keep_graph_ = true; }
  bool replayable() const { return replayable_; }
  const std::vector<Source>& sources() const { return sources_; }
  // The storages written, in the order of the graph's results after its own results.
  std::vector<const c10::StorageImpl*> WrittenStorages() const;
  const std::shared_ptr<const ir::Graph>& submitted() const { return submitted_; }
  const ir::Hash128& hash() const { return hash_; }
  const eager::CheckTexts& check_texts() const { return check_texts_; }
  bool has_check() const { return check_ >= 0; }

 private:
  Value ReadStored(const at::Tensor& t);
  Value Base(const at::Tensor& t, rt::DType as);
  // A graph parameter bound to `v` (one per distinct value), and where it came from; without a
  // source the op cache cannot replay the graph.
  Value SourcedInput(const eager::LazyPtr& v, std::optional<Source> source);

  int device_;
  std::string op_;
  Value check_ = -1;
  eager::CheckTexts check_texts_;
  std::vector<eager::LazyPtr> inputs_;
  std::vector<Source> sources_;  // per input
  bool replayable_ = true;
  bool keep_graph_ = false;
  std::shared_ptr<const ir::Graph> submitted_;
  ir::Hash128 hash_;
  std::unordered_map<const eager::Lazy*, Value> params_;
  // Storages written in this graph and the value that will become their buffer, in the order
  // of the writes: the program's results must not depend on slot addresses, or the same op
  // would hash (and compile) differently from run to run.
  struct Written {
    Slot* slot;
    c10::Storage storage;
    Value value;
  };
  std::vector<Written> written_;
  const Written* FindWritten(Slot* slot) const;
};

// The device value of a host scalar (bool -> pred, integral -> s64, else f64); `cached` values
// are shared by every program that takes the same scalar.
eager::LazyPtr ScalarValue(const at::Scalar& s, int device, bool cached);
// The bits and dtype ScalarValue uploads for `s`.
std::pair<uint64_t, rt::DType> ScalarBits(const at::Scalar& s);
// The device value of a host tensor (0-d: a scalar, as above).
eager::LazyPtr HostValue(const at::Tensor& cpu, int device, bool cached);

}  // namespace tpu::aten
