#include "ir/graph.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "ir/builder.h"

namespace tpu::ir {

int64_t Type::numel() const {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

std::string Type::str() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  s += rt::MlirName(dtype);
  return s + ">";
}

Value Graph::Param(Type t) {
  types.push_back(std::move(t));
  Value v = static_cast<Value>(types.size() - 1);
  params.push_back(v);
  return v;
}

std::vector<Value> Graph::Op(std::string op, std::vector<Value> operands,
                             std::vector<Type> result_types, std::string attrs,
                             std::vector<std::shared_ptr<Graph>> regions) {
  Node n{std::move(op), std::move(operands), {}, std::move(attrs), std::move(regions)};
  for (Type& t : result_types) {
    types.push_back(std::move(t));
    n.results.push_back(static_cast<Value>(types.size() - 1));
  }
  nodes.push_back(std::move(n));
  return nodes.back().results;
}

Value Graph::Op1(std::string op, std::vector<Value> operands, Type result_type, std::string attrs,
                 std::vector<std::shared_ptr<Graph>> regions) {
  return Op(std::move(op), std::move(operands), {std::move(result_type)}, std::move(attrs),
            std::move(regions))[0];
}

std::vector<Value> Inline(Graph& into, const Graph& from, const std::vector<Value>& args) {
  std::vector<Value> map(from.types.size(), -1);
  for (size_t i = 0; i < from.params.size(); ++i) map[from.params[i]] = args.at(i);
  for (const Node& n : from.nodes) {
    Node copy{n.op, {}, {}, n.attrs, n.regions};
    copy.operands.reserve(n.operands.size());
    for (Value v : n.operands) copy.operands.push_back(map[v]);
    for (Value r : n.results) {
      into.types.push_back(from.types[r]);
      map[r] = static_cast<Value>(into.types.size() - 1);
      copy.results.push_back(map[r]);
    }
    into.nodes.push_back(std::move(copy));
  }
  std::vector<Value> results;
  results.reserve(from.results.size());
  for (Value r : from.results) results.push_back(map[r]);
  return results;
}

namespace {

// FNV-1a style mixing into two independent 64-bit lanes.
struct Hasher {
  uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
  void Mix(uint64_t x) {
    a = (a ^ x) * 0x100000001b3ULL;
    b = (b ^ (x + 0x9e3779b97f4a7c15ULL)) * 0x00000100000001b3ULL + 0x2545f4914f6cdd1dULL;
  }
  void Mix(const std::string& s) {
    Mix(s.size());
    for (unsigned char c : s) Mix(c);
  }
  void Mix(const Type& t) {
    Mix(static_cast<uint64_t>(t.dtype));
    Mix(t.dims.size());
    for (int64_t d : t.dims) Mix(static_cast<uint64_t>(d));
  }
  void Mix(const Graph& g) {
    Mix(g.params.size());
    for (Value p : g.params) Mix(g.type(p));
    Mix(g.nodes.size());
    for (const Node& n : g.nodes) {
      Mix(n.op);
      Mix(n.attrs);
      Mix(n.operands.size());
      for (Value v : n.operands) Mix(static_cast<uint64_t>(v));
      Mix(n.results.size());
      for (Value v : n.results) Mix(g.type(v));
      Mix(n.regions.size());
      for (const auto& r : n.regions) Mix(*r);
    }
    for (Value v : g.results) Mix(static_cast<uint64_t>(v));
    for (const auto& [param, result] : g.donations) {
      Mix(static_cast<uint64_t>(param));
      Mix(static_cast<uint64_t>(result));
    }
  }
};

class Printer {
 public:
  std::string out;

  void Function(const Graph& g) {
    std::string prefix = Prefix();
    out += "  func.func public @main(";
    for (size_t i = 0; i < g.params.size(); ++i) {
      if (i) out += ", ";
      out += Name(prefix, g, g.params[i]) + ": " + g.type(g.params[i]).str();
      for (const auto& [param, result] : g.donations) {
        if (param == static_cast<int64_t>(i)) {
          out += " {tf.aliasing_output = " + std::to_string(result) + " : i32}";
        }
      }
    }
    out += ") -> (";
    for (size_t i = 0; i < g.results.size(); ++i) {
      if (i) out += ", ";
      out += g.type(g.results[i]).str();
    }
    out += ") {\n";
    Body(prefix, g, "    ");
    out += "    \"func.return\"(";
    Return(prefix, g);
    out += "  }\n";
  }

 private:
  std::unordered_map<Value, std::string> names_;
  std::vector<std::unordered_map<Value, std::string>> stack_;
  int regions_ = 0;

  std::string Prefix() { return regions_ == 0 ? "v" : "r" + std::to_string(regions_) + "_"; }

  std::string Name(const std::string& prefix, const Graph&, Value v) {
    auto& names = stack_.empty() ? names_ : stack_.back();
    auto it = names.find(v);
    if (it != names.end()) return it->second;
    std::string n = "%" + prefix + std::to_string(v);
    names[v] = n;
    return n;
  }

  void Return(const std::string& prefix, const Graph& g) {
    for (size_t i = 0; i < g.results.size(); ++i) {
      if (i) out += ", ";
      out += Name(prefix, g, g.results[i]);
    }
    out += ") : (";
    for (size_t i = 0; i < g.results.size(); ++i) {
      if (i) out += ", ";
      out += g.type(g.results[i]).str();
    }
    out += ") -> ()\n";
  }

  void Body(const std::string& prefix, const Graph& g, const std::string& indent) {
    for (const Node& n : g.nodes) {
      out += indent;
      if (n.results.size() == 1) {
        out += Name(prefix, g, n.results[0]) + " = ";
      } else if (n.results.size() > 1) {
        std::string base = "%" + prefix + std::to_string(n.results[0]) + "m";
        auto& names = stack_.empty() ? names_ : stack_.back();
        for (size_t i = 0; i < n.results.size(); ++i) {
          names[n.results[i]] = base + "#" + std::to_string(i);
        }
        out += base + ":" + std::to_string(n.results.size()) + " = ";
      }
      out += "\"" + n.op + "\"(";
      for (size_t i = 0; i < n.operands.size(); ++i) {
        if (i) out += ", ";
        out += Name(prefix, g, n.operands[i]);
      }
      out += ")";
      if (!n.regions.empty()) {
        out += " (";
        for (size_t r = 0; r < n.regions.size(); ++r) {
          if (r) out += ", ";
          Region(*n.regions[r], indent);
        }
        out += ")";
      }
      if (!n.attrs.empty()) out += " {" + n.attrs + "}";
      out += " : (";
      for (size_t i = 0; i < n.operands.size(); ++i) {
        if (i) out += ", ";
        out += g.type(n.operands[i]).str();
      }
      out += ") -> ";
      if (n.results.size() == 1) {
        out += g.type(n.results[0]).str();
      } else {
        out += "(";
        for (size_t i = 0; i < n.results.size(); ++i) {
          if (i) out += ", ";
          out += g.type(n.results[i]).str();
        }
        out += ")";
      }
      out += "\n";
    }
  }

  // A region is a nested graph: its params are block arguments, its results are returned.
  void Region(const Graph& r, const std::string& indent) {
    ++regions_;
    stack_.emplace_back();
    std::string prefix = Prefix();
    out += "{\n" + indent + "^bb0(";
    for (size_t i = 0; i < r.params.size(); ++i) {
      if (i) out += ", ";
      out += Name(prefix, r, r.params[i]) + ": " + r.type(r.params[i]).str();
    }
    out += "):\n";
    Body(prefix, r, indent + "  ");
    out += indent + "  \"stablehlo.return\"(";
    Return(prefix, r);
    out += indent + "}";
    stack_.pop_back();
  }
};

}  // namespace

Hash128 StructuralHash(const Graph& g) {
  Hasher h;
  h.Mix(g);
  return Hash128{h.a, h.b};
}

namespace {

// Programs that mark sizes dynamic (set_dimension_size) are printed with two changes, because
// their types stay static (the rules know only the bound):
// - get_dimension_size, which MLIR would fold to the bound of the static type, becomes a count:
//   a reduce over an always-true mask of the operand, which XLA's dynamic padder cuts to the real
//   size;
// - each result dim that may be dynamic (DynamicDims) is gathered whole (indices 0..n-1). A
// gather's result has static sizes, so
//   the program returns plain padded buffers rather than buffers with XLA's dynamic-size
//   metadata appended, which no program takes in. (Updates, slices, pads and selects keep the
//   dynamic size, and MLIR folds an identity update away.)
bool HasDynamicSizes(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return n.op == "stablehlo.set_dimension_size"; });
}

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

// The integers of the list that follows `key` in an op's attributes ("array<i64: 0, 1>" or
// "[0, 1]"); empty when the key is missing.
Dims ListAfter(const std::string& attrs, const std::string& key) {
  Dims out;
  size_t at = attrs.find(key);
  if (at == std::string::npos) return out;
  size_t open = attrs.find_first_of("[:", at + key.size());
  size_t close = attrs.find_first_of("]>", open);
  std::string body = attrs.substr(open + 1, close - open - 1);
  for (size_t i = 0; i < body.size();) {
    size_t j = body.find(',', i);
    std::string item = body.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (item.find_first_of("0123456789") != std::string::npos) out.push_back(std::stoll(item));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

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
      Dims map = ListAfter(n.attrs, "broadcast_dimensions");
      for (size_t i = 0; i < map.size(); ++i) {
        if (mask[n.operands[0]] >> i & 1) out |= 1ull << map[i];
      }
    } else if (n.op == "stablehlo.transpose") {
      Dims perm = ListAfter(n.attrs, "permutation");
      for (size_t i = 0; i < perm.size(); ++i) {
        if (mask[n.operands[0]] >> perm[i] & 1) out |= 1ull << i;
      }
    } else if (n.op == "stablehlo.reduce") {
      Dims dims = ListAfter(n.attrs, "dimensions");
      for (int64_t d = 0, k = 0; d < g.type(n.operands[0]).rank(); ++d) {
        if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
        if (in >> d & 1) out |= 1ull << k;
        ++k;
      }
    } else if (n.op == "stablehlo.dot_general") {
      Dims lb = ListAfter(n.attrs, "lhs_batching_dimensions");
      Dims rb = ListAfter(n.attrs, "rhs_batching_dimensions");
      Dims lc = ListAfter(n.attrs, "lhs_contracting_dimensions");
      Dims rc = ListAfter(n.attrs, "rhs_contracting_dimensions");
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

}  // namespace

std::string PrintModule(const Graph& g) {
  Printer p;
  p.out =
      "module @torchtpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} "
      "{\n";
  if (HasDynamicSizes(g)) {
    p.Function(ForDynamicSizes(g));
  } else {
    p.Function(g);
  }
  p.out += "}\n";
  return p.out;
}

}  // namespace tpu::ir
