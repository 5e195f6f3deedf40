#include "lowering/collective.h"

#include <stdexcept>

namespace tpu::lowering {

namespace {

std::string Groups(const std::vector<Dims>& groups) { return ir::DenseI64(groups); }

const char* ReductionName(Reduction r) {
  switch (r) {
    case Reduction::kSum:
      return "sum";
    case Reduction::kAvg:
      return "avg";
    case Reduction::kProduct:
      return "product";
    case Reduction::kMin:
      return "min";
    case Reduction::kMax:
      return "max";
    case Reduction::kBand:
      return "band";
    case Reduction::kBor:
      return "bor";
    case Reduction::kBxor:
      return "bxor";
    case Reduction::kPremulSum:
      return "premul_sum";
  }
  return "?";
}

const char* KindName(Collective k) {
  switch (k) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kPermute:
      return "permute";
  }
  return "?";
}

// x with the reduction's pre-step (premul_sum's factor).
Value Before(Graph& g, const CollectiveSpec& s, Value x) {
  if (s.reduction != Reduction::kPremulSum) return x;
  Type t = g.type(x);
  return ir::Binary(g, "stablehlo.multiply", x, ir::Constant(g, s.factor, t.dtype, t.dims));
}

// The reduced value with the reduction's post-step (avg's division).
Value After(Graph& g, const CollectiveSpec& s, Value x) {
  if (s.reduction != Reduction::kAvg) return x;
  Type t = g.type(x);
  return ir::Binary(g, "stablehlo.divide", x,
                    ir::Constant(g, static_cast<double>(s.size), t.dtype, t.dims));
}

bool IsBitwise(const std::string& op) {
  return op == "stablehlo.and" || op == "stablehlo.or" || op == "stablehlo.xor";
}

}  // namespace

std::string CombinerOp(Reduction r, DType t) {
  const bool pred = t == DType::kPred;
  const bool integral = !rt::IsFloat(t);
  switch (r) {
    case Reduction::kSum:
    case Reduction::kPremulSum:
      return pred ? "stablehlo.or" : "stablehlo.add";
    case Reduction::kAvg:
      if (integral) throw std::invalid_argument("ReduceOp.AVG needs a floating-point tensor");
      return "stablehlo.add";
    case Reduction::kProduct:
      return pred ? "stablehlo.and" : "stablehlo.multiply";
    case Reduction::kMin:
      return pred ? "stablehlo.and" : "stablehlo.minimum";
    case Reduction::kMax:
      return pred ? "stablehlo.or" : "stablehlo.maximum";
    case Reduction::kBand:
    case Reduction::kBor:
    case Reduction::kBxor:
      if (!integral) {
        throw std::invalid_argument(std::string("ReduceOp.") +
                                    (r == Reduction::kBand  ? "BAND"
                                     : r == Reduction::kBor ? "BOR"
                                                            : "BXOR") +
                                    " needs an integer or bool tensor");
      }
      return r == Reduction::kBand  ? "stablehlo.and"
             : r == Reduction::kBor ? "stablehlo.or"
                                    : "stablehlo.xor";
  }
  throw std::invalid_argument("unknown reduction");
}

std::vector<Dims> WholeGroup(int64_t size) {
  Dims all;
  for (int64_t i = 0; i < size; ++i) all.push_back(i);
  return {all};
}

Value AllReduce(Graph& g, Value x, const std::string& combiner, const std::vector<Dims>& groups) {
  Type t = g.type(x);
  return g.Op1("stablehlo.all_reduce", {x}, t, "replica_groups = " + Groups(groups),
               {ir::ScalarRegion(t.dtype, combiner)});
}

Value AllGather(Graph& g, Value x, int64_t dim, const std::vector<Dims>& groups) {
  Type t = g.type(x);
  t.dims[dim] *= static_cast<int64_t>(groups.at(0).size());
  return g.Op1(
      "stablehlo.all_gather", {x}, t,
      "all_gather_dim = " + std::to_string(dim) + " : i64, replica_groups = " + Groups(groups));
}

Value ReduceScatter(Graph& g, Value x, int64_t dim, const std::string& combiner,
                    const std::vector<Dims>& groups) {
  Type t = g.type(x);
  const auto n = static_cast<int64_t>(groups.at(0).size());
  if (t.dims[dim] % n != 0) throw std::invalid_argument("reduce_scatter: dim not divisible");
  Type out = t;
  out.dims[dim] /= n;
  return g.Op1(
      "stablehlo.reduce_scatter", {x}, out,
      "scatter_dimension = " + std::to_string(dim) + " : i64, replica_groups = " + Groups(groups),
      {ir::ScalarRegion(t.dtype, combiner)});
}

Value AllToAll(Graph& g, Value x, int64_t split_dim, int64_t concat_dim,
               const std::vector<Dims>& groups) {
  Type t = g.type(x);
  const auto n = static_cast<int64_t>(groups.at(0).size());
  t.dims[split_dim] /= n;
  t.dims[concat_dim] *= n;
  return g.Op1("stablehlo.all_to_all", {x}, t,
               "split_dimension = " + std::to_string(split_dim) + " : i64, concat_dimension = " +
                   std::to_string(concat_dim) + " : i64, split_count = " + std::to_string(n) +
                   " : i64, replica_groups = " + Groups(groups));
}

Value CollectivePermute(Graph& g, Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::vector<Dims> rows;
  for (const auto& [src, dst] : pairs) rows.push_back({src, dst});
  return g.Op1("stablehlo.collective_permute", {x}, g.type(x),
               "source_target_pairs = " + ir::DenseI64(rows));
}

Value ReplicaId(Graph& g) { return g.Op1("stablehlo.replica_id", {}, Type{DType::kU32, {}}); }

Graph CollectiveProgram(const CollectiveSpec& s) {
  Graph g;
  const std::vector<Dims> groups = WholeGroup(s.size);
  for (const Type& t : s.operands) {
    Value x = g.Param(t);
    Value y = -1;
    switch (s.kind) {
      case Collective::kAllReduce: {
        const std::string op = CombinerOp(s.reduction, t.dtype);
        if (IsBitwise(op)) {
          // XLA's all_reduce takes arithmetic combiners only: gather, then reduce locally.
          Dims one = t.dims;
          one.insert(one.begin(), 1);
          Value all = AllGather(g, ir::Reshape(g, x, one), 0, groups);
          const int bits = static_cast<int>(rt::ItemSize(t.dtype)) * 8;
          const uint64_t ones =
              rt::IsUnsigned(t.dtype) && bits < 64 ? (uint64_t{1} << bits) - 1 : ~uint64_t{0};
          Value init = ir::IntConstant(g, op == "stablehlo.and" ? ones : 0, t.dtype);
          if (t.dtype == DType::kPred) init = ir::Constant(g, op == "stablehlo.and", t.dtype);
          y = ir::Reduce(g, all, init, {0}, op);
        } else {
          y = After(g, s, AllReduce(g, Before(g, s, x), op, groups));
        }
        break;
      }
      case Collective::kBroadcast: {
        // Every replica but the root contributes zeros (select, so a NaN there cannot leak).
        Value root = ir::IntConstant(g, static_cast<uint64_t>(s.root), DType::kU32);
        Value is_root = ir::BroadcastTo(g, ir::Compare(g, ReplicaId(g), root, "EQ"), t.dims);
        Value masked = ir::Select(g, is_root, x, ir::Constant(g, 0, t.dtype, t.dims));
        y = AllReduce(g, masked, CombinerOp(Reduction::kSum, t.dtype), groups);
        break;
      }
      case Collective::kAllGather: {
        Dims one = t.dims;
        one.insert(one.begin(), 1);
        y = AllGather(g, ir::Reshape(g, x, one), 0, groups);
        break;
      }
      case Collective::kReduceScatter: {
        Value r = ReduceScatter(g, Before(g, s, x), 0, CombinerOp(s.reduction, t.dtype), groups);
        y = After(g, s, ir::Reshape(g, r, Dims(t.dims.begin() + 1, t.dims.end())));
        break;
      }
      case Collective::kAllToAll:
        y = AllToAll(g, x, 0, 0, groups);
        break;
      case Collective::kPermute:
        y = CollectivePermute(g, x, s.pairs);
        break;
    }
    g.results.push_back(y);
  }
  return g;
}

std::string Describe(const CollectiveSpec& s) {
  std::string d = KindName(s.kind);
  if (s.kind == Collective::kAllReduce || s.kind == Collective::kReduceScatter) {
    d += std::string("(") + ReductionName(s.reduction);
    if (s.reduction == Reduction::kPremulSum) d += " " + std::to_string(s.factor);
    d += ")";
  }
  if (s.kind == Collective::kBroadcast) d += "(root " + std::to_string(s.root) + ")";
  if (s.kind == Collective::kPermute) {
    for (const auto& [src, dst] : s.pairs) {
      d += " " + std::to_string(src) + "->" + std::to_string(dst);
    }
  }
  for (size_t i = 0; i < s.operands.size(); ++i) {
    d += (i ? ", " : " ") + s.operands[i].str();
  }
  return d + " over " + std::to_string(s.size);
}

}  // namespace tpu::lowering
