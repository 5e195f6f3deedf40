// torch.unique and unique_consecutive (flat and along a dim): the output size depends on the
// data, so one program counts the groups, the host reads the count, and a second program of
// that size writes the values, inverse indices and counts (lowering/unique.h).
#include "lowering/unique.h"

#include <torch/library.h>

#include <numeric>
#include <tuple>

#include "aten/dispatch.h"
#include "aten/graph_builder.h"
#include "eager/executor.h"

namespace tpu::aten {

namespace {

using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// `dim` moved first: the order of dims, and the rows' [M, R] shape.
struct RowLayout {
  std::vector<int64_t> perm;
  ir::Dims moved;
  int64_t m = 1, r = 1;
};

RowLayout Layout(const at::Tensor& self, std::optional<int64_t> dim) {
  RowLayout l;
  if (!dim) {
    l.m = self.numel();
    return l;
  }
  l.perm.resize(self.dim());
  std::iota(l.perm.begin(), l.perm.end(), 0);
  l.perm.erase(l.perm.begin() + *dim);
  l.perm.insert(l.perm.begin(), *dim);
  for (int64_t p : l.perm) l.moved.push_back(self.size(p));
  l.m = self.size(*dim);
  l.r = l.m == 0 ? 0 : self.numel() / l.m;
  return l;
}

ir::Value Rows(GraphBuilder& b, const at::Tensor& self, const RowLayout& l) {
  ir::Value x = b.Read(self);
  if (!l.perm.empty()) x = ir::Transpose(b.g, x, l.perm);
  return ir::Reshape(b.g, x, {l.m, l.r});
}

Result Unique(const at::Tensor& self, std::optional<int64_t> dim, bool sort, bool inverse,
              bool counts, const char* op) {
  if (dim) dim = at::maybe_wrap_dim(*dim, self.dim());
  RowLayout l = Layout(self, dim);
  auto longs = self.options().dtype(at::kLong);
  // Along a dim, inverse and counts are always returned; flat, only when asked for.
  bool sized = dim.has_value();
  try {
    int64_t k = 0;
    if (l.m > 0 && l.r > 0) {
      GraphBuilder b(self.device().index(), op);
      b.g.results = {lowering::GroupCount(b.g, lowering::GroupRows(b.g, Rows(b, self, l), sort))};
      eager::Materialize(b.Run()[0])->ToHost(&k, sizeof(k));
    }
    std::vector<int64_t> shape{k};
    if (dim) {
      shape = self.sizes().vec();
      shape[*dim] = k;
    }
    at::Tensor values = at::empty(shape, self.options());
    at::Tensor inv = at::empty(
        sized || inverse ? (dim ? at::IntArrayRef{l.m} : self.sizes()) : at::IntArrayRef{0}, longs);
    at::Tensor cnt = at::empty({sized || counts ? k : 0}, longs);
    if (k == 0) return {values, inv, cnt};
    GraphBuilder b(self.device().index(), op);
    auto u = lowering::GroupRows(b.g, Rows(b, self, l), sort);
    auto r = lowering::GroupResults(b.g, u, k);
    ir::Value v = r[0];
    if (dim) {
      ir::Dims moved = l.moved;
      moved[0] = k;
      std::vector<int64_t> back(l.perm.size());
      for (size_t i = 0; i < l.perm.size(); ++i) back[l.perm[i]] = static_cast<int64_t>(i);
      v = ir::Transpose(b.g, ir::Reshape(b.g, v, moved), back);
    }
    b.Write(values, ir::Reshape(b.g, v, shape));
    if (inv.numel() > 0) b.Write(inv, ir::Reshape(b.g, r[1], inv.sizes().vec()));
    if (cnt.numel() > 0) b.Write(cnt, r[2]);
    b.Run();
    return {values, inv, cnt};
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError(op);
  }
  return {};
}

std::tuple<at::Tensor, at::Tensor> UniqueOld(const at::Tensor& self, bool, bool inverse) {
  auto [values, inv, cnt] = Unique(self, std::nullopt, true, inverse, false, "aten::_unique");
  return {values, inv};
}
Result Unique2(const at::Tensor& self, bool, bool inverse, bool counts) {
  return Unique(self, std::nullopt, true, inverse, counts, "aten::_unique2");
}
Result UniqueConsecutive(const at::Tensor& self, bool inverse, bool counts,
                         std::optional<int64_t> dim) {
  return Unique(self, dim, false, inverse, counts, "aten::unique_consecutive");
}
Result UniqueDim(const at::Tensor& self, int64_t dim, bool, bool inverse, bool counts) {
  return Unique(self, dim, true, inverse, counts, "aten::unique_dim");
}
Result UniqueDimConsecutive(const at::Tensor& self, int64_t dim, bool inverse, bool counts) {
  return Unique(self, dim, false, inverse, counts, "aten::unique_dim_consecutive");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique", UniqueOld);
  m.impl("_unique2", Unique2);
  m.impl("unique_consecutive", UniqueConsecutive);
  m.impl("unique_dim", UniqueDim);
  m.impl("unique_dim_consecutive", UniqueDimConsecutive);
}

}  // namespace tpu::aten
