#include "ir/size_family.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "ir/builder.h"
#include "runtime/env.h"

namespace tpu::ir {

int64_t MinBound() {
  static const int64_t n = rt::EnvCount("TORCHTPU_MIN_BOUND", 16);
  return n;
}
int64_t WideBound() {
  static const int64_t n = rt::EnvCount("TORCHTPU_WIDE_BOUND", 128);
  return n;
}

namespace {

// Where each value's dims start in Sizes(g).
std::vector<size_t> SizeOffsets(const Graph& g) {
  std::vector<size_t> at(g.types.size() + 1, 0);
  for (size_t v = 0; v < g.types.size(); ++v) at[v + 1] = at[v] + g.types[v].dims.size();
  return at;
}

// Ops whose results depend on where the padding sits, or that have no padding rule in XLA.
const std::set<std::string>& Refused() {
  static const std::set<std::string> ops{"stablehlo.reverse",
                                         "stablehlo.sort",
                                         "stablehlo.rng",
                                         "stablehlo.custom_call",
                                         "stablehlo.while",
                                         "stablehlo.case",
                                         "stablehlo.if",
                                         "stablehlo.all_reduce",
                                         "stablehlo.all_gather",
                                         "stablehlo.reduce_scatter",
                                         "stablehlo.all_to_all",
                                         "stablehlo.collective_permute",
                                         "stablehlo.fft",
                                         "stablehlo.cholesky",
                                         "stablehlo.triangular_solve",
                                         "stablehlo.bitcast_convert",
                                         "stablehlo.select_and_scatter",
                                         "stablehlo.set_dimension_size"};
  return ops;
}

// Follows v back through reshapes: a chain of reshapes is one reshape of its source.
Value ReshapeSource(const Graph& g, const std::vector<int32_t>& producer, Value v) {
  while (producer[v] >= 0 && g.nodes[producer[v]].op == "stablehlo.reshape") {
    v = g.nodes[producer[v]].operands[0];
  }
  return v;
}

// A scatter of one operand whose region adds each update to its entry (index_put with
// accumulate, embedding's and index_select's backward).
bool AddsUpdates(const Node& n) {
  if (n.op != "stablehlo.scatter" || n.operands.size() != 3 || n.regions.size() != 1) return false;
  const Graph& r = *n.regions[0];
  return r.nodes.size() == 1 && r.nodes[0].op == "stablehlo.add" && r.results.size() == 1 &&
         r.results[0] == r.nodes[0].results[0] && r.params.size() == 2;
}

// Per value: whether something other than a reshape takes it (a chain of reshapes folds into
// its last one).
std::vector<char> TakenByOtherThanReshapes(const Graph& g) {
  std::vector<char> used(g.types.size(), 0);
  for (const Node& n : g.nodes) {
    if (n.op == "stablehlo.reshape") continue;
    for (Value o : n.operands) used[o] = 1;
  }
  for (Value r : g.results) used[r] = 1;
  return used;
}

std::vector<int32_t> Producers(const Graph& g) {
  std::vector<int32_t> producer(g.types.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (Value r : g.nodes[i].results) producer[r] = static_cast<int32_t>(i);
  }
  return producer;
}

// Whether reshaping `from` into `to` keeps padded entries where XLA puts them. XLA's dynamic
// padder packs a reshaped dim's real entries first, which is the padded layout only when, in each
// group of dims the reshape merges or splits, the sized dim is the group's outermost dim (not 1)
// on both sides. Groups are found from prefix products under two values of s.
bool KeepsPadding(const std::vector<Affine>& from, const std::vector<Affine>& to) {
  constexpr unsigned __int128 kMod = (static_cast<unsigned __int128>(1) << 61) - 1;
  auto prefix = [&](const std::vector<Affine>& dims, const Point& s) {
    std::vector<uint64_t> out{1};
    for (const Affine& d : dims) {
      out.push_back(static_cast<uint64_t>(static_cast<unsigned __int128>(out.back()) *
                                          static_cast<uint64_t>(d.At(s)) % kMod));
    }
    return out;
  };
  const auto f1 = prefix(from, {1009, 3001}), f2 = prefix(from, {2003, 4001});
  const auto t1 = prefix(to, {1009, 3001}), t2 = prefix(to, {2003, 4001});
  // Checks dims [lo, hi) of one side: no sized dim, or the first dim not 1 is the only one.
  auto group_ok = [](const std::vector<Affine>& dims, size_t lo, size_t hi) {
    bool first = true;
    for (size_t i = lo; i < hi; ++i) {
      const Affine& d = dims[i];
      if (!d.Sized() && d.b == 1) continue;
      if (d.Sized() && !first) return false;
      first = false;
    }
    return true;
  };
  size_t i = 0, j = 0;  // the current group starts at from[i], to[j]
  for (size_t a = 1, b = 1; a <= from.size() && b <= to.size();) {
    if (f1[a] == t1[b] && f2[a] == t2[b]) {
      if (!group_ok(from, i, a) || !group_ok(to, j, b)) return false;
      i = a++;
      j = b++;
    } else if (f1[a] < t1[b]) {
      ++a;
    } else {
      ++b;
    }
  }
  return group_ok(from, i, from.size()) && group_ok(to, j, to.size());
}

// The dims of v under the formula at bound P (see CapacityDims).
std::vector<int64_t> Capacities(const SizeFormula& f, const std::vector<size_t>& at, Value v,
                                const Point& bound) {
  std::vector<int64_t> dims;
  for (size_t i = at[v]; i < at[v + 1]; ++i) dims.push_back(Capacity(f.sizes[i], bound));
  return dims;
}

std::vector<Affine> DimFormulas(const SizeFormula& f, const std::vector<size_t>& at, Value v) {
  return {f.sizes.begin() + static_cast<ptrdiff_t>(at[v]),
          f.sizes.begin() + static_cast<ptrdiff_t>(at[v + 1])};
}

bool Sized(const SizeFormula& f, const std::vector<size_t>& at, Value v) {
  for (size_t i = at[v]; i < at[v + 1]; ++i) {
    if (f.sizes[i].Sized()) return true;
  }
  return false;
}

// Values with two sized dims go only to ops checked with them on XLA:CPU: elementwise ops,
// broadcasts, transposes, reductions, reshapes (KeepsPadding allows one sized dim per group),
// and dots whose operands have at most one sized free dim each. XLA merges a dot's free dims
// into one, and its dynamic padder gave wrong results for two sized dims merged so (adaptive
// pooling whose batch and output size both grow with s). Returns the reason, or "".
std::string TwoSizedDims(const Graph& g, const SizeFormula& f, const std::vector<size_t>& at,
                         const Node& n) {
  auto sized = [&](Value v, int64_t d) { return f.sizes[at[v] + static_cast<size_t>(d)].Sized(); };
  bool wide = false;
  for (Value o : n.operands) {
    int count = 0;
    for (int64_t d = 0; d < g.type(o).rank(); ++d) count += sized(o, d);
    wide |= count > 1;
  }
  if (!wide) return "";
  // (Bounded masks the updates of scatters and dynamic_update_slices along every sized dim.)
  static const std::set<std::string> moving{
      "stablehlo.broadcast_in_dim", "stablehlo.transpose", "stablehlo.reduce",
      "stablehlo.reshape",          "stablehlo.scatter",   "stablehlo.dynamic_update_slice"};
  if (moving.count(n.op) != 0) return "";
  // A gather's result entries each read their own index: sized dims of the indices are batch
  // dims (T5's [s, s] relative positions into its bias table).
  if (n.op == "stablehlo.gather") {
    int count = 0;
    for (int64_t d = 0; d < g.type(n.operands[0]).rank(); ++d) count += sized(n.operands[0], d);
    return count > 1 ? "a gather from a value with two sized dims" : "";
  }
  if (n.op == "stablehlo.dot_general") {
    for (const char* side : {"lhs", "rhs"}) {
      const Value o = n.operands[side[0] == 'l' ? 0 : 1];
      Dims used = AttrList(n.attrs, std::string(side) + "_batching_dimensions");
      const Dims contract = AttrList(n.attrs, std::string(side) + "_contracting_dimensions");
      used.insert(used.end(), contract.begin(), contract.end());
      int free_sized = 0;
      for (int64_t d = 0; d < g.type(o).rank(); ++d) {
        free_sized += sized(o, d) && std::find(used.begin(), used.end(), d) == used.end();
      }
      if (free_sized > 1) return "a dot over two sized free dims";
    }
    return "";
  }
  const std::vector<Affine> out = DimFormulas(f, at, n.results.at(0));
  for (Value o : n.operands) {
    const std::vector<Affine> in = DimFormulas(f, at, o);
    if (in != out && !in.empty()) return n.op + " of a value with two sized dims";
  }
  return "";
}

}  // namespace

std::vector<int64_t> Sizes(const Graph& g) {
  std::vector<int64_t> out;
  for (const Type& t : g.types) out.insert(out.end(), t.dims.begin(), t.dims.end());
  for (const Node& n : g.nodes) {
    if (std::optional<int64_t> c = WholeConstant(g, n)) out.push_back(*c);
  }
  return out;
}

std::optional<SizeFormula> FitSizes(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                    size_t dims) {
  if (x.size() != y.size()) return std::nullopt;
  SizeFormula f;
  f.sizes.resize(x.size());
  // The symbol is the dim that changes least (a flat [1024 s] may come before the [8, s, 128] it
  // is reshaped to), or the first constant that changes when no dim does.
  size_t first = x.size();
  auto least = [&](size_t i) {
    return first == x.size() || std::abs(y[i] - x[i]) < std::abs(y[first] - x[first]);
  };
  for (size_t i = 0; i < std::min(dims, x.size()); ++i) {
    if (x[i] != y[i] && least(i)) first = i;
  }
  for (size_t i = dims; i < x.size() && first == x.size(); ++i) {
    if (x[i] != y[i]) first = i;
  }
  if (first == x.size()) return std::nullopt;  // the same program
  const int64_t ds = y[first] - x[first];
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t d = y[i] - x[i];
    if (d % ds != 0) return std::nullopt;
    const int64_t a = d / ds;
    if (a < 0 && i < dims) return std::nullopt;  // a dim that shrinks as the others grow
    f.sizes[i] = {a, x[i] - a * x[first]};
  }
  f.symbol = first;
  f.dims = dims;
  return f;
}

std::optional<SizeFormula> FitSizes(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                    const std::vector<int64_t>& z, size_t dims, size_t* misfit) {
  if (x.size() != y.size() || x.size() != z.size()) return std::nullopt;
  // Each size's changes from x, to y and to z, as a vector; s's and t's are two dims' vectors
  // that are not parallel, the smallest such (so that the others are integer multiples).
  auto change = [&](size_t i) { return std::abs(y[i] - x[i]) + std::abs(z[i] - x[i]); };
  auto parallel = [&](size_t i, size_t j) {
    return (y[i] - x[i]) * (z[j] - x[j]) == (z[i] - x[i]) * (y[j] - x[j]);
  };
  const size_t n = std::min(dims, x.size());
  size_t p = kNoSymbol, q = kNoSymbol;
  for (size_t i = 0; i < n; ++i) {
    if (change(i) != 0 && (p == kNoSymbol || change(i) < change(p))) p = i;
  }
  if (p == kNoSymbol) return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    if (!parallel(i, p) && (q == kNoSymbol || change(i) < change(q))) q = i;
  }
  if (q == kNoSymbol) return std::nullopt;  // one symbol's changes: not two
  const int64_t p1 = y[p] - x[p], p2 = z[p] - x[p], q1 = y[q] - x[q], q2 = z[q] - x[q];
  const int64_t det = p1 * q2 - p2 * q1;
  SizeFormula f;
  f.sizes.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t d1 = y[i] - x[i], d2 = z[i] - x[i];
    const int64_t an = d1 * q2 - d2 * q1, cn = p1 * d2 - p2 * d1;
    const bool shrinks = (an / det < 0 || cn / det < 0) && i < dims;  // a dim that shrinks
    if (an % det != 0 || cn % det != 0 || shrinks) {
      if (misfit != nullptr) *misfit = i;
      return std::nullopt;
    }
    const int64_t a = an / det, c = cn / det;
    f.sizes[i] = {a, x[i] - a * x[p] - c * x[q], c};
  }
  f.symbol = p;
  f.symbol2 = q;
  f.dims = dims;
  return f;
}

std::optional<SizeFormula> GuessSizes(const Graph& g, int64_t size, int64_t size2) {
  // Per value, the formula of each dim. A dim equal to `size` is s (to `size2`, t). In an op's
  // result with no such dim, one dim that is not a constant dim of its operands may be k*s or
  // s+1 or s-1 (a reshape that merges s rows, a cat that adds one, zeros made for s rows, a
  // shift by one), or the same of t. A param's dims are s or t only; a whole constant that is a
  // multiple of `size` is k*s (a stride, a divisor; -s an index check's bound), else one of
  // `size2` k*t.
  const std::vector<int64_t> varying = size2 > 0 ? std::vector{size, size2} : std::vector{size};
  auto times = [](size_t k, int64_t coef, int64_t b) {
    return k == 0 ? Affine{coef, b} : Affine{0, b, coef};
  };
  std::vector<std::vector<Affine>> dims(g.types.size());
  auto label = [&](Value v, const std::vector<Value>* from) {
    const std::vector<int64_t>& d = g.types[static_cast<size_t>(v)].dims;
    std::set<int64_t> fixed;  // the operands' constant dims
    if (from != nullptr) {
      for (Value o : *from) {
        for (const Affine& x : dims[static_cast<size_t>(o)]) {
          if (!x.Sized()) fixed.insert(x.b);
        }
      }
    }
    bool derive = from != nullptr;
    for (int64_t n : varying) derive &= std::find(d.begin(), d.end(), n) == d.end();
    for (int64_t x : d) {
      Affine f{0, x};
      for (size_t k = 0; k < varying.size() && !f.Sized(); ++k) {
        if (x == varying[k]) f = times(k, 1, 0);
      }
      for (size_t k = 0; k < varying.size() && !f.Sized() && derive && fixed.count(x) == 0; ++k) {
        const int64_t n = varying[k];
        if (x == n + 1 || x == n - 1) f = times(k, 1, x - n);
        if (x > n && x % n == 0) f = times(k, x / n, 0);
      }
      if (f.Sized() && std::find(varying.begin(), varying.end(), x) == varying.end()) {
        derive = false;  // one per value
      }
      dims[static_cast<size_t>(v)].push_back(f);
    }
  };
  for (Value p : g.params) label(p, nullptr);
  for (const Node& n : g.nodes) {
    for (Value r : n.results) label(r, &n.operands);
  }
  SizeFormula f;
  for (size_t v = 0; v < dims.size(); ++v) {
    if (dims[v].empty()) {  // a value no node of g makes: its dims are constants
      for (int64_t x : g.types[v].dims) dims[v].push_back({0, x});
    }
    f.sizes.insert(f.sizes.end(), dims[v].begin(), dims[v].end());
  }
  f.dims = f.sizes.size();
  for (const Node& n : g.nodes) {
    if (std::optional<int64_t> c = WholeConstant(g, n)) {
      Affine a{0, *c};
      for (size_t k = 0; k < varying.size() && !a.Sized(); ++k) {
        if (*c != 0 && *c % varying[k] == 0) a = times(k, *c / varying[k], 0);
      }
      f.sizes.push_back(a);
    }
  }
  const auto dims_end = f.sizes.begin() + static_cast<ptrdiff_t>(f.dims);
  const auto first = std::find(f.sizes.begin(), dims_end, Affine{1, 0});
  if (first == dims_end) return std::nullopt;
  f.symbol = static_cast<size_t>(first - f.sizes.begin());
  if (size2 > 0) {
    const auto second = std::find(f.sizes.begin(), dims_end, Affine{0, 0, 1});
    if (second == dims_end) return std::nullopt;
    f.symbol2 = static_cast<size_t>(second - f.sizes.begin());
  }
  return f;
}

std::optional<Point> SymbolOf(const SizeFormula& f, const std::vector<int64_t>& sizes) {
  if (sizes.size() != f.sizes.size()) return std::nullopt;
  const Point x{sizes[f.symbol], f.TwoSymbols() ? sizes[f.symbol2] : 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (f.sizes[i].At(x) != sizes[i]) return std::nullopt;
  }
  return x;
}

int64_t Capacity(const Affine& f, const Point& bound) {
  return f.Sized() ? f.a * bound.s + f.c * bound.t + std::min<int64_t>(f.b, 0) : f.b;
}

std::string SizeSource(const Graph& g, size_t i) {
  const std::vector<size_t> at = SizeOffsets(g);
  const auto v = static_cast<Value>(std::upper_bound(at.begin(), at.end(), i) - at.begin() - 1);
  if (static_cast<size_t>(v) >= g.types.size()) return "a constant";
  const std::string dim = "dim " + std::to_string(i - at[v]) + " of ";
  const int32_t made_by = Producers(g)[v];
  return dim + (made_by < 0 ? std::string("a parameter") : g.nodes[made_by].op + "'s result");
}

size_t DimCount(const Graph& g) {
  size_t n = 0;
  for (const Type& t : g.types) n += t.dims.size();
  return n;
}

Point BoundFor(const SizeFormula& f, const Point& x) {
  // A positive constant is room on s's bound (on t's when the size has no s).
  Point need = x;
  for (size_t i = 0; i < f.dims; ++i) {
    const Affine& a = f.sizes[i];
    if (a.b <= 0 || !a.Sized()) continue;
    if (a.a > 0) {
      need.s = std::max(need.s, x.s + (a.b + a.a - 1) / a.a);
    } else {
      need.t = std::max(need.t, x.t + (a.b + a.c - 1) / a.c);
    }
  }
  auto power = [](int64_t n) {
    int64_t bound = MinBound();
    while (bound < n) bound *= 2;
    return bound;
  };
  return {power(need.s), f.TwoSymbols() ? power(need.t) : 0};
}

bool CheapBound(const Graph& g, const SizeFormula& f, const Point& x, const Point& bound) {
  const std::vector<size_t> at = SizeOffsets(g);
  auto elements = [&](const Point& p) {
    double total = 0;
    for (size_t v = 0; v < g.types.size(); ++v) {
      double n = 1;
      for (size_t i = at[v]; i < at[v + 1]; ++i) n *= static_cast<double>(f.sizes[i].At(p));
      total += n;
    }
    return total;
  };
  return elements(bound) <= 4 * elements(x) + (1 << 20);
}

Point BoundFor(const Graph& g, const SizeFormula& f, const Point& s) {
  Point bound = BoundFor(f, s);
  while (bound.s < WideBound() && CheapBound(g, f, s, {2 * bound.s, bound.t})) bound.s *= 2;
  while (f.TwoSymbols() && bound.t < WideBound() && CheapBound(g, f, s, {bound.s, 2 * bound.t})) {
    bound.t *= 2;
  }
  return bound;
}

std::string WhyNotBounded(const Graph& g, const SizeFormula& f) {
  std::vector<size_t> at = SizeOffsets(g);
  for (const Node& n : g.nodes) {
    if (std::string why = TwoSizedDims(g, f, at, n); !why.empty()) return why;
    if (Refused().count(n.op) != 0) return n.op;
    // A scatter that adds its updates adds zeros for their padding (Bounded zeroes it); other
    // scatters would write it. (A dynamic_update_slice keeps its base where its update's
    // padding lands: Bounded.)
    if (n.op == "stablehlo.scatter" && Sized(f, at, n.operands.back()) && !AddsUpdates(n)) {
      return n.op + " of a sized update";
    }
  }
  return "";
}

std::vector<int64_t> CapacityDims(const Graph& g, const SizeFormula& f, Value v,
                                  const Point& bound) {
  return CapacityDims(g, f, std::vector<Value>{v}, bound)[0];
}

std::vector<std::vector<int64_t>> CapacityDims(const Graph& g, const SizeFormula& f,
                                               const std::vector<Value>& vs, const Point& bound) {
  const std::vector<size_t> at = SizeOffsets(g);
  std::vector<std::vector<int64_t>> out;
  for (Value v : vs) out.push_back(Capacities(f, at, v, bound));
  return out;
}

Graph Bounded(const Graph& g, const SizeFormula& f, const Point& bound) {
  std::vector<size_t> at = SizeOffsets(g);
  const std::vector<int32_t> producer = Producers(g);
  const std::vector<char> used = TakenByOtherThanReshapes(g);
  Graph b;
  std::vector<Value> map(g.types.size(), -1);
  std::vector<Value> params;
  for (Value p : g.params)
    params.push_back(b.Param(Type{g.type(p).dtype, Capacities(f, at, p, bound)}));
  const Value s = b.Param(Type{DType::kS32, {}});
  const Value t_param = f.TwoSymbols() ? b.Param(Type{DType::kS32, {}}) : -1;
  // a*s + c*t + b of the real s and t, in `type`.
  auto Computed = [&](const Affine& a, DType type) {
    Value v = Binary(b, "stablehlo.multiply", Convert(b, s, type),
                     Constant(b, static_cast<double>(a.a), type));
    if (a.c != 0) {
      v = Binary(b, "stablehlo.add", v,
                 Binary(b, "stablehlo.multiply", Convert(b, t_param, type),
                        Constant(b, static_cast<double>(a.c), type)));
    }
    return Binary(b, "stablehlo.add", v, Constant(b, static_cast<double>(a.b), type));
  };
  // The real size, clamped to the bound's size (XLA:CPU trusts it with memory).
  std::map<std::tuple<int64_t, int64_t, int64_t>, Value> real;
  auto Real = [&](const Affine& a) {
    auto [it, fresh] = real.emplace(std::make_tuple(a.a, a.b, a.c), -1);
    if (fresh) {
      it->second = Clamp(b, Constant(b, 0, DType::kS32), Computed(a, DType::kS32),
                         Constant(b, static_cast<double>(a.At(bound)), DType::kS32));
    }
    return it->second;
  };
  // Marks every sized dim of v (g's value `of`) with its real size.
  auto Mark = [&](Value v, Value of) {
    for (size_t i = at[of]; i < at[of + 1]; ++i) {
      if (!f.sizes[i].Sized()) continue;
      const int64_t d = static_cast<int64_t>(i - at[of]);
      v = b.Op1("stablehlo.set_dimension_size", {v, Real(f.sizes[i])}, b.type(v),
                "dimension = " + std::to_string(d) + " : i64");
    }
    return v;
  };
  // A reshape of v (g's value `src`) into g's value `dst` that moves padding: [8, s, 128] to
  // [8s, 128] puts row (i, j) at i*s + j, which depends on s. XLA's dynamic padder would repack
  // it; here the program computes where each row of the result comes from and gathers it from v
  // by its coordinates (all within v's real entries, so XLA reads them as they are). Rows past
  // the real ones take any row: they are padding.
  auto Repacked = [&](Value v, const std::vector<Affine>& from, const std::vector<Affine>& to) {
    // The trailing dims both sides share, none of them sized, are taken whole.
    size_t kf = from.size(), kt = to.size();
    while (kf > 0 && kt > 0 && !from[kf - 1].Sized() && from[kf - 1] == to[kt - 1]) --kf, --kt;
    Dims rows;
    for (size_t j = 0; j < kt; ++j) rows.push_back(to[j].At(bound));
    auto real = [&](const Affine& d) {
      const Value r = !d.Sized() ? Constant(b, static_cast<double>(d.b), DType::kS32) : Real(d);
      return BroadcastInDim(b, r, rows, {});
    };
    // Each row's index among the real rows, then its coordinates in v.
    Value logical = Constant(b, 0, DType::kS32, rows);
    for (size_t j = 0; j < kt; ++j) {
      logical = Binary(b, "stablehlo.multiply", logical, real(to[j]));
      logical = Binary(b, "stablehlo.add", logical,
                       Iota(b, Type{DType::kS32, rows}, static_cast<int64_t>(j)));
    }
    Dims one = rows, index_dims;
    one.push_back(1);
    std::vector<Value> coords(kf);
    for (size_t i = kf; i-- > 0;) {
      const Value r = real(from[i]);
      coords[i] = Reshape(b, Binary(b, "stablehlo.remainder", logical, r), one);
      logical = Binary(b, "stablehlo.divide", logical, r);
      index_dims.insert(index_dims.begin(), static_cast<int64_t>(i));
    }
    const Value where = Convert(b, Concat(b, coords, static_cast<int64_t>(kt)), DType::kS64);
    return Gather(b, v, where, index_dims, 0);
  };
  // v (g's value `of`) as an array XLA knows no real size of, each entry in its place: XLA's
  // dynamic padder cannot take a sized update (it fails to compile), so updates and what they
  // update are such copies, and the program masks their padding itself.
  auto Static = [&](Value v, Value of) {
    const std::vector<Affine> dims = DimFormulas(f, at, of);
    return std::any_of(dims.begin(), dims.end(), [](const Affine& d) { return d.Sized(); })
               ? Repacked(v, dims, dims)
               : v;
  };
  // Whether each entry of an array of `dims` lies in the window of `window` (formulas: real
  // sizes) at `starts` (0-d integer values of b; none: the origin), along every sized dim.
  auto Inside = [&](const Dims& dims, const std::vector<Affine>& window,
                    const std::vector<Value>& starts) {
    Value in = Constant(b, 1, DType::kPred, dims);
    for (size_t d = 0; d < window.size(); ++d) {
      if (!window[d].Sized()) continue;
      const Value pos = Iota(b, Type{DType::kS32, dims}, static_cast<int64_t>(d));
      Value lo = Constant(b, 0, DType::kS32);
      if (!starts.empty()) lo = Convert(b, starts[d], DType::kS32);
      const Value hi = Binary(b, "stablehlo.add", lo, Real(window[d]));
      in = Binary(b, "stablehlo.and", in,
                  Binary(b, "stablehlo.and", Compare(b, pos, BroadcastInDim(b, lo, dims, {}), "GE"),
                         Compare(b, pos, BroadcastInDim(b, hi, dims, {}), "LT")));
    }
    return in;
  };
  // v with zeros after its entries, `hi` along each dim (v itself when none).
  auto PadAfter = [&](Value v, const Dims& hi) {
    if (std::all_of(hi.begin(), hi.end(), [](int64_t h) { return h == 0; })) return v;
    return Pad(b, v, Constant(b, 0, b.type(v).dtype), Dims(hi.size(), 0), hi);
  };
  for (size_t k = 0; k < g.params.size(); ++k) {
    const Value p = g.params[k];
    Dims hi(g.type(p).rank(), 0);
    for (size_t i = at[p]; i < at[p + 1]; ++i) {
      const auto d = static_cast<size_t>(i - at[p]);
      hi[d] = f.sizes[i].At(bound) - b.type(params[k]).dims[d];
    }
    map[p] = Mark(PadAfter(params[k], hi), p);
  }
  size_t constant_site = at.back();  // whole constants follow the dims in Sizes(g)
  for (const Node& n : g.nodes) {
    if (WholeConstant(g, n)) {
      const Affine& c = f.sizes[constant_site++];
      if (c.Sized()) {  // a size the rule computed: its value at the real s (and t)
        map[n.results[0]] = Convert(b, Computed(c, DType::kS64), g.type(n.results[0]).dtype);
        continue;
      }
    }
    Node copy{n.op, {}, {}, n.attrs, n.regions};
    for (Value o : n.operands) copy.operands.push_back(map[o]);
    if (n.op == "stablehlo.dynamic_slice") {
      // XLA moves a start back so that start + size fits the operand: a window wider than its
      // real size near the end of a fixed operand (buf[1000:1024] at bound 32 of a 1024-long
      // buf) would read the wrong entries. Room after the operand keeps every start in place.
      const Value x = n.operands[0];
      const Value r = n.results[0];
      Dims hi(g.type(x).rank(), 0);
      for (size_t d = 0; d < hi.size(); ++d) {
        const Affine& want = f.sizes[at[r] + d];
        const Affine& have = f.sizes[at[x] + d];
        if (want.a > have.a || want.c > have.c) hi[d] = want.At(bound);
      }
      copy.operands[0] = PadAfter(copy.operands[0], hi);
    }
    if (n.op == "stablehlo.reshape") {
      if (!used[n.results[0]]) continue;  // the reshape that takes it reads its source
      const Value src = ReshapeSource(g, producer, n.operands[0]);
      if (!KeepsPadding(DimFormulas(f, at, src), DimFormulas(f, at, n.results[0]))) {
        map[n.results[0]] =
            Mark(Repacked(map[src], DimFormulas(f, at, src), DimFormulas(f, at, n.results[0])),
                 n.results[0]);
        continue;
      }
      copy.operands[0] = map[src];
    }
    if (n.op == "stablehlo.scatter" && Sized(f, at, n.operands[2])) {
      // Adds: the updates' padding is zeroed, so wherever it lands it adds nothing.
      for (size_t k = 0; k < 3; ++k) copy.operands[k] = Static(copy.operands[k], n.operands[k]);
      const Value u = copy.operands[2];
      const Dims& dims = b.type(u).dims;
      copy.operands[2] = Select(b, Inside(dims, DimFormulas(f, at, n.operands[2]), {}), u,
                                Constant(b, 0, b.type(u).dtype, dims));
    }
    // A dynamic_update_slice of a sized update keeps its base where the update's padding lands.
    // Its base gets room after it for a whole padded update, so that XLA, which moves a start
    // back until the update fits, moves none of the real ones.
    Value keep = -1;
    if (n.op == "stablehlo.dynamic_update_slice" && Sized(f, at, n.operands[1])) {
      for (size_t k = 0; k < 2; ++k) copy.operands[k] = Static(copy.operands[k], n.operands[k]);
      const Dims update = b.type(copy.operands[1]).dims;
      Dims room(update.size(), 0);
      for (size_t d = 0; d < room.size(); ++d) {
        if (f.sizes[at[n.operands[1]] + d].Sized()) room[d] = update[d];
      }
      keep = PadAfter(copy.operands[0], room);
      copy.operands[0] = keep;
    }
    for (Value r : n.results) {
      Type t = g.type(r);
      for (size_t i = at[r]; i < at[r + 1]; ++i) t.dims[i - at[r]] = f.sizes[i].At(bound);
      if (keep >= 0) t.dims = b.type(keep).dims;
      b.types.push_back(std::move(t));
      copy.results.push_back(static_cast<Value>(b.types.size() - 1));
    }
    if (n.op == "stablehlo.dynamic_slice")
      copy.attrs = "slice_sizes = " + I64Array(b.types.back().dims);
    const std::vector<Value> starts(
        copy.operands.begin() + std::min<size_t>(2, copy.operands.size()), copy.operands.end());
    b.nodes.push_back(std::move(copy));
    std::vector<Value> results = b.nodes.back().results;
    if (keep >= 0) {
      const Dims dims = b.type(keep).dims;
      const Value kept =
          Select(b, Inside(dims, DimFormulas(f, at, n.operands[1]), starts), results[0], keep);
      const Dims& base = b.type(map[n.operands[0]]).dims;
      results[0] = Slice(b, kept, Dims(base.size(), 0), base);
    }
    for (size_t k = 0; k < n.results.size(); ++k)
      map[n.results[k]] = Mark(results[k], n.results[k]);
  }
  for (Value r : g.results) {
    Value v = map[r];
    Dims cap = Capacities(f, at, r, bound);
    if (cap != b.type(v).dims) v = Slice(b, v, Dims(cap.size(), 0), cap);
    b.results.push_back(v);
  }
  return b;
}

}  // namespace tpu::ir
