// torch.histogramdd's bin edges on tpu. `_histogramdd_bin_edges` returns one tensor per dim, which
// the boxed kernel (one tensor per return) does not produce, so each dim's edges come from
// torchtpu::_histogramdd_edges, whose rule is lowering/histogram.cc's; the op's own Meta kernel
// runs first for CPU's checks.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <vector>

namespace tpu::aten {

namespace {

using at::Tensor;

std::vector<Tensor> BinEdges(const Tensor& self, at::IntArrayRef bins,
                             std::optional<at::ArrayRef<double>> range,
                             const std::optional<Tensor>& weight, bool density) {
  auto meta = [](const Tensor& t) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
  };
  std::optional<Tensor> weight_meta;
  if (weight.has_value() && weight->defined()) weight_meta = meta(*weight);
  at::_histogramdd_bin_edges(meta(self), bins, range, weight_meta, density);  // checks only
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("torchtpu::_histogramdd_edges", "")
                             .typed<Tensor(const Tensor&, at::IntArrayRef,
                                           std::optional<at::ArrayRef<double>>, int64_t)>();
  std::vector<Tensor> edges;
  for (int64_t k = 0; k < static_cast<int64_t>(bins.size()); ++k) {
    edges.push_back(op.call(self, bins, range, k));
  }
  return edges;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchtpu, m) {
  m.def("_histogramdd_edges(Tensor self, int[] bins, float[]? range, int dim) -> Tensor");
}

TORCH_LIBRARY_IMPL(torchtpu, Meta, m) {
  m.impl("_histogramdd_edges",
         [](const Tensor& self, at::IntArrayRef bins, std::optional<at::ArrayRef<double>>,
            int64_t dim) { return at::empty({bins[dim] + 1}, self.options()); });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_histogramdd_bin_edges", BinEdges); }

}  // namespace tpu::aten
