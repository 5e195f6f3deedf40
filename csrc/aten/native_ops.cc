// The few ops every PrivateUse1 backend writes by hand: allocation, views (metadata only),
// resize/set_, copies across devices, scalar reads. Everything else goes to BoxedKernel.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include "aten/dispatch.h"
#include "aten/graph_builder.h"
#include "eager/executor.h"
#include "eager/trace.h"
#include "lowering/view.h"

namespace tpu::aten {

namespace {

const c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

bool IsTpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// Every tpu tensor is made here, so a dtype the platform cannot compute in is refused where the
// user asked for it (a factory, `.to("tpu")`, an op's result), not later inside XLA.
at::ScalarType CheckedDType(std::optional<at::ScalarType> dtype) {
  at::ScalarType t = dtype.value_or(at::get_default_dtype_as_scalartype());
  if (t == at::kDouble) {
    TORCH_CHECK_TYPE(eager::HasFloat64(),
                     "Cannot make a tpu tensor of dtype torch.float64: TPUs have no float64. "
                     "Please use torch.float32 instead (for example `x.float()` before "
                     "`.to(\"tpu\")`).");
  } else if (t == at::kComplexDouble) {
    TORCH_CHECK_TYPE(eager::HasFloat64(),
                     "Cannot make a tpu tensor of dtype torch.complex128: TPUs have no float64. "
                     "Please use torch.complex64 instead.");
  }
  return t;
}

at::Tensor Empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>,
                 std::optional<at::MemoryFormat> memory_format) {
  at::ScalarType t = CheckedDType(dtype);
  c10::DeviceGuard guard(device.value_or(c10::Device(c10::DeviceType::PrivateUse1)));
  return at::detail::empty_generic(size, TpuAllocator(), kTpuKeys, t, memory_format);
}

// Autograd's known-zero gradients (sgn's backward): CPU and CUDA mark them with the ZeroTensor
// key so later math can skip them; on tpu they are plain zeros.
at::Tensor EfficientZeroTensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device> device,
                               std::optional<bool>) {
  c10::Device d = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  return at::zeros(size, at::TensorOptions().dtype(CheckedDType(dtype)).device(d));
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                        std::optional<at::Device> device, std::optional<bool>) {
  at::ScalarType t = CheckedDType(dtype);
  c10::DeviceGuard guard(device.value_or(c10::Device(c10::DeviceType::PrivateUse1)));
  return at::detail::empty_strided_generic(size, stride, TpuAllocator(), kTpuKeys, t);
}

at::Tensor AsStrided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                     std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

// Grows the storage (keeping its slot) when the tensor's new extent needs more bytes.
void EnsureStorage(const at::Tensor& self) {
  int64_t extent = 1;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (self.size(i) == 0) return;
    extent += (self.size(i) - 1) * self.stride(i);
  }
  size_t needed = static_cast<size_t>((self.storage_offset() + extent) * self.element_size());
  if (needed > self.storage().nbytes()) ResizeStorageBytes(self.storage(), needed);
}

const at::Tensor& Resize(const at::Tensor& self, c10::IntArrayRef size,
                         std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  EnsureStorage(self);
  return self;
}

at::Tensor& SetStorage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                       c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(size, stride, offset);
  EnsureStorage(self);
  return self;
}

at::Tensor& SetWholeStorage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes()) / static_cast<int64_t>(self.element_size());
  return SetStorage(self, std::move(source), 0, {c10::SymInt(n)}, {c10::SymInt(1)});
}

at::Tensor& SetTensor(at::Tensor& self, const at::Tensor& src) {
  return SetStorage(self, src.storage(), src.sym_storage_offset(), src.sym_sizes(),
                    src.sym_strides());
}

at::Tensor& SetEmpty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, TpuAllocator(), true);
  return SetStorage(self, storage, 0, {c10::SymInt(0)}, {});
}

bool IsWholeValue(const at::Tensor& t, const eager::LazyPtr& v) {
  lowering::Strided s{ToDType(t.scalar_type()), t.storage_offset(), t.sizes().vec(),
                      t.strides().vec()};
  return v && v->type.dtype == s.dtype && lowering::IsWholeContiguous(s, v->type.numel());
}

// Copies a tpu tensor to a new contiguous CPU tensor.
at::Tensor ToHost(const at::Tensor& src) {
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (src.numel() == 0) return host;
  eager::LazyPtr v = Current(src.storage());
  // A small storage is read whole and the view taken on the host: printing a tensor reads it
  // element by element, and a program per element would cost far more than the bytes.
  constexpr size_t kHostViewBytes = size_t{16} << 20;
  if (!IsWholeValue(src, v) && v && v->type.dtype == ToDType(src.scalar_type()) &&
      src.storage().nbytes() <= kHostViewBytes &&
      src.storage().nbytes() == static_cast<size_t>(v->type.numel() * src.element_size())) {
    at::Tensor whole = at::empty({v->type.numel()}, host.options());
    eager::Materialize(v)->ToHost(whole.data_ptr(), whole.nbytes());
    RaiseFailedChecks(src.device().index(), false);
    host.copy_(whole.as_strided(src.sizes(), src.strides(), src.storage_offset()));
    return host;
  }
  if (!IsWholeValue(src, v)) {
    GraphBuilder b(src.device().index(), "aten::_copy_from");
    b.g.results = {b.Read(src)};
    v = b.Run()[0];
  }
  eager::Materialize(v)->ToHost(host.data_ptr(), host.nbytes());
  RaiseFailedChecks(src.device().index(), false);
  return host;
}

void FromHost(const at::Tensor& src, const at::Tensor& dst) {
  at::Tensor c = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  int device = dst.device().index();
  rt::BufferPtr buf =
      eager::Client().FromHost(c.data_ptr(), ToDType(c.scalar_type()), c.sizes().vec(), device);
  lowering::Strided s{buf->dtype(), dst.storage_offset(), dst.sizes().vec(), dst.strides().vec()};
  if (lowering::IsWholeContiguous(
          s, static_cast<int64_t>(dst.storage().nbytes()) / dst.element_size()) &&
      dst.storage().nbytes() == static_cast<size_t>(dst.numel() * dst.element_size())) {
    Assign(dst.storage(), eager::Lazy::Of(buf, device));  // the upload is the new value
    return;
  }
  GraphBuilder b(device, "aten::_copy_from");
  b.Write(dst, b.Input(eager::Lazy::Of(buf, device)));
  b.Run();
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool) {
  CheckNotForked();
  if (dst.numel() == 0) return dst;
  try {
    if (IsTpu(self) && IsTpu(dst) && self.device() == dst.device()) {
      c10::DeviceGuard guard(dst.device());
      GraphBuilder b(dst.device().index(), "aten::_copy_from");
      Value v = ir::Convert(b.g, b.Read(self), ToDType(dst.scalar_type()));
      b.Write(dst, ir::BroadcastTo(b.g, v, dst.sizes().vec()));
      b.Run();
    } else if (IsTpu(dst)) {
      FromHost(IsTpu(self) ? ToHost(self) : self, dst);
    } else {
      dst.copy_(ToHost(self));
    }
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError("aten::_copy_from");
  }
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return CopyFrom(self, dst, false);
}

at::Scalar LocalScalarDense(const at::Tensor& self) {
  CheckNotForked();
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  try {
    return ToHost(self).item();
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError("aten::_local_scalar_dense");
  }
  return {};
}

void RecordStream(at::Tensor&, c10::Stream) {}  // one in-order queue per device

// CPU <-> tpu strided tensors may swap their impls in place (`param.data = param.to("tpu")`),
// as CPU <-> CUDA do: nn.Module.to() then keeps Parameter identity, so tied weights stay tied.
bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.is_cpu() || IsTpu(t));
  };
  return (dense(self) && dense(from)) ||
         self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", Empty);
  m.impl("empty_strided", EmptyStrided);
  m.impl("_efficientzerotensor", EfficientZeroTensor);
  m.impl("as_strided", AsStrided);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", Resize);
  m.impl("set_.source_Storage_storage_offset", SetStorage);
  m.impl("set_.source_Storage", SetWholeStorage);
  m.impl("set_.source_Tensor", SetTensor);
  m.impl("set_", SetEmpty);
  m.impl("_copy_from", CopyFrom);
  m.impl("_copy_from_and_resize", CopyFromAndResize);
  m.impl("_local_scalar_dense", LocalScalarDense);
  m.impl("record_stream", RecordStream);
  m.impl("_has_compatible_shallow_copy_type", HasCompatibleShallowCopyType);
}

namespace {

// fill_ of a one-element tensor that is its whole storage is an upload, not a program: that is
// autograd's seed, ones_like(loss), which a compiled backward reads before anything else is
// pending, so as an op it would run as a program of its own. A fresh buffer each time (never
// the scalar cache's shared one), so programs never see two fills alias by value. CPU's fill_
// converts the value, with its overflow errors.
void FillScalar(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[stack->size() - 2].toTensor();
  if (self.numel() != 1 || self.storage_offset() != 0 ||
      self.storage().nbytes() != static_cast<size_t>(self.element_size()) || self.is_complex() ||
      eager::TraceOf(self.device().index()).CapturingHere()) {
    return BoxedKernel(op, ks, stack);
  }
  const at::Scalar value = stack->back().toScalar();
  try {
    c10::DeviceGuard guard(self.device());
    FromHost(at::scalar_tensor(value, self.options().device(at::kCPU)), self);
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError("aten::fill_");
  }
  torch::jit::drop(*stack, 2);
  stack->emplace_back(self);
}

}  // namespace

// Ops whose default kernel raises "not implemented for this backend", or decomposes them worse
// than their rule: route them to the boxed kernel explicitly (the backend fallback is only used
// when no kernel exists).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // native_layer_norm's composite kernel runs batch norm on a [1, rows, cols] view, whose flat
  // statistics a bounded program cannot pad along the rows' sized dim; embedding's flattens its
  // indices, and a flat [s * s] (T5's relative positions) is no size a bounded program has.
  for (const char* name : {"convolution_overrideable", "convolution_backward_overrideable",
                           "native_layer_norm", "embedding"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&BoxedKernel>());
  }
  m.impl("fill_.Scalar", torch::CppFunction::makeFromBoxedFunction<&FillScalar>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&BoxedKernel>());
}

// Quantized tpu tensors (torch.empty_quantized(..., device="tpu"), .to("tpu") of a quantized
// CPU tensor) have no storage format here; every op on them says so by name.
void QuantizedKernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu does not support quantized tensors ('",
                              op.schema().name(),
                              "'): dequantize them, or quantize on the CPU and move the "
                              "dequantized result");
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&QuantizedKernel>());
}

}  // namespace tpu::aten
