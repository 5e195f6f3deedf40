// Shape ops that compute new tensors: cat/stack, flip/roll/repeat, padding, triu/tril and the
// backward ops of unfold/slice/select. Pure view ops never reach rules.
#include <algorithm>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

V Cat(Ctx& c) {
  const Type& out = c.out[0];
  int64_t dim = ir::WrapDim(c.Int("dim", 0), out.rank());
  std::vector<Value> parts;
  for (Value v : c.List("tensors")) {
    const Dims& d = c.T(v).dims;
    // Legacy: 1-D empty tensors are skipped whatever the other shapes are.
    if (d.size() == 1 && d[0] == 0 && out.rank() != 1) continue;
    if (d[dim] == 0) continue;
    parts.push_back(Cast(c, v, out.dtype));
  }
  if (parts.empty()) return {Splat(c, 0, out)};
  return {ir::Concat(c.g, parts, dim)};
}

V Stack(Ctx& c) {
  const Type& out = c.out[0];
  int64_t dim = ir::WrapDim(c.Int("dim", 0), out.rank());
  Dims one = out.dims;
  one[dim] = 1;
  std::vector<Value> parts;
  for (Value v : c.List("tensors")) parts.push_back(ir::Reshape(c.g, Cast(c, v, out.dtype), one));
  return {ir::Concat(c.g, parts, dim)};
}

V Flip(Ctx& c) {
  Value x = c.In("self");
  Dims dims;
  for (int64_t d : c.Ints("dims")) dims.push_back(ir::WrapDim(d, c.T(x).rank()));
  if (c.T(x).rank() == 0) dims.clear();
  return {ir::Reverse(c.g, x, dims)};
}

// Elements move `shift` places forward along dim, wrapping around.
Value RollDim(Ctx& c, Value x, int64_t shift, int64_t dim) {
  const Dims& d = c.T(x).dims;
  int64_t n = d[dim];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  Dims zero(d.size(), 0), mid = zero, end = d;
  mid[dim] = n - s;
  Dims cut = d;
  cut[dim] = n - s;
  return ir::Concat(c.g, {ir::Slice(c.g, x, mid, end), ir::Slice(c.g, x, zero, cut)}, dim);
}

V Roll(Ctx& c) {
  Value x = c.In("self");
  Dims shifts = c.Ints("shifts"), dims = c.Ints("dims");
  if (dims.empty()) {
    // No dims: roll the flattened tensor.
    Value flat = ir::Reshape(c.g, x, {c.T(x).numel()});
    return {ir::Reshape(c.g, RollDim(c, flat, shifts.at(0), 0), c.T(x).dims)};
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    x = RollDim(c, x, shifts.at(i), ir::WrapDim(dims[i], c.T(x).rank()));
  }
  return {x};
}

V Repeat(Ctx& c) {
  Value x = c.In("self");
  Dims reps = c.Ints("repeats");
  Dims in = c.T(x).dims;
  in.insert(in.begin(), reps.size() - in.size(), 1);
  x = ir::Reshape(c.g, x, in);
  // [r0, d0, r1, d1, ...] then merge each pair.
  Dims wide, mapping;
  for (size_t i = 0; i < reps.size(); ++i) {
    wide.push_back(reps[i]);
    wide.push_back(in[i]);
    mapping.push_back(static_cast<int64_t>(2 * i + 1));
  }
  return {ir::Reshape(c.g, ir::BroadcastInDim(c.g, x, wide, mapping), c.out[0].dims)};
}

V ConstantPadNd(Ctx& c) {
  Value x = c.In("self");
  Dims pad = c.Ints("pad");
  int64_t rank = c.T(x).rank();
  Dims lo(rank, 0), hi(rank, 0);
  // pad lists (low, high) pairs starting from the last dim; negative values crop.
  for (size_t i = 0; i + 1 < pad.size(); i += 2) {
    int64_t d = rank - 1 - static_cast<int64_t>(i / 2);
    lo[d] = pad[i];
    hi[d] = pad[i + 1];
  }
  DType t = c.T(x).dtype;
  Value value = c.Has("value") ? Cast(c, c.In("value"), t) : ir::Constant(c.g, 0, t);
  return {ir::Pad(c.g, x, value, lo, hi)};
}

// Source positions along one padded dim of size n (reflect mirrors without repeating the edge).
Dims PadSource(int64_t n, int64_t lo, int64_t hi, bool reflect) {
  Dims src;
  for (int64_t j = -lo; j < n + hi; ++j) {
    int64_t k = j;
    if (reflect) {
      k = j < 0 ? -j : (j >= n ? 2 * (n - 1) - j : j);
    } else {
      k = std::clamp<int64_t>(j, 0, n - 1);
    }
    src.push_back(k);
  }
  return src;
}

// reflection_padNd / replication_padNd: gathers along each of the last padding.size()/2 dims.
V PadNd(Ctx& c, bool reflect) {
  Value x = c.In("self");
  Dims pad = c.Ints("padding");
  int64_t rank = c.T(x).rank();
  for (size_t i = 0; i + 1 < pad.size(); i += 2) {
    int64_t d = rank - 1 - static_cast<int64_t>(i / 2);
    Dims src = PadSource(c.T(x).dims[d], pad[i], pad[i + 1], reflect);
    Value idx = ir::Reshape(c.g, ir::ConstantI64(c.g, src), {static_cast<int64_t>(src.size()), 1});
    x = ir::Gather(c.g, x, idx, {d}, d);
  }
  return {x};
}

// The backward of PadNd: scatter-adds the gradient back through the same index tables.
V PadNdBackward(Ctx& c, bool reflect) {
  Value grad = Cast(c, c.In("grad_output"), c.out[0].dtype);
  const Dims& in = c.out[0].dims;
  Dims pad = c.Ints("padding");
  int64_t rank = static_cast<int64_t>(in.size());
  DType t = c.out[0].dtype;
  for (size_t i = 0; i + 1 < pad.size(); i += 2) {
    int64_t d = rank - 1 - static_cast<int64_t>(i / 2);
    Dims src = PadSource(in[d], pad[i], pad[i + 1], reflect);
    Value idx = ir::Reshape(c.g, ir::ConstantI64(c.g, src), {static_cast<int64_t>(src.size()), 1});
    Dims smaller = c.T(grad).dims;
    smaller[d] = in[d];
    grad = ir::Scatter(c.g, Splat(c, 0, Type{t, smaller}), idx, grad, {d}, d,
                       ir::ScalarRegion(t, "stablehlo.add"));
  }
  return {grad};
}

// triu keeps col - row >= k, tril keeps col - row <= k (over the last two dims).
V Tri(Ctx& c, bool upper) {
  Value x = c.In("self");
  const Dims& d = c.T(x).dims;
  int64_t r = static_cast<int64_t>(d.size());
  Type it{DType::kS64, d};
  Value diff =
      ir::Binary(c.g, "stablehlo.subtract", ir::Iota(c.g, it, r - 1), ir::Iota(c.g, it, r - 2));
  Value k = Splat(c, static_cast<double>(c.Int("diagonal", 0)), it);
  Value keep = ir::Compare(c.g, diff, k, upper ? "GE" : "LE");
  return {ir::Select(c.g, keep, x, Splat(c, 0, x))};
}

// unfold_backward: window w, element j came from position w * step + j along dim.
V UnfoldBackward(Ctx& c) {
  DType t = c.out[0].dtype;
  Value grad = Cast(c, c.In("grad_in"), t);
  const Dims& in = c.out[0].dims;
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = ir::WrapDim(c.Int("dim"), rank), size = c.Int("size"), step = c.Int("step");
  if (rank == 0) return {ir::Reshape(c.g, grad, {})};
  const Dims& gd = c.T(grad).dims;  // in with dim -> windows, plus a trailing `size`
  int64_t windows = gd[dim];
  // Move the trailing window-element dim next to the window dim.
  Dims perm;
  for (int64_t i = 0; i < rank; ++i) {
    perm.push_back(i);
    if (i == dim) perm.push_back(rank);
  }
  grad = ir::Transpose(c.g, grad, perm);
  Type it{DType::kS64, {windows, size}};
  Value start = ir::Binary(c.g, "stablehlo.multiply", ir::Iota(c.g, it, 0), Splat(c, step, it));
  Value pos = ir::Binary(c.g, "stablehlo.add", start, ir::Iota(c.g, it, 1));
  Value idx = ir::Reshape(c.g, pos, {windows, size, 1});
  return {ir::Scatter(c.g, Splat(c, 0, c.out[0]), idx, grad, {dim}, dim,
                      ir::ScalarRegion(t, "stablehlo.add"))};
}

V SliceBackward(Ctx& c) {
  Value grad = c.In("grad_output");
  const Dims& in = c.out[0].dims;
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = ir::WrapDim(c.Int("dim"), rank), n = in[dim], step = c.Int("step", 1);
  int64_t start = c.Int("start", 0);
  if (start < 0) start += n;
  start = std::clamp<int64_t>(start, 0, n);
  int64_t len = c.T(grad).dims[dim];
  Dims lo(rank, 0), hi(rank, 0), interior(rank, 0);
  lo[dim] = start;
  interior[dim] = step - 1;
  hi[dim] = n - start - (len == 0 ? 0 : (len - 1) * step + 1);
  if (len == 0) return {Splat(c, 0, c.out[0])};
  return {ir::Pad(c.g, grad, ir::Constant(c.g, 0, c.T(grad).dtype), lo, hi, interior)};
}

V SelectBackward(Ctx& c) {
  Value grad = c.In("grad_output");
  const Dims& in = c.out[0].dims;
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = ir::WrapDim(c.Int("dim"), rank), index = c.Int("index");
  if (index < 0) index += in[dim];
  Dims one = in;
  one[dim] = 1;
  Dims lo(rank, 0), hi(rank, 0);
  lo[dim] = index;
  hi[dim] = in[dim] - index - 1;
  return {ir::Pad(c.g, ir::Reshape(c.g, grad, one), ir::Constant(c.g, 0, c.T(grad).dtype), lo, hi)};
}

// Coordinates along (dim1, dim2) of the `offset` diagonal of d, as [len, 2].
Value DiagCoords(Ctx& c, const Dims& d, int64_t offset, int64_t d1, int64_t d2) {
  int64_t len = offset >= 0 ? std::min(d[d1], d[d2] - offset) : std::min(d[d1] + offset, d[d2]);
  Type it{DType::kS64, {std::max<int64_t>(len, 0), 1}};
  Value i = ir::Iota(c.g, it, 0);
  Value row = ir::Binary(c.g, "stablehlo.add", i, Splat(c, std::max<int64_t>(-offset, 0), it));
  Value col = ir::Binary(c.g, "stablehlo.add", i, Splat(c, std::max<int64_t>(offset, 0), it));
  return ir::Concat(c.g, {row, col}, 1);
}

// Writes `diag` ([..., len]) onto the diagonal of `base`; dim names follow the op's schema.
Value PutDiagonal(Ctx& c, Value base, Value diag, int64_t d1_default, int64_t d2_default) {
  const Dims& d = c.T(base).dims;
  int64_t rank = static_cast<int64_t>(d.size());
  int64_t d1 = ir::WrapDim(c.Int("dim1", d1_default), rank);
  int64_t d2 = ir::WrapDim(c.Int("dim2", d2_default), rank);
  Value idx = DiagCoords(c, d, c.Int("offset", 0), d1, d2);
  DType t = c.T(base).dtype;
  return ir::Scatter(c.g, base, idx, Cast(c, diag, t), {d1, d2}, rank - 2, ir::OverwriteRegion(t));
}

V DiagonalCopy(Ctx& c) {
  Value x = c.In("self");
  const Dims& d = c.T(x).dims;
  int64_t rank = static_cast<int64_t>(d.size());
  int64_t d1 = ir::WrapDim(c.Int("dim1", 0), rank), d2 = ir::WrapDim(c.Int("dim2", 1), rank);
  Value idx = DiagCoords(c, d, c.Int("offset", 0), d1, d2);
  return {ir::Gather(c.g, x, idx, {d1, d2}, rank - 2)};
}

// [N, C, *] viewed as [N, g, C/g, *], the two group dims swapped, and flattened back.
V ChannelShuffle(Ctx& c) {
  Value x = c.In("self");
  const Dims d = c.T(x).dims;
  int64_t g = c.Int("groups");
  if (c.T(x).numel() == 0) return {x};
  Dims split{d[0], g, d[1] / g};
  split.insert(split.end(), d.begin() + 2, d.end());
  Dims perm(split.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[1], perm[2]);
  return {ir::Reshape(c.g, ir::Transpose(c.g, ir::Reshape(c.g, x, split), perm), c.out[0].dims)};
}

}  // namespace

void AddShapeRules(RuleMap& m) {
  // Bounded dynamism: the values stay as they are; XLA learns that only the first `size` entries
  // along `dim` count, and masks reductions, dots and the rest to them.
  m["torchtpu::set_dimension_size"] = +[](Ctx& c) {
    Value size = ir::Convert(c.g, c.In("size"), DType::kS32);
    return V{c.g.Op1("stablehlo.set_dimension_size", {c.In("self"), size}, c.out[0],
                     "dimension = " + std::to_string(c.Int("dim")) + " : i64")};
  };
  m["aten::cat"] = Cat;
  m["aten::channel_shuffle"] = ChannelShuffle;
  m["aten::native_channel_shuffle"] = ChannelShuffle;
  m["aten::constant_pad_nd"] = ConstantPadNd;
  m["aten::diag_embed"] =
      +[](Ctx& c) { return V{PutDiagonal(c, Splat(c, 0, c.out[0]), c.In("self"), -2, -1)}; };
  m["aten::diagonal_backward"] =
      +[](Ctx& c) { return V{PutDiagonal(c, Splat(c, 0, c.out[0]), c.In("grad_output"), 0, 1)}; };
  m["aten::diagonal_copy"] = DiagonalCopy;
  m["aten::diagonal_scatter"] = +[](Ctx& c) {
    return V{PutDiagonal(c, Cast(c, c.In("self"), c.out[0].dtype), c.In("src"), 0, 1)};
  };
  m["aten::flip"] = Flip;
  m["aten::reflection_pad1d"] = +[](Ctx& c) { return PadNd(c, true); };
  m["aten::reflection_pad1d_backward"] = +[](Ctx& c) { return PadNdBackward(c, true); };
  m["aten::reflection_pad2d"] = +[](Ctx& c) { return PadNd(c, true); };
  m["aten::reflection_pad2d_backward"] = +[](Ctx& c) { return PadNdBackward(c, true); };
  m["aten::reflection_pad3d"] = +[](Ctx& c) { return PadNd(c, true); };
  m["aten::reflection_pad3d_backward"] = +[](Ctx& c) { return PadNdBackward(c, true); };
  m["aten::repeat"] = Repeat;
  m["aten::replication_pad1d"] = +[](Ctx& c) { return PadNd(c, false); };
  m["aten::replication_pad1d_backward"] = +[](Ctx& c) { return PadNdBackward(c, false); };
  m["aten::replication_pad2d"] = +[](Ctx& c) { return PadNd(c, false); };
  m["aten::replication_pad2d_backward"] = +[](Ctx& c) { return PadNdBackward(c, false); };
  m["aten::replication_pad3d"] = +[](Ctx& c) { return PadNd(c, false); };
  m["aten::replication_pad3d_backward"] = +[](Ctx& c) { return PadNdBackward(c, false); };
  m["aten::roll"] = Roll;
  m["aten::select_backward"] = SelectBackward;
  m["aten::slice_backward"] = SliceBackward;
  m["aten::stack"] = Stack;
  m["aten::tril"] = +[](Ctx& c) { return Tri(c, false); };
  m["aten::triu"] = +[](Ctx& c) { return Tri(c, true); };
  m["aten::unfold_backward"] = UnfoldBackward;
}

}  // namespace tpu::lowering
