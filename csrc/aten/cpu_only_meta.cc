// Meta kernels (shapes and CPU's argument checks) for ops whose only kernels in PyTorch are CPU and
// CUDA ones (margin losses, _logcumsumexp): the boxed kernel takes shapes and errors from Meta
// (dispatch.cc).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace tpu::aten {

namespace {

using at::Tensor;

// multi_margin_loss: rows of an [N, C] input, a vector (one row) or a scalar; returns N.
int64_t MultiMarginRows(const Tensor& self, const Tensor& target,
                        const std::optional<Tensor>& weight, const at::Scalar& p) {
  const int64_t ndims = self.dim();
  TORCH_CHECK((ndims == 2 && self.size(1) != 0) || (ndims == 1 && self.size(0) != 0) || ndims == 0,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
              self.sizes());
  const int64_t rows = ndims <= 1 ? 1 : self.size(0);
  const int64_t classes = ndims == 0 ? 1 : self.size(ndims - 1);
  TORCH_CHECK(target.dim() <= 1 && target.numel() == rows, "inconsistent target size, expected ",
              rows, " but got ", target.sizes());
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->dim() <= 1 && weight->numel() == classes,
                "inconsistent weight size, expected ", classes, " but got ", weight->sizes());
  }
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  TORCH_CHECK(target.scalar_type() == at::kLong, "expected scalar type Long but found ",
              target.scalar_type());
  return rows;
}

Tensor MultiMarginLoss(const Tensor& self, const Tensor& target, const at::Scalar& p,
                       const at::Scalar&, const std::optional<Tensor>& weight, int64_t reduction) {
  int64_t rows = MultiMarginRows(self, target, weight, p);
  if (reduction == at::Reduction::None && target.dim() > 0)
    return at::empty({rows}, self.options());
  return at::empty({}, self.options());
}

Tensor MultiMarginLossBackward(const Tensor&, const Tensor& self, const Tensor& target,
                               const at::Scalar& p, const at::Scalar&,
                               const std::optional<Tensor>& weight, int64_t) {
  MultiMarginRows(self, target, weight, p);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

// multilabel_margin_loss: CPU's shape checks; returns the frame count.
int64_t MultilabelFrames(const Tensor& self, const Tensor& target) {
  const int64_t ndims = self.dim();
  TORCH_CHECK((ndims == 2 && self.size(1) != 0) || (ndims == 1 && self.size(0) != 0) || ndims == 0,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
              self.sizes());
  if (ndims <= 1) {
    const int64_t dim = ndims == 0 ? 1 : self.size(0);
    TORCH_CHECK(target.dim() <= 1 && target.numel() == dim,
                "inconsistent target size: ", target.sizes(), " for input of size: ", self.sizes());
    return 1;
  }
  TORCH_CHECK(target.dim() == 2 && target.size(0) == self.size(0) && target.size(1) == self.size(1),
              "inconsistent target size: ", target.sizes(), " for input of size: ", self.sizes());
  return self.size(0);
}

std::tuple<Tensor, Tensor> MultilabelMarginLoss(const Tensor& self, const Tensor& target,
                                                int64_t reduction) {
  int64_t frames = MultilabelFrames(self, target);
  Tensor is_target = at::empty(target.sizes(), self.options());
  if (reduction != at::Reduction::None || target.dim() <= 1)
    return {at::empty({}, self.options()), is_target};
  return {at::empty({frames}, self.options()), is_target};
}

Tensor MultilabelMarginLossBackward(const Tensor&, const Tensor& self, const Tensor& target,
                                    int64_t, const Tensor&) {
  MultilabelFrames(self, target);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

Tensor LogCumSumExp(const Tensor& self, int64_t dim) {
  at::maybe_wrap_dim(dim, self.dim());
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_logcumsumexp", LogCumSumExp);
  m.impl("multilabel_margin_loss_forward", MultilabelMarginLoss);
  m.impl("multilabel_margin_loss_backward", MultilabelMarginLossBackward);
  m.impl("multi_margin_loss", MultiMarginLoss);
  m.impl("multi_margin_loss_backward", MultiMarginLossBackward);
}

}  // namespace tpu::aten
