#include "aten/graph_builder.h"

#include "aten/graph_capture.h"
#include "eager/executor.h"
#include "eager/trace.h"
#include "lowering/helpers.h"
#include "lowering/view.h"

namespace tpu::aten {

namespace {

lowering::Strided LayoutOf(const at::Tensor& t) {
  lowering::Strided s;
  s.dtype = ToDType(t.scalar_type());
  s.offset = t.storage_offset();
  s.sizes = t.sizes().vec();
  s.strides = t.strides().vec();
  return s;
}

int64_t StorageElems(const at::Tensor& t) {
  return static_cast<int64_t>(t.storage().nbytes()) / static_cast<int64_t>(t.element_size());
}

}  // namespace

const GraphBuilder::Written* GraphBuilder::FindWritten(Slot* slot) const {
  for (const Written& w : written_) {
    if (w.slot == slot) return &w;
  }
  return nullptr;
}

// An upload or random state: nothing the op cache can find again.
Value GraphBuilder::Input(const eager::LazyPtr& in) { return SourcedInput(in, std::nullopt); }

Value GraphBuilder::SourcedInput(const eager::LazyPtr& in, std::optional<Source> source) {
  auto it = params_.find(in.get());
  if (it != params_.end()) return it->second;
  Value v = g.Param(in->type);
  inputs_.push_back(in);
  sources_.push_back(source.value_or(Source{}));
  replayable_ &= source.has_value();
  params_.emplace(in.get(), v);
  return v;
}

Value GraphBuilder::Base(const at::Tensor& t, rt::DType as) {
  Slot* slot = SlotOf(t);
  if (const Written* w = FindWritten(slot)) return lowering::AsFlat(g, w->value, as);
  eager::LazyPtr buf = Current(t.storage());
  if (!buf) return ir::Constant(g, 0, as, {StorageElems(t)});  // never written: zeros
  return lowering::AsFlat(g, SourcedInput(buf, Source{t.storage().unsafeGetStorageImpl()}), as);
}

// PyTorch's lazy bits (x.conj(), a negative view) reach the ops that take them as they are (mm,
// copies): the read applies them.
Value GraphBuilder::Read(const at::Tensor& t) {
  Value v = ReadStored(t);
  if (t.is_conj()) v = ir::Conj(g, v);
  if (t.is_neg()) v = ir::Unary(g, "stablehlo.negate", v);
  return v;
}

Value GraphBuilder::ReadStored(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "expected a tpu tensor");
  lowering::Strided s = LayoutOf(t);
  Slot* slot = SlotOf(t);
  if (FindWritten(slot) == nullptr) {
    eager::LazyPtr buf = Current(t.storage());
    if (!buf) return ir::Constant(g, 0, s.dtype, s.sizes);  // never written: zeros
    // Fast paths: the tensor is its buffer, maybe reshaped, or all of it permuted.
    Value whole = SourcedInput(buf, Source{t.storage().unsafeGetStorageImpl()});
    if (buf->type.dtype == s.dtype && lowering::IsWholeContiguous(s, buf->type.numel())) {
      return ir::Reshape(g, whole, s.sizes);
    }
    if (std::optional<Value> v = lowering::ReadPermuted(g, whole, s)) return *v;
  }
  s.offset_value = Scalar(s.offset);  // views at other offsets share this program
  return lowering::ReadView(g, Base(t, s.dtype), s);
}

// Each scalar is a parameter of its own, even when another one has the same value: `x + i` with
// alpha 1 must be the same program at i = 1 as at any other i.
Value GraphBuilder::Scalar(const at::Scalar& s) {
  if (s.isComplex()) return Input(ScalarValue(s, device_, false));
  auto [bits, dtype] = ScalarBits(s);
  eager::LazyPtr in = eager::ScalarBuffer(&bits, dtype, device_);
  inputs_.push_back(in);
  sources_.push_back({nullptr, bits, dtype});
  return g.Param(in->type);
}

std::pair<uint64_t, rt::DType> ScalarBits(const at::Scalar& s) {
  union {
    bool b;
    int64_t i;
    double d;
    float f;
    uint64_t all;
  } bits{};
  rt::DType t;
  if (s.isBoolean()) {
    bits.b = s.toBool();
    t = rt::DType::kPred;
  } else if (s.isIntegral(false)) {
    bits.i = s.toLong();
    t = rt::DType::kS64;
  } else {
    TORCH_CHECK(!s.isComplex(), "complex scalars have no 64-bit key");
    // Double precision where the platform has it, as CPU kernels take scalars; a TPU has no
    // float64, so there a scalar is float32, as CUDA kernels compute in float32 for float32 ops.
    if (eager::HasFloat64()) {
      bits.d = s.toDouble();
      t = rt::DType::kF64;
    } else {
      bits.f = static_cast<float>(s.toDouble());
      t = rt::DType::kF32;
    }
  }
  return {bits.all, t};
}

eager::LazyPtr ScalarValue(const at::Scalar& s, int device, bool cached) {
  if (s.isComplex()) {  // complex128 where the platform has float64, else complex64; never cached
    c10::complex<double> z = s.toComplexDouble();
    if (eager::HasFloat64()) {
      return eager::Lazy::Of(eager::Client().FromHost(&z, rt::DType::kC128, {}, device), device);
    }
    c10::complex<float> zf(static_cast<float>(z.real()), static_cast<float>(z.imag()));
    return eager::Lazy::Of(eager::Client().FromHost(&zf, rt::DType::kC64, {}, device), device);
  }
  auto [bits, t] = ScalarBits(s);
  if (cached) return eager::ScalarBuffer(&bits, t, device);
  return eager::Lazy::Of(eager::Client().FromHost(&bits, t, {}, device), device);
}

eager::LazyPtr HostValue(const at::Tensor& cpu, int device, bool cached) {
  at::Tensor c = cpu.contiguous();
  if (c.dim() == 0) return ScalarValue(c.item(), device, cached);
  rt::DType dt = ToDType(c.scalar_type());
  return eager::Lazy::Of(eager::Client().FromHost(c.data_ptr(), dt, c.sizes().vec(), device),
                         device);
}

Value GraphBuilder::Upload(const at::Tensor& cpu) {
  eager::LazyPtr v = CaptureUpload(cpu, device_);  // a graph input: rebound on every call
  if (v || cpu.dim() > 0 || cpu.is_complex())
    return Input(v ? v : HostValue(cpu, device_, /*cached=*/true));
  // A 0-d CPU tensor (`x * 0.5` wraps 0.5 so) is a scalar, which the op cache can find again.
  auto [bits, dtype] = ScalarBits(cpu.item());
  return SourcedInput(eager::ScalarBuffer(&bits, dtype, device_), Source{nullptr, bits, dtype});
}

void GraphBuilder::Write(const at::Tensor& t, Value v) {
  lowering::Strided s = LayoutOf(t);
  v = ir::Convert(g, v, s.dtype);
  Slot* slot = SlotOf(t);
  int64_t elems = StorageElems(t);
  const bool whole = static_cast<int64_t>(t.storage().nbytes()) == elems * t.element_size();
  Value result;
  std::optional<Value> permuted;
  if (whole && lowering::IsWholeContiguous(s, elems)) {
    // The buffer takes the tensor's shape, whatever shape the rule computed it in: a bounded
    // program pads a [8, s, 1] buffer along s, a flat [8s] one only at its end.
    result = ir::Reshape(g, v, s.sizes);
  } else if (whole && (permuted = lowering::WritePermuted(g, s, v, elems))) {
    result = *permuted;  // a permuted tensor's buffer: its dims in memory order
  } else {
    s.offset_value = Scalar(s.offset);
    Value flat = lowering::WriteView(g, Base(t, s.dtype), s, v);
    eager::LazyPtr old = Current(t.storage());
    // Keep the storage's buffer shape when only part of it changed.
    result = (old && old->type.dtype == s.dtype && old->type.numel() == elems)
                 ? ir::Reshape(g, flat, old->type.dims)
                 : flat;
  }
  for (Written& w : written_) {
    if (w.slot == slot) {
      w.value = result;
      return;
    }
  }
  written_.push_back({slot, t.storage(), result});
}

std::vector<const c10::StorageImpl*> GraphBuilder::WrittenStorages() const {
  std::vector<const c10::StorageImpl*> out;
  for (const Written& w : written_) out.push_back(w.storage.unsafeGetStorageImpl());
  return out;
}

void GraphBuilder::Checks(const std::vector<lowering::Check>& checks) {
  // A torch.compile capture returns only the graph's outputs: its ops are not checked.
  if (checks.empty() || !eager::ChecksEnabled() || eager::TraceOf(device_).CapturingHere()) return;
  check_ = lowering::CheckResult(g, checks);
  auto texts = std::make_shared<std::vector<eager::CheckText>>();
  for (const lowering::Check& c : checks) texts->push_back({c.type == "IndexError", c.message});
  check_texts_ = std::move(texts);
}

std::vector<eager::LazyPtr> GraphBuilder::Run() {
  size_t first_write = g.results.size();
  for (const Written& w : written_) g.results.push_back(w.value);
  if (check_ >= 0) g.results.push_back(check_);
  std::vector<eager::LazyPtr> outs;
  std::string op = op_;
  if (!g.results.empty() && keep_graph_ && replayable_) {
    hash_ = ir::StructuralHash(g);
    submitted_ = std::make_shared<const ir::Graph>(std::move(g));
    outs = eager::Submit(submitted_, hash_, inputs_, device_, std::move(op_));
  } else if (!g.results.empty()) {
    outs = eager::Submit(std::move(g), inputs_, device_, std::move(op_));
  }
  if (check_ >= 0) eager::AfterSubmit(outs.back(), check_texts_, op);
  for (size_t k = 0; k < written_.size(); ++k) Assign(written_[k].storage, outs[first_write + k]);
  outs.resize(first_write);
  return outs;
}

}  // namespace tpu::aten
