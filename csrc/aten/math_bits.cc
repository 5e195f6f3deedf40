// Copies of tensors with PyTorch's lazy conjugate or negative bit (x.conj(), x.conj().imag).
// CPU and CUDA resolve the bits inside copy_; a PrivateUse1 copy goes through _copy_from, where
// the bits' generic fallback would materialize the source with a clone, which copies, which
// lands here again. These kernels copy the plain values and apply the bit to the destination.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::aten {

namespace {

at::Tensor CopyResolving(const at::Tensor& self, const at::Tensor& dst, bool non_blocking,
                         bool conj) {
  auto bit = [&](const at::Tensor& t) { return conj ? t.is_conj() : t.is_neg(); };
  auto plain = [&](const at::Tensor& t) {
    if (!bit(t)) return t;
    return conj ? t.conj() : at::_neg_view(t);  // flips the bit back: same memory, no bit
  };
  const bool flip = bit(self) != bit(dst);
  at::Tensor out = plain(dst);
  at::_copy_from(plain(self), out, non_blocking);
  if (flip) {
    // conj_physical_ would go to a CPU/CUDA-only stub: negate the imaginary part in place.
    (conj ? at::view_as_real(out).select(-1, 1) : out).neg_();
  }
  return dst;
}

at::Tensor CopyFromConj(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  return CopyResolving(self, dst, non_blocking, true);
}
at::Tensor CopyFromNeg(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  return CopyResolving(self, dst, non_blocking, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", CopyFromConj); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", CopyFromNeg); }

}  // namespace tpu::aten
