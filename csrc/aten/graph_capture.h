// torch.compile's graphs as one program each. A capture runs the graph once through the eager
// kernels with every op recorded and nothing cut (eager::Trace::BeginCapture), so a graph is
// lowered by exactly the steps an eager op takes; the recorded trace becomes one program. Later
// calls run that program directly on their own inputs: no Python, no Meta, no graph building.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "eager/trace.h"

namespace tpu::aten {

// What a capture learned about one graph, for inputs laid out like the captured ones.
class GraphProgram {
 public:
  // Runs the program on `inputs`; nullopt when their layout differs from the captured one (the
  // caller captures again for the new layout).
  std::optional<std::vector<c10::IValue>> Run(const std::vector<c10::IValue>& inputs) const;

  // A parameter's source on each call.
  struct Param {
    enum class Kind { kInput, kUpload, kRandom, kConstant } kind;
    int input = -1;           // kInput, kUpload: the graph input
    at::Generator generator;  // kRandom: draws `count` values from it
    uint64_t count = 0;
    rt::BufferPtr buffer;  // kConstant
  };
  // A graph output: a tensor over a new storage (made from a program output or a constant), a
  // view of an input's storage, or a value that is not a tensor.
  struct Output {
    enum class Kind { kNewStorage, kInputStorage, kOther } kind;
    int storage = -1;  // kNewStorage: index into storages_; kInputStorage: the input
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    at::ScalarType dtype = at::kFloat;
    c10::IValue other;
  };
  // A value the call produces: a program output, or (-1) a buffer the capture already held,
  // which every call reuses (buffers are immutable), or nothing (a storage never written).
  struct Source {
    int64_t output = -1;
    rt::BufferPtr held;
  };
  struct Storage {
    size_t nbytes = 0;
    Source value;
  };
  // An input layout the program was captured for.
  struct InputLayout {
    bool tensor = false, tpu = false;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    size_t nbytes = 0;
    int same_storage_as = -1;  // the first input sharing this storage
    c10::IValue value;         // not a tensor: the value the graph was specialized to
  };

  int device = 0;
  rt::ExecutablePtr exe;
  std::vector<Param> params;
  std::vector<Output> outputs;
  std::vector<Storage> storages;
  std::vector<std::pair<int, Source>> mutations;  // (input, its new value) written back
  std::vector<InputLayout> layouts;
};

// Begins capturing a graph called with `inputs` on `device` (on the calling thread).
void BeginGraphCapture(int device, const std::vector<c10::IValue>& inputs);
// Ends it: `outputs` are the graph's outputs, already computed when this returns. Null when the
// graph cannot be replayed as one program (a host read or a CPU tensor output inside it).
std::shared_ptr<GraphProgram> EndGraphCapture(const std::vector<c10::IValue>& outputs);
// Abandons a capture whose graph raised (what was recorded still runs).
void AbortGraphCapture();

// Hooks for the kernels: what the current capture must know to rebind a parameter on replay.
// The value of a graph input uploaded from the host, or null when `cpu` is not a graph input.
eager::LazyPtr CaptureUpload(const at::Tensor& cpu, int device);
void NoteRandomDraw(const rt::BufferPtr& state, const at::Generator& gen, uint64_t count);

}  // namespace tpu::aten
