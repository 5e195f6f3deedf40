#include "aten/graph_capture.h"

#include <unordered_map>

#include "aten/generator.h"
#include "aten/graph_builder.h"
#include "aten/storage.h"
#include "eager/bounded.h"
#include "eager/executor.h"
#include "eager/profile.h"

namespace tpu::aten {

namespace {

const c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

bool IsTpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

bool IsPlainValue(const c10::IValue& v) {
  return v.isNone() || v.isInt() || v.isDouble() || v.isBool();
}

bool SameValue(const c10::IValue& a, const c10::IValue& b) {
  if (a.isNone() || b.isNone()) return a.isNone() && b.isNone();
  if (a.isInt() && b.isInt()) return a.toInt() == b.toInt();
  if (a.isDouble() && b.isDouble()) return a.toDouble() == b.toDouble();
  if (a.isBool() && b.isBool()) return a.toBool() == b.toBool();
  return false;
}

using StorageKey = const c10::StorageImpl*;

// The layouts of `inputs`, with aliasing between tpu storages.
std::vector<GraphProgram::InputLayout> Layouts(const std::vector<c10::IValue>& inputs) {
  std::vector<GraphProgram::InputLayout> out(inputs.size());
  std::unordered_map<StorageKey, int> first;
  for (size_t k = 0; k < inputs.size(); ++k) {
    GraphProgram::InputLayout& l = out[k];
    if (!inputs[k].isTensor() || !inputs[k].toTensor().defined()) {
      l.value = inputs[k].isTensor() ? c10::IValue() : inputs[k];
      continue;
    }
    const at::Tensor& t = inputs[k].toTensor();
    l.tensor = true;
    l.tpu = IsTpu(t);
    l.dtype = t.scalar_type();
    l.sizes = t.sizes().vec();
    l.strides = t.strides().vec();
    l.offset = t.storage_offset();
    if (l.tpu) {
      l.nbytes = t.storage().nbytes();
      auto [it, inserted] = first.emplace(t.storage().unsafeGetStorageImpl(), k);
      if (!inserted) l.same_storage_as = it->second;
    }
  }
  return out;
}

bool SameLayout(const GraphProgram::InputLayout& a, const GraphProgram::InputLayout& b) {
  if (a.tensor != b.tensor) return false;
  if (!a.tensor) return SameValue(a.value, b.value);
  return a.tpu == b.tpu && a.dtype == b.dtype && a.sizes == b.sizes && a.strides == b.strides &&
         a.offset == b.offset && a.nbytes == b.nbytes && a.same_storage_as == b.same_storage_as;
}

struct Capture {
  int device = 0;
  std::vector<c10::IValue> inputs;
  std::vector<GraphProgram::InputLayout> layouts;
  std::vector<eager::LazyPtr> before;  // per tpu input: its storage's value when capture began
  std::unordered_map<const rt::Buffer*, int> uploads;  // buffer -> the graph input it holds
  std::unordered_map<const rt::Buffer*, std::pair<at::Generator, uint64_t>> draws;
  // The buffers those two maps name, alive until the capture ends: a freed one's address could
  // come back for another buffer of the program, which would then be taken for an upload.
  std::vector<rt::BufferPtr> pinned;
  bool usable = true;
};

thread_local Capture* g_capture = nullptr;

c10::Storage NewStorage(size_t nbytes, int device) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, TpuAllocator(), true);
}

at::Tensor TensorOver(c10::Storage storage, const GraphProgram::Output& o) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), kTpuKeys, caffe2::TypeMeta::fromScalarType(o.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
  return t;
}

}  // namespace

void BeginGraphCapture(int device, const std::vector<c10::IValue>& inputs) {
  TORCH_CHECK(g_capture == nullptr, "tpu: a compiled graph is already being captured");
  auto c = std::make_unique<Capture>();
  c->device = device;
  c->inputs = inputs;
  c->layouts = Layouts(inputs);
  c->before.resize(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const c10::IValue& v = inputs[k];
    if (v.isTensor() && IsTpu(v.toTensor())) {
      c->usable &= v.toTensor().device().index() == device;
      c->before[k] = Current(v.toTensor().storage());
    } else if (!v.isTensor()) {
      c->usable &= IsPlainValue(v);
    }
  }
  eager::TraceOf(device).BeginCapture();  // runs what is pending, so the inputs are ready
  // An input a bounded program left padded would be read through an unpadded copy, which the
  // program would then take as a constant: the storage holds the exact value instead.
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!c->before[k]) continue;
    c10::Storage storage = inputs[k].toTensor().storage();
    eager::LazyPtr v = Current(storage);  // an input sharing a storage may have made it exact
    if (v->ready.load(std::memory_order_acquire) && v->buf->dims() != v->type.dims) {
      Assign(storage, eager::Lazy::Of(eager::Unpadded(v->buf, v->type.dims), device));
    }
    c->before[k] = Current(storage);
  }
  g_capture = c.release();
}

void AbortGraphCapture() {
  std::unique_ptr<Capture> c(g_capture);
  g_capture = nullptr;
  if (c) eager::TraceOf(c->device).EndCapture({});
}

eager::LazyPtr CaptureUpload(const at::Tensor& cpu, int device) {
  Capture* c = g_capture;
  if (c == nullptr || c->device != device) return nullptr;
  for (size_t k = 0; k < c->inputs.size(); ++k) {
    const c10::IValue& v = c->inputs[k];
    if (v.isTensor() && v.toTensor().unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) {
      eager::LazyPtr value = HostValue(cpu, device, /*cached=*/false);
      c->uploads[value->buf.get()] = static_cast<int>(k);
      c->pinned.push_back(value->buf);
      return value;
    }
  }
  return nullptr;
}

void NoteRandomDraw(const rt::BufferPtr& state, const at::Generator& gen, uint64_t count) {
  if (Capture* c = g_capture) {
    c->draws[state.get()] = {gen, count};
    c->pinned.push_back(state);
  }
}

std::shared_ptr<GraphProgram> EndGraphCapture(const std::vector<c10::IValue>& outputs) {
  std::unique_ptr<Capture> c(g_capture);
  g_capture = nullptr;
  TORCH_CHECK(c != nullptr, "tpu: no compiled graph is being captured");
  auto prog = std::make_shared<GraphProgram>();
  prog->device = c->device;
  prog->layouts = c->layouts;

  // The values the program must return: the output storages' and the mutated inputs'.
  std::vector<eager::LazyPtr> results;
  std::vector<int64_t> storage_result;  // per new storage: its index in `results`, or -1
  std::unordered_map<StorageKey, int> input_storage, new_storage;
  for (size_t k = 0; k < c->inputs.size(); ++k) {
    if (c->layouts[k].tpu) {
      input_storage.emplace(c->inputs[k].toTensor().storage().unsafeGetStorageImpl(), k);
    }
  }
  for (const c10::IValue& v : outputs) {
    GraphProgram::Output o;
    if (!v.isTensor() || !v.toTensor().defined()) {
      c->usable &= IsPlainValue(v) || (v.isTensor() && !v.toTensor().defined());
      o.kind = GraphProgram::Output::Kind::kOther;
      o.other = v;
      prog->outputs.push_back(std::move(o));
      continue;
    }
    const at::Tensor& t = v.toTensor();
    if (!IsTpu(t) || t.device().index() != c->device) {
      c->usable = false;  // the graph computed on the host or another device
      break;
    }
    o.sizes = t.sizes().vec();
    o.strides = t.strides().vec();
    o.offset = t.storage_offset();
    o.dtype = t.scalar_type();
    StorageKey key = t.storage().unsafeGetStorageImpl();
    if (auto it = input_storage.find(key); it != input_storage.end()) {
      o.kind = GraphProgram::Output::Kind::kInputStorage;
      o.storage = it->second;
    } else {
      o.kind = GraphProgram::Output::Kind::kNewStorage;
      auto [it2, inserted] = new_storage.emplace(key, static_cast<int>(prog->storages.size()));
      if (inserted) {
        prog->storages.push_back({t.storage().nbytes(), {}});
        eager::LazyPtr value = Current(t.storage());
        storage_result.push_back(value ? static_cast<int64_t>(results.size()) : -1);
        if (value) results.push_back(std::move(value));
      }
      o.storage = it2->second;
    }
    prog->outputs.push_back(std::move(o));
  }
  std::vector<std::pair<int, size_t>> mutated;  // (input, index in `results`)
  for (size_t k = 0; k < c->inputs.size(); ++k) {
    if (!c->layouts[k].tpu || c->layouts[k].same_storage_as >= 0) continue;
    eager::LazyPtr now = Current(c->inputs[k].toTensor().storage());
    if (now == c->before[k]) continue;
    c->usable &= now != nullptr;
    if (now) {
      mutated.emplace_back(static_cast<int>(k), results.size());
      results.push_back(std::move(now));
    }
  }

  std::optional<eager::Trace::Program> p =
      eager::TraceOf(c->device).EndCapture(c->usable ? results : std::vector<eager::LazyPtr>{});
  if (!c->usable || !p) return nullptr;

  // Where each parameter comes from on the next call.
  std::unordered_map<const rt::Buffer*, int> input_of;
  for (size_t k = 0; k < c->inputs.size(); ++k) {
    if (c->before[k] && c->before[k]->buf) input_of.emplace(c->before[k]->buf.get(), k);
  }
  for (const rt::BufferPtr& buf : p->params) {
    GraphProgram::Param param;
    if (auto it = input_of.find(buf.get()); it != input_of.end()) {
      param.kind = GraphProgram::Param::Kind::kInput;
      param.input = it->second;
    } else if (auto up = c->uploads.find(buf.get()); up != c->uploads.end()) {
      param.kind = GraphProgram::Param::Kind::kUpload;
      param.input = up->second;
    } else if (auto d = c->draws.find(buf.get()); d != c->draws.end()) {
      param.kind = GraphProgram::Param::Kind::kRandom;
      param.generator = d->second.first;
      param.count = d->second.second;
    } else {
      param.kind = GraphProgram::Param::Kind::kConstant;
      param.buffer = buf;
    }
    prog->params.push_back(std::move(param));
  }
  // A result the capture did not compute is a buffer it already held: a constant, or an
  // input's (which would have to be read again on each call: not handled, the graph runs op by
  // op instead).
  auto source = [&](size_t r, GraphProgram::Source* src) {
    src->output = p->output[r];
    if (src->output >= 0) return true;
    src->held = p->held[r];
    return input_of.count(src->held.get()) == 0;
  };
  for (size_t s = 0; s < prog->storages.size(); ++s) {
    if (storage_result[s] >= 0 && !source(storage_result[s], &prog->storages[s].value)) {
      return nullptr;
    }
  }
  for (const auto& [k, r] : mutated) {
    GraphProgram::Source src;
    if (!source(r, &src)) return nullptr;
    prog->mutations.emplace_back(k, std::move(src));
  }
  prog->exe = p->exe;
  return prog;
}

std::optional<std::vector<c10::IValue>> GraphProgram::Run(
    const std::vector<c10::IValue>& inputs) const {
  if (inputs.size() != layouts.size()) return std::nullopt;
  std::vector<InputLayout> now = Layouts(inputs);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!SameLayout(now[k], layouts[k])) return std::nullopt;
  }
  std::vector<rt::BufferPtr> args;
  args.reserve(params.size());
  for (const Param& p : params) {
    switch (p.kind) {
      case Param::Kind::kInput: {
        eager::LazyPtr v = Current(inputs[p.input].toTensor().storage());
        if (!v) return std::nullopt;  // never written: captured as zeros, not as a parameter
        args.push_back(eager::Materialize(v));
        break;
      }
      case Param::Kind::kUpload:
        args.push_back(HostValue(inputs[p.input].toTensor(), device, false)->buf);
        break;
      case Param::Kind::kRandom:
        args.push_back(DrawState(p.generator, p.count, device)->buf);
        break;
      case Param::Kind::kConstant:
        args.push_back(p.buffer);
        break;
    }
  }
  std::vector<rt::BufferPtr> outs;
  std::optional<eager::ProgramLabel> label;
  if (eager::Profiling()) label.emplace("compiled graph");
  if (exe) outs = eager::Execute(*exe, args, device);
  std::vector<c10::Storage> made;
  made.reserve(storages.size());
  auto value = [&](const Source& src) { return src.output >= 0 ? outs[src.output] : src.held; };
  for (const Storage& s : storages) {
    made.push_back(NewStorage(s.nbytes, device));
    if (rt::BufferPtr buf = value(s.value)) Assign(made.back(), eager::Lazy::Of(buf, device));
  }
  for (const auto& [k, src] : mutations) {
    Assign(inputs[k].toTensor().storage(), eager::Lazy::Of(value(src), device));
  }
  std::vector<c10::IValue> result;
  result.reserve(outputs.size());
  for (const Output& o : outputs) {
    switch (o.kind) {
      case Output::Kind::kOther:
        result.push_back(o.other);
        break;
      case Output::Kind::kNewStorage:
        result.emplace_back(TensorOver(made[o.storage], o));
        break;
      case Output::Kind::kInputStorage:
        result.emplace_back(TensorOver(inputs[o.storage].toTensor().storage(), o));
        break;
    }
  }
  return result;
}

}  // namespace tpu::aten
