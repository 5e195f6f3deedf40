#include "ir/graph.h"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <unordered_map>

#include "ir/dynamic_sizes.h"

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

std::optional<int64_t> WholeConstant(const Graph& g, const Node& n) {
  if (n.op != "stablehlo.constant" || n.results.size() != 1 || g.type(n.results[0]).rank() != 0) {
    return std::nullopt;
  }
  const size_t open = n.attrs.find("dense<");
  const size_t close = n.attrs.find('>', open);
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  const std::string lit = n.attrs.substr(open + 6, close - open - 6);
  if (lit.empty() || lit.find('x') != std::string::npos) return std::nullopt;  // hex bit patterns
  char* end = nullptr;
  const double v = std::strtod(lit.c_str(), &end);
  if (end != lit.c_str() + lit.size() || v != std::floor(v) || std::fabs(v) > 1e12) {
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

namespace {

// Mixer128 over a graph's ops, attributes, types and wiring.
struct Hasher : Mixer128 {
  bool shapeless = false;  // the dims of the graph's own values are left out
  using Mixer128::Mix;
  void Mix(const std::string& s) {
    Mix(s.size());
    for (unsigned char c : s) Mix(c);
  }
  void Mix(const Type& t) {
    Mix(static_cast<uint64_t>(t.dtype));
    Mix(t.dims.size());
    if (shapeless) return;
    for (int64_t d : t.dims) Mix(static_cast<uint64_t>(d));
  }
  void Mix(const Graph& g) {
    // Value numbers too, not only types: a param made after a node (a constant) is another
    // program than a node's result with that number (cummin of a 0-d tensor returned its
    // param where zero_ returned its constant, and the two shared an executable).
    Mix(g.params.size());
    for (Value p : g.params) {
      Mix(static_cast<uint64_t>(p));
      Mix(g.type(p));
    }
    Mix(g.nodes.size());
    for (const Node& n : g.nodes) {
      Mix(n.op);
      // A dynamic_slice's only attribute is its result's dims.
      if (!shapeless || !(WholeConstant(g, n) || n.op == "stablehlo.dynamic_slice")) Mix(n.attrs);
      Mix(n.operands.size());
      for (Value v : n.operands) Mix(static_cast<uint64_t>(v));
      Mix(n.results.size());
      for (Value v : n.results) {
        Mix(static_cast<uint64_t>(v));
        Mix(g.type(v));
      }
      Mix(n.regions.size());
      bool outer = shapeless;
      shapeless = false;  // a region's sizes are hashed whole
      for (const auto& r : n.regions) Mix(*r);
      shapeless = outer;
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
  return h.Get();
}

Hash128 ShapelessHash(const Graph& g) {
  Hasher h;
  h.shapeless = true;
  h.Mix(g);
  return h.Get();
}

std::string PrintModule(const Graph& g) {
  Printer p;
  p.out =
      "module @torchtpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} "
      "{\n";
  if (HasDynamicSizes(g)) {
    p.Function(ForDynamicSizes(g));  // see dynamic_sizes.h
  } else {
    p.Function(g);
  }
  p.out += "}\n";
  return p.out;
}

}  // namespace tpu::ir
