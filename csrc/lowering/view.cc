#include "lowering/view.h"

#include <algorithm>
#include <numeric>

namespace tpu::lowering {

namespace {

int64_t Numel(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>());
}

bool IsContiguous(const Strided& v) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(v.sizes.size()) - 1; i >= 0; --i) {
    if (v.sizes[i] == 1) continue;
    if (v.strides[i] != expected) return false;
    expected *= v.sizes[i];
  }
  return true;
}

// A non-overlapping view as a chain of (size, stride) dims sorted by decreasing stride where
// each stride divides the previous one: then the view is "pad, reshape, slice" of the flat
// storage, with no gather. `kept` are the view dims of size > 1 in chain order. A read may also
// skip broadcast (stride 0) dims, which it restores with a broadcast: an `expand`ed view (GQA's
// repeated keys, a causal mask) is then a slice, not a gather of every element.
struct Chain {
  bool ok = false;
  std::vector<int64_t> kept;  // view dim index, chain order
  int64_t span = 1;           // padded flat length covered: size0 * stride0
};

Chain MakeChain(const Strided& v, bool skip_broadcast) {
  Chain c;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] > 1) {
      if (v.strides[i] == 0 && skip_broadcast) continue;
      if (v.strides[i] <= 0) return c;  // a write to a broadcast dim needs a scatter
      c.kept.push_back(static_cast<int64_t>(i));
    }
  }
  std::stable_sort(c.kept.begin(), c.kept.end(),
                   [&](int64_t a, int64_t b) { return v.strides[a] > v.strides[b]; });
  for (size_t k = 0; k + 1 < c.kept.size(); ++k) {
    int64_t outer = v.strides[c.kept[k]], inner = v.strides[c.kept[k + 1]];
    if (outer % inner != 0 || v.sizes[c.kept[k + 1]] * inner > outer) return c;
  }
  c.span = c.kept.empty() ? 1 : v.sizes[c.kept[0]] * v.strides[c.kept[0]];
  c.ok = true;
  return c;
}

// Shape of the chain form: [n0, n1, ..., nk] (the innermost stride slot already sliced away).
Dims ChainDims(const Strided& v, const Chain& c) {
  Dims d;
  for (int64_t i : c.kept) d.push_back(v.sizes[i]);
  return d;
}

// Permutation taking chain order to view order (of kept dims).
Dims ChainToView(const Chain& c) {
  Dims order = c.kept;
  std::sort(order.begin(), order.end());
  Dims perm;
  for (int64_t dim : order) {
    perm.push_back(std::find(c.kept.begin(), c.kept.end(), dim) - c.kept.begin());
  }
  return perm;
}

// Flat window [offset, offset + span) of `flat`, zero-padded past the end.
Value Window(Graph& g, Value flat, int64_t offset, int64_t span) {
  int64_t n = g.type(flat).dims[0];
  int64_t end = std::min(n, offset + span);
  Value w = ir::Slice(g, flat, {offset}, {end});
  if (end - offset < span) {
    Value zero = ir::Constant(g, 0, g.type(flat).dtype);
    w = ir::Pad(g, w, zero, {0}, {span - (end - offset)});
  }
  return w;
}

// Reads a chain view: reshape the window level by level, slicing each level to its size.
Value ReadChain(Graph& g, Value flat, const Strided& v, const Chain& c) {
  Value x = Window(g, flat, v.offset, c.span);
  Dims shape;
  int64_t rest = c.span;
  for (int64_t dim : c.kept) {
    int64_t stride = v.strides[dim];
    Dims split = shape;
    split.push_back(rest / stride);
    split.push_back(stride);
    x = ir::Reshape(g, x, split);
    Dims start(split.size(), 0), limit = split;
    limit[split.size() - 2] = v.sizes[dim];
    x = ir::Slice(g, x, start, limit);
    shape.push_back(v.sizes[dim]);
    rest = stride;
  }
  // Keep element 0 of the innermost stride slot.
  Dims start(shape.size() + 1, 0), limit = shape;
  limit.push_back(1);
  x = ir::Slice(g,
                ir::Reshape(g, x,
                            [&] {
                              Dims s = shape;
                              s.push_back(rest);
                              return s;
                            }()),
                start, limit);
  return ir::Reshape(g, x, shape);
}

// Inverse of ReadChain for a value in chain shape: the padded window, with `fill` elsewhere.
Value UnChain(Graph& g, Value x, const Strided& v, const Chain& c, Value fill) {
  Dims shape = ChainDims(v, c);
  int64_t inner = c.kept.empty() ? 1 : v.strides[c.kept.back()];
  Dims with_slot = shape;
  with_slot.push_back(1);
  x = ir::Reshape(g, x, with_slot);
  Dims lo(with_slot.size(), 0), hi(with_slot.size(), 0);
  hi.back() = inner - 1;
  x = ir::Pad(g, x, fill, lo, hi);
  for (int64_t k = static_cast<int64_t>(c.kept.size()) - 1; k >= 0; --k) {
    int64_t outer = k == 0 ? c.span : v.strides[c.kept[k - 1]];
    int64_t stride = v.strides[c.kept[k]];
    Dims cur = g.type(x).dims;  // [..., n_k, stride]
    Dims plo(cur.size(), 0), phi(cur.size(), 0);
    phi[cur.size() - 2] = outer / stride - v.sizes[c.kept[k]];
    x = ir::Pad(g, x, fill, plo, phi);
    Dims merged(cur.begin(), cur.end() - 2);
    merged.push_back(outer);
    x = ir::Reshape(g, x, merged);
  }
  return ir::Reshape(g, x, {c.span});
}

// The view's offset as an s64 scalar: the run-time value, or the constant.
Value Start(Graph& g, const Strided& v) {
  if (v.offset_value) return *v.offset_value;
  return ir::Constant(g, static_cast<double>(v.offset), DType::kS64);
}

// A chain view as a box of the storage reshaped to `dense`: one axis per chain dim (its stride
// divides the previous one) plus the innermost stride. The box starts at the offset's
// coordinates; `ok` is false when the storage does not split that way or the view wraps around
// an axis at this offset.
struct Box {
  bool ok = false;
  Dims dense;    // the storage's shape
  Dims sizes;    // the box's extent along each dense axis
  Dims strides;  // each dense axis's stride, in elements
};

Box MakeBox(const Strided& v, const Chain& c, int64_t n) {
  Box b;
  if (!c.ok || c.kept.empty() || n % v.strides[c.kept[0]] != 0) return b;
  int64_t outer = n;
  for (int64_t dim : c.kept) {
    b.dense.push_back(outer / v.strides[dim]);
    b.sizes.push_back(v.sizes[dim]);
    b.strides.push_back(v.strides[dim]);
    outer = v.strides[dim];
  }
  b.dense.push_back(outer);
  b.sizes.push_back(1);
  b.strides.push_back(1);
  int64_t rest = v.offset;
  for (size_t a = 0; a < b.dense.size(); ++a) {
    if (rest / b.strides[a] + b.sizes[a] > b.dense[a]) return b;
    rest %= b.strides[a];
  }
  b.ok = true;
  return b;
}

// The box's start coordinates: computed in the program from a run-time offset, else constants.
std::vector<Value> BoxStarts(Graph& g, const Strided& v, const Box& b) {
  std::vector<Value> starts;
  if (!v.offset_value) {
    int64_t rest = v.offset;
    for (int64_t stride : b.strides) {
      starts.push_back(ir::Constant(g, static_cast<double>(rest / stride), DType::kS64));
      rest %= stride;
    }
    return starts;
  }
  Value rest = *v.offset_value;
  for (int64_t stride : b.strides) {
    Value s = ir::Constant(g, static_cast<double>(stride), DType::kS64);
    starts.push_back(ir::Binary(g, "stablehlo.divide", rest, s));
    rest = ir::Binary(g, "stablehlo.remainder", rest, s);
  }
  return starts;
}

// Flat element index of every view element, as s64 shaped like the view.
Value ViewIndices(Graph& g, const Strided& v) {
  Type t{DType::kS64, v.sizes};
  Value idx = ir::BroadcastTo(g, Start(g, v), v.sizes);
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] == 1 || v.strides[i] == 0) continue;
    Value term =
        ir::Binary(g, "stablehlo.multiply", ir::Iota(g, t, static_cast<int64_t>(i)),
                   ir::Constant(g, static_cast<double>(v.strides[i]), DType::kS64, v.sizes));
    idx = ir::Binary(g, "stablehlo.add", idx, term);
  }
  Dims with_vec = v.sizes;
  with_vec.push_back(1);
  return ir::Reshape(g, idx, with_vec);
}

Value GatherView(Graph& g, Value flat, const Strided& v) {
  int64_t rank = static_cast<int64_t>(v.sizes.size());
  return g.Op1(
      "stablehlo.gather", {flat, ViewIndices(g, v)}, Type{g.type(flat).dtype, v.sizes},
      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = "
      "[0], index_vector_dim = " +
          std::to_string(rank) + ">, slice_sizes = array<i64: 1>, indices_are_sorted = false");
}

Value ScatterView(Graph& g, Value flat, const Strided& v, Value update) {
  int64_t rank = static_cast<int64_t>(v.sizes.size());
  DType t = g.type(flat).dtype;
  auto region = std::make_shared<Graph>();
  region->Param(Type{t, {}});
  Value upd = region->Param(Type{t, {}});
  region->results = {upd};  // overwrite: keep the update
  return g.Op1("stablehlo.scatter", {flat, ViewIndices(g, v), update}, g.type(flat),
               "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
               "scatter_dims_to_operand_dims = [0], index_vector_dim = " +
                   std::to_string(rank) + ">, indices_are_sorted = false, unique_indices = false",
               {region});
}

// The view value in chain order with broadcast and size-1 dims removed.
Value ToChainOrder(Graph& g, Value update, const Strided& v, const Chain& c) {
  Dims view_order = c.kept;
  std::sort(view_order.begin(), view_order.end());
  Dims squeezed;
  for (int64_t d : view_order) squeezed.push_back(v.sizes[d]);
  Value x = ir::Reshape(g, update, squeezed);
  Dims perm;  // chain position k takes view-order dim position of c.kept[k]
  for (int64_t dim : c.kept) {
    perm.push_back(std::find(view_order.begin(), view_order.end(), dim) - view_order.begin());
  }
  return ir::Transpose(g, x, perm);
}

}  // namespace

Value AsFlat(Graph& g, Value base, DType t) {
  const Type& bt = g.type(base);
  Value flat = ir::Reshape(g, base, {bt.numel()});
  if (bt.dtype == t) return flat;
  int64_t n = bt.numel();
  // Complex storage read as another dtype: its parts interleaved (PyTorch's layout) reinterpreted.
  if (rt::IsComplex(bt.dtype)) {
    Value re = ir::Reshape(g, ir::Real(g, flat), {n, 1}),
          im = ir::Reshape(g, ir::Imag(g, flat), {n, 1});
    return AsFlat(g, ir::Reshape(g, ir::Concat(g, {re, im}, 1), {2 * n}), t);
  }
  if (rt::IsComplex(t)) {
    Value parts = AsFlat(g, flat, rt::RealOf(t));
    int64_t m = g.type(parts).dims[0] / 2;
    Value pairs = ir::Reshape(g, ir::Slice(g, parts, {0}, {2 * m}), {m, 2});
    auto part = [&](int64_t k) {
      return ir::Reshape(g, ir::Slice(g, pairs, {0, k}, {m, k + 1}), {m});
    };
    return ir::Complex(g, part(0), part(1));
  }
  int64_t from = rt::ItemSize(bt.dtype), to = rt::ItemSize(t);
  if (from == to) return ir::BitcastConvert(g, flat, Type{t, {n}});
  if (from > to) {  // one wide element becomes several narrow ones
    Value x = ir::BitcastConvert(g, flat, Type{t, {n, from / to}});
    return ir::Reshape(g, x, {n * (from / to)});
  }
  int64_t ratio = to / from;
  Value x = ir::Reshape(g, ir::Slice(g, flat, {0}, {n / ratio * ratio}), {n / ratio, ratio});
  return ir::BitcastConvert(g, x, Type{t, {n / ratio}});
}

bool IsWholeContiguous(const Strided& v, int64_t storage_elems) {
  return v.offset == 0 && Numel(v.sizes) == storage_elems && IsContiguous(v);
}

Value ReadView(Graph& g, Value flat, const Strided& v) {
  int64_t n = g.type(flat).dims[0];
  int64_t numel = Numel(v.sizes);
  if (numel == 0) return ir::Constant(g, 0, v.dtype, v.sizes);
  if (IsContiguous(v) && v.offset + numel <= n) {
    return ir::Reshape(g, ir::DynamicSlice(g, flat, {Start(g, v)}, {numel}), v.sizes);
  }
  Chain c = MakeChain(v, /*skip_broadcast=*/true);
  if (!c.ok) return GatherView(g, flat, v);
  Box b = MakeBox(v, c, n);
  Value x =
      b.ok ? ir::Reshape(
                 g, ir::DynamicSlice(g, ir::Reshape(g, flat, b.dense), BoxStarts(g, v, b), b.sizes),
                 ChainDims(v, c))
           : ReadChain(g, flat, v, c);
  x = ir::Transpose(g, x, ChainToView(c));
  // Re-insert size-1 dims and broadcast dims: kept dims map to their view positions.
  Dims order = c.kept;
  std::sort(order.begin(), order.end());
  return ir::BroadcastInDim(g, x, v.sizes, order);
}

namespace {

// The chain of a view that is every one of `storage_elems` elements in some order of its dims.
std::optional<Chain> PermutedChain(const Strided& v, int64_t storage_elems) {
  const int64_t numel = Numel(v.sizes);
  if (v.offset != 0 || numel != storage_elems) return std::nullopt;
  Chain c = MakeChain(v, /*skip_broadcast=*/false);
  if (!c.ok || c.span != numel || (!c.kept.empty() && v.strides[c.kept.back()] != 1)) {
    return std::nullopt;
  }
  return c;
}

}  // namespace

std::optional<Value> ReadPermuted(Graph& g, Value base, const Strided& v) {
  if (g.type(base).dtype != v.dtype) return std::nullopt;
  const std::optional<Chain> c = PermutedChain(v, g.type(base).numel());
  if (!c) return std::nullopt;
  return ir::Reshape(g, ir::Transpose(g, ir::Reshape(g, base, ChainDims(v, *c)), ChainToView(*c)),
                     v.sizes);
}

std::optional<Value> WritePermuted(Graph& g, const Strided& v, Value update,
                                   int64_t storage_elems) {
  const std::optional<Chain> c = PermutedChain(v, storage_elems);
  if (!c) return std::nullopt;
  return ToChainOrder(g, update, v, *c);
}

Value WriteView(Graph& g, Value flat, const Strided& v, Value update) {
  int64_t n = g.type(flat).dims[0];
  int64_t numel = Numel(v.sizes);
  if (numel == 0) return flat;
  if (IsContiguous(v) && v.offset + numel <= n) {
    return ir::DynamicUpdateSlice(g, flat, ir::Reshape(g, update, {numel}), {Start(g, v)});
  }
  Chain c = MakeChain(v, /*skip_broadcast=*/false);
  if (!c.ok) return ScatterView(g, flat, v, update);
  Value x = ToChainOrder(g, update, v, c);
  if (Box b = MakeBox(v, c, n); b.ok) {
    Value box = ir::Reshape(g, x, b.sizes);
    Value base = ir::Reshape(g, flat, b.dense);
    return ir::Reshape(g, ir::DynamicUpdateSlice(g, base, box, BoxStarts(g, v, b)), {n});
  }
  // The view wraps around an axis: place its padded window at the (constant) offset.
  DType t = g.type(flat).dtype;
  Value padded = UnChain(g, x, v, c, ir::Constant(g, 0, t));
  Value mask = UnChain(g, ir::Constant(g, 1, DType::kPred, g.type(x).dims), v, c,
                       ir::Constant(g, 0, DType::kPred));
  // Place the window at `offset` in a storage-length array (it may run past the end).
  int64_t end = std::min(n, v.offset + c.span);
  padded = ir::Slice(g, padded, {0}, {end - v.offset});
  mask = ir::Slice(g, mask, {0}, {end - v.offset});
  padded = ir::Pad(g, padded, ir::Constant(g, 0, t), {v.offset}, {n - end});
  mask = ir::Pad(g, mask, ir::Constant(g, 0, DType::kPred), {v.offset}, {n - end});
  return ir::Select(g, mask, padded, flat);
}

}  // namespace tpu::lowering
