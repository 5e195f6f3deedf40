#include "ir/dynamic_sizes.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ir/builder.h"

namespace tpu::ir {

namespace {

// Appends to `s` the size of dim `d` of x, counted; the last node defines `result`.
void CountDimension(Graph& s, Value x, int64_t d, Value result) {
  const Type& xt = s.type(x);
  Value always = Binary(s, "stablehlo.or", Compare(s, x, x, "EQ"), Compare(s, x, x, "NE"));
  Value ones = Convert(s, always, DType::kS32);
  Value per_row = Reduce(s, ones, Constant(s, 0, DType::kS32), {d}, "stablehlo.add");
  Dims other;
  for (int64_t i = 0; i < xt.rank(); ++i) {
    if (i != d) other.push_back(xt.dims[i]);
  }
  Value first = Slice(s, per_row, Dims(other.size(), 0), Dims(other.size(), 1));
  s.nodes.push_back(Node{"stablehlo.reshape", {first}, {result}, {}, {}});
}

// The `dimension = d : i64` attribute of set_dimension_size and get_dimension_size.
int64_t DimensionAttr(const Node& n) { return std::stoll(n.attrs.substr(n.attrs.find('=') + 1)); }

// Which dims of each value may carry a dynamic size (bit d for dim d), following the ops that
// move dims around and dropping the dims that reductions and contractions remove; any other op
// with a dynamic operand is taken to make every dim of its result dynamic.
std::vector<uint64_t> DynamicDims(const Graph& g) {
  std::vector<uint64_t> mask(g.types.size(), 0);
  auto all = [&](Value v) {
    return g.type(v).rank() >= 64 ? ~0ull : (1ull << g.type(v).rank()) - 1;
  };
  for (const Node& n : g.nodes) {
    if (n.results.empty()) continue;
    Value r = n.results[0];
    uint64_t in = 0;
    for (Value o : n.operands) in |= mask[o];
    if (n.op == "stablehlo.set_dimension_size") {
      mask[r] = mask[n.operands[0]] | (1ull << DimensionAttr(n));
      continue;
    }
    if (n.op == "stablehlo.get_dimension_size" || in == 0) continue;
    uint64_t out = 0;
    if (n.op == "stablehlo.broadcast_in_dim") {
      Dims map = AttrList(n.attrs, "broadcast_dimensions");
      for (size_t i = 0; i < map.size(); ++i) {
        if (mask[n.operands[0]] >> i & 1) out |= 1ull << map[i];
      }
    } else if (n.op == "stablehlo.transpose") {
      Dims perm = AttrList(n.attrs, "permutation");
      for (size_t i = 0; i < perm.size(); ++i) {
        if (mask[n.operands[0]] >> perm[i] & 1) out |= 1ull << i;
      }
    } else if (n.op == "stablehlo.reduce") {
      Dims dims = AttrList(n.attrs, "dimensions");
      for (int64_t d = 0, k = 0; d < g.type(n.operands[0]).rank(); ++d) {
        if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
        if (in >> d & 1) out |= 1ull << k;
        ++k;
      }
    } else if (n.op == "stablehlo.dot_general") {
      Dims lb = AttrList(n.attrs, "lhs_batching_dimensions");
      Dims rb = AttrList(n.attrs, "rhs_batching_dimensions");
      Dims lc = AttrList(n.attrs, "lhs_contracting_dimensions");
      Dims rc = AttrList(n.attrs, "rhs_contracting_dimensions");
      uint64_t lm = mask[n.operands[0]], rm = mask[n.operands[1]];
      int64_t k = 0;
      for (size_t i = 0; i < lb.size(); ++i, ++k) {
        if ((lm >> lb[i] | rm >> rb[i]) & 1) out |= 1ull << k;
      }
      auto free_dims = [&](Value v, uint64_t m, const Dims& batch, const Dims& contract) {
        for (int64_t d = 0; d < g.type(v).rank(); ++d) {
          bool used = std::find(batch.begin(), batch.end(), d) != batch.end() ||
                      std::find(contract.begin(), contract.end(), d) != contract.end();
          if (used) continue;
          if (m >> d & 1) out |= 1ull << k;
          ++k;
        }
      };
      free_dims(n.operands[0], lm, lb, lc);
      free_dims(n.operands[1], rm, rb, rc);
    } else {
      bool elementwise = true;
      for (Value o : n.operands) elementwise &= g.type(o).dims == g.type(r).dims || mask[o] == 0;
      out = elementwise ? in : all(r);
    }
    for (Value res : n.results) mask[res] = res == r ? out : all(res);
  }
  return mask;
}

}  // namespace

bool HasDynamicSizes(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return n.op == "stablehlo.set_dimension_size"; });
}

Graph ForDynamicSizes(const Graph& g) {
  std::vector<uint64_t> dynamic = DynamicDims(g);
  Graph s = g;
  s.nodes.clear();
  for (const Node& n : g.nodes) {
    if (n.op != "stablehlo.get_dimension_size") {
      s.nodes.push_back(n);
      continue;
    }
    CountDimension(s, n.operands[0], DimensionAttr(n), n.results[0]);
  }
  for (Value& r : s.results) {
    const Type t = s.type(r);
    uint64_t m = dynamic[r];
    for (int64_t d = 0; d < t.rank(); ++d) {
      if (t.dims[d] <= 1 || !(m >> d & 1)) continue;
      r = Gather(s, r, Iota(s, Type{DType::kS64, {t.dims[d], 1}}, 0), {d}, d);
    }
  }
  return s;
}

}  // namespace tpu::ir
