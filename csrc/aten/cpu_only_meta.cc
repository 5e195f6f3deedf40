// Meta kernels (shapes and CPU's argument checks) for ops whose only kernels in PyTorch are CPU and
// CUDA ones (margin losses, _logcumsumexp, linalg_lstsq, ctc_loss's backward, geqrf, histogram):
// the boxed kernel takes shapes and errors from Meta (dispatch.cc).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

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

// linalg_lstsq.out: CPU's checks, and the outputs each LAPACK driver fills. The solution and
// residuals take the broadcast batch; rank and singular values keep A's own batch. Residuals are
// sized for full-rank inputs: the tpu kernel empties them when gelsd or gelss finds a rank
// deficiency (aten/dynamic_shape.cc).
std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> LinalgLstsqOut(
    const Tensor& self, const Tensor& b, std::optional<double>,
    std::optional<c10::string_view> driver_name, Tensor& solution, Tensor& residuals, Tensor& rank,
    Tensor& singular_values) {
  TORCH_CHECK(self.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(b.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(self.scalar_type() == b.scalar_type(),
              "torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
              "input's dtype ",
              self.scalar_type(), " and other's dtype ", b.scalar_type());
  const int64_t dim_diff = self.dim() - b.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1,
              "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
              "(input.dim() - other.dim()) <= 1");
  const bool vector = dim_diff == 1;
  TORCH_CHECK(self.size(-2) == (vector ? b.size(-1) : b.size(-2)),
              vector ? "torch.linalg.lstsq: input.size(-2) should match other.size(-1)"
                     : "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  const std::string driver = driver_name ? std::string(*driver_name) : "gelsy";
  TORCH_CHECK(
      driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
      "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  const int64_t m = self.size(-2), n = self.size(-1);
  const at::IntArrayRef a_batch = self.sizes().slice(0, self.dim() - 2);
  const at::IntArrayRef b_batch = b.sizes().slice(0, b.dim() - (vector ? 1 : 2));
  std::vector<int64_t> batch = at::infer_size(a_batch, b_batch);
  std::vector<int64_t> sol = batch;
  sol.push_back(n);
  if (!vector) sol.push_back(b.size(-1));
  solution.resize_(sol);
  std::vector<int64_t> res;
  if (m > n && driver != "gelsy") {
    res = batch;
    res.push_back(vector ? 1 : b.size(-1));
  } else {
    res = {0};
  }
  residuals.resize_(res);
  rank.resize_(driver == "gels" ? std::vector<int64_t>{0} : a_batch.vec());
  std::vector<int64_t> sv{0};
  if (driver == "gelsd" || driver == "gelss") {
    sv = a_batch.vec();
    sv.push_back(std::min(m, n));
  }
  singular_values.resize_(sv);
  return {solution, residuals, rank, singular_values};
}

Tensor CtcLossBackward(const Tensor&, const Tensor& log_probs, const Tensor&, at::IntArrayRef,
                       at::IntArrayRef, const Tensor&, const Tensor&, int64_t, bool) {
  return at::empty_like(log_probs, at::MemoryFormat::Contiguous);
}

// geqrf: the factors in LAPACK's column-major layout, as CPU returns them, and tau.
std::tuple<Tensor, Tensor> Geqrf(const Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  const int64_t m = self.size(-2), n = self.size(-1);
  std::vector<int64_t> strides(self.dim());
  int64_t step = m * n;
  for (int64_t d = self.dim() - 3; d >= 0; --d) {
    strides[d] = step;
    step *= self.size(d);
  }
  strides[self.dim() - 2] = 1;
  strides[self.dim() - 1] = std::max<int64_t>(m, 1);
  std::vector<int64_t> tau(self.sizes().begin(), self.sizes().end() - 2);
  tau.push_back(std::min(m, n));
  return {at::empty_strided(self.sizes(), strides, self.options()), at::empty(tau, self.options())};
}

// torch.histogram and histogramdd: CPU's checks (histogramdd's; torch.histogram's points are
// [N, 1]), then the histogram and each dim's edges.
void HistogramChecks(const Tensor& self, at::IntArrayRef points,
                     const std::optional<Tensor>& weight) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"histogramdd\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  if (!weight.has_value() || !weight->defined()) return;
  TORCH_CHECK(weight->sizes() == points.slice(0, points.size() - 1) ||
                  (points.size() == 2 && points[1] == 1 && weight->numel() == points[0]),
              "torch.histogramdd: if weight tensor is provided it should have the same shape as "
              "the input tensor excluding its innermost dimension, but got input with shape ",
              points, " and weight with shape ", weight->sizes());
  TORCH_CHECK(weight->scalar_type() == self.scalar_type(),
              "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
              "should have the same dtype, but got input(",
              self.dtype(), "), and weight(", weight->dtype(), ")");
}

void CheckBinCount(int64_t bins, size_t k) {
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension ",
              k);
}

void CheckBinTensor(const Tensor& self, const Tensor& bins, size_t k) {
  TORCH_CHECK(bins.dim() == 1, "torch.histogramdd: bins tensor should have one dimension, but got ",
              bins.dim(), " dimensions in the bins tensor for dimension ", k);
  TORCH_CHECK(bins.scalar_type() == self.scalar_type(),
              "torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
              "got input with dtype ",
              self.dtype(), " and bins for dimension ", k, " with dtype ", bins.dtype());
  CheckBinCount(bins.numel() - 1, k);
}

std::tuple<Tensor, Tensor> HistogramBins(const Tensor& self, int64_t bins,
                                         std::optional<at::ArrayRef<double>> range,
                                         const std::optional<Tensor>& weight, bool) {
  HistogramChecks(self, {self.numel(), 1}, weight);
  CheckBinCount(bins, 0);
  TORCH_CHECK(!range.has_value() || range->size() == 2,
              "torch.histogramdd: for a 1-dimensional histogram range should have 2 elements, "
              "but got ",
              range.has_value() ? range->size() : 0);
  return {at::empty({bins}, self.options()), at::empty({bins + 1}, self.options())};
}

std::tuple<Tensor, Tensor> HistogramEdges(const Tensor& self, const Tensor& bins,
                                          const std::optional<Tensor>& weight, bool) {
  HistogramChecks(self, {self.numel(), 1}, weight);
  CheckBinTensor(self, bins, 0);
  return {at::empty({bins.numel() - 1}, self.options()), at::empty({bins.numel()}, self.options())};
}

// histogramdd's points: [..., D], D sequences of bins.
int64_t PointDims(const Tensor& self, size_t sequences, std::optional<at::ArrayRef<double>> range,
                  bool counts) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  const int64_t d = self.size(-1);
  TORCH_CHECK(
      !counts || static_cast<int64_t>(sequences) == d,
      "histogramdd: The size of bins must be equal to the innermost dimension of the input.");
  TORCH_CHECK(static_cast<int64_t>(sequences) == d, "torch.histogramdd: expected ", d,
              " sequences of bin edges for a ", d, "-dimensional histogram but got ", sequences);
  TORCH_CHECK(!range.has_value() || static_cast<int64_t>(range->size()) == 2 * d,
              "torch.histogramdd: for a ", d, "-dimensional histogram range should have ", 2 * d,
              " elements, but got ", range.has_value() ? range->size() : 0);
  return d;
}

std::vector<Tensor> DdBinEdges(const Tensor& self, at::IntArrayRef bins,
                               std::optional<at::ArrayRef<double>> range,
                               const std::optional<Tensor>& weight, bool) {
  PointDims(self, bins.size(), range, true);
  HistogramChecks(self, self.sizes(), weight);
  std::vector<Tensor> edges;
  for (size_t k = 0; k < bins.size(); ++k) {
    CheckBinCount(bins[k], k);
    edges.push_back(at::empty({bins[k] + 1}, self.options()));
  }
  return edges;
}

Tensor DdFromCounts(const Tensor& self, at::IntArrayRef bins,
                    std::optional<at::ArrayRef<double>> range, const std::optional<Tensor>& weight,
                    bool density) {
  DdBinEdges(self, bins, range, weight, density);
  return at::empty(bins, self.options());
}

Tensor DdFromTensors(const Tensor& self, at::TensorList bins, const std::optional<Tensor>& weight,
                     bool) {
  PointDims(self, bins.size(), std::nullopt, false);
  HistogramChecks(self, self.sizes(), weight);
  std::vector<int64_t> shape;
  for (size_t k = 0; k < bins.size(); ++k) {
    CheckBinTensor(self, bins[k], k);
    shape.push_back(bins[k].numel() - 1);
  }
  return at::empty(shape, self.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_histogramdd_bin_edges", DdBinEdges);
  m.impl("_histogramdd_from_bin_cts", DdFromCounts);
  m.impl("_histogramdd_from_bin_tensors", DdFromTensors);
  m.impl("histogram.bin_ct", HistogramBins);
  m.impl("histogram.bins_tensor", HistogramEdges);
  m.impl("geqrf", Geqrf);
  m.impl("_ctc_loss_backward", CtcLossBackward);
  m.impl("_logcumsumexp", LogCumSumExp);
  m.impl("linalg_lstsq.out", LinalgLstsqOut);
  m.impl("multilabel_margin_loss_forward", MultilabelMarginLoss);
  m.impl("multilabel_margin_loss_backward", MultilabelMarginLossBackward);
  m.impl("multi_margin_loss", MultiMarginLoss);
  m.impl("multi_margin_loss_backward", MultiMarginLossBackward);
}

}  // namespace tpu::aten
