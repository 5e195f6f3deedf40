#include "eager/bounded.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "eager/executor.h"
#include "ir/size_family.h"
#include "runtime/env.h"

namespace tpu::eager {

namespace {

std::atomic<bool>& Enabled() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("TORCHTPU_BOUNDED");
    return e == nullptr || std::string(e) != "0";
  }()};
  return on;
}

struct Family {
  std::vector<int64_t> first;  // the sizes of its first member
  // Those of the member whose sizes, with the first's, gave the formula of one symbol (or that
  // one symbol could not explain): a third that the formula does not fit gives two symbols.
  std::vector<int64_t> second;
  int refits = 0;  // formulas in two symbols fitted so far (a few at most)
  std::optional<ir::SizeFormula> formula;
  ir::Hash128 formula_hash;
  bool refused = false;  // its members run exact programs
  std::string why;       // of the refusal, for TORCHTPU_FUSED_DEBUG
  // The formula came from this size hint (its id; and guessed_t's for t) and one member; -1
  // once a second size fits it or the first two give it; kOrphan once a hint died unconfirmed.
  int64_t guessed = -1, guessed_t = -1;
  ir::Point least_bound;       // hints' max, while their guess or what confirms it holds
  std::set<ir::Point> bounds;  // those its formula was compiled for
};

constexpr int64_t kOrphan = -2;
constexpr int kMaxRefits = 4;

struct SizeHint {
  int64_t size, max;
};

// How a part with a given exact key runs bounded: found again without building its graph.
struct Member {
  ir::Hash128 family;
  rt::ExecutablePtr exe;
  int32_t s = 0, t = 0;
  bool two = false;                                  // the program takes t after s
  std::vector<std::vector<int64_t>> real, capacity;  // per parameter
  Donations donations;  // those of the exact program that the bounded one keeps
};

struct Families {
  std::mutex mu;
  std::unordered_map<ir::Hash128, Family, ir::Hash128Hasher> map;
  std::unordered_map<ir::Hash128, Member, ir::Hash128Hasher> members;  // by exact key
  // Exact keys this table sent to their exact programs: found again without building a graph.
  std::unordered_set<ir::Hash128, ir::Hash128Hasher> exact;
  std::unordered_map<int64_t, SizeHint> hints;  // by id
  int64_t next_hint = 0;
};
Families& AllFamilies() {
  static auto* f = new Families();
  return *f;
}

ir::Hash128 HashFormula(const ir::Hash128& shape, const ir::SizeFormula& f) {
  ir::Mixer128 m;
  m.Mix(shape.lo);
  m.Mix(shape.hi);
  m.Mix(f.symbol);
  m.Mix(f.symbol2);
  for (const ir::Affine& s : f.sizes) {
    m.Mix(static_cast<uint64_t>(s.a));
    m.Mix(static_cast<uint64_t>(s.b));
    m.Mix(static_cast<uint64_t>(s.c));
  }
  return m.Get();
}

// Copies the leading corner `real` of a row-major array of dims `from` into one of dims `to`.
void CopyCorner(const char* src, const std::vector<int64_t>& from, char* dst,
                const std::vector<int64_t>& to, const std::vector<int64_t>& real, size_t item,
                size_t dim) {
  if (real.empty()) {
    std::memcpy(dst, src, item);
    return;
  }
  int64_t src_row = 1, dst_row = 1;
  for (size_t d = dim + 1; d < real.size(); ++d) {
    src_row *= from[d];
    dst_row *= to[d];
  }
  if (dim + 1 == real.size()) {
    std::memcpy(dst, src, static_cast<size_t>(real[dim]) * item);
    return;
  }
  for (int64_t i = 0; i < real[dim]; ++i) {
    CopyCorner(src + static_cast<size_t>(i * src_row) * item, from,
               dst + static_cast<size_t>(i * dst_row) * item, to, real, item, dim + 1);
  }
}

const size_t kMaxMembers = rt::EnvCount("TORCHTPU_BOUNDED_MEMBERS", 4096);

// TORCHTPU_FUSED_DEBUG=1: what a program built on a key miss does, `what`.
void Says(const ir::Graph& g, const std::string& what) {
  static const bool on = std::getenv("TORCHTPU_FUSED_DEBUG") != nullptr;
  if (on)
    std::fprintf(stderr, "torchtpu: a program of %zu StableHLO ops %s\n", g.nodes.size(),
                 what.c_str());
}

// Why a program of a family seen at another size runs exact, which compiles it once per size.
void SaysExact(const ir::Graph& g, const std::string& why) {
  Says(g, "runs exact at a new size: " + why);
}

// For SaysExact: the first size the formula does not give (a size that is no sum of multiples
// of the symbols: a flattened [s, t] is s*t).
std::string Misfit(const ir::Graph& g, const ir::SizeFormula& f,
                   const std::vector<int64_t>& sizes) {
  if (sizes.size() != f.sizes.size()) return " (another number of sizes)";
  const ir::Point x{sizes[f.symbol], f.TwoSymbols() ? sizes[f.symbol2] : 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (f.sizes[i].At(x) == sizes[i]) continue;
    return " (" + std::to_string(sizes[i]) + " where it gives " + std::to_string(f.sizes[i].At(x)) +
           ": " + ir::SizeSource(g, i) + ")";
  }
  return "";
}

std::vector<rt::BufferPtr> RunMember(const Member& m, const std::vector<rt::BufferPtr>& params,
                                     int device, int64_t ops) {
  std::vector<rt::BufferPtr> args;
  for (size_t k = 0; k < params.size(); ++k) {
    args.push_back(params[k]->dims() == m.capacity[k]
                       ? params[k]
                       : Repadded(*params[k], m.real[k], m.capacity[k], device));
  }
  args.push_back(ScalarBuffer(&m.s, rt::DType::kS32, device)->buf);
  if (m.two) args.push_back(ScalarBuffer(&m.t, rt::DType::kS32, device)->buf);
  GetMetrics().bounded_runs++;
  return Execute(*m.exe, args, device, ops);
}

}  // namespace

void SetBounded(bool on) {
  Enabled().store(on, std::memory_order_relaxed);
  Families& all = AllFamilies();
  std::lock_guard<std::mutex> lock(all.mu);
  all.map.clear();  // switched, it starts over: no program belongs to a family yet
  all.members.clear();
  all.exact.clear();
}
bool BoundedOn() { return Enabled().load(std::memory_order_relaxed); }

int64_t AddSizeHint(int64_t size, int64_t max) {
  if (size < 2) return -1;  // 0 and 1 say nothing about which dims vary
  Families& all = AllFamilies();
  std::lock_guard<std::mutex> lock(all.mu);
  all.hints.emplace(all.next_hint, SizeHint{size, max});
  return all.next_hint++;
}

void DropSizeHint(int64_t id) {
  Families& all = AllFamilies();
  std::lock_guard<std::mutex> lock(all.mu);
  if (all.hints.erase(id) == 0) return;
  // Its guesses that no second size confirmed keep their formula for the next size, but their
  // one size runs exact from now on: a size that never varies (a weight's dim equal to the
  // hint) would otherwise run padded programs for good.
  std::unordered_set<ir::Hash128, ir::Hash128Hasher> orphans;
  for (auto& [shape, fam] : all.map) {
    if (fam.guessed < 0 || (fam.guessed != id && fam.guessed_t != id)) continue;
    fam.guessed = kOrphan;
    orphans.insert(shape);
  }
  if (orphans.empty()) return;
  std::erase_if(all.members, [&](const auto& m) { return orphans.count(m.second.family) != 0; });
}

std::vector<int64_t> SizeHints() {
  Families& all = AllFamilies();
  std::lock_guard<std::mutex> lock(all.mu);
  std::vector<int64_t> sizes;
  for (const auto& [id, hint] : all.hints) sizes.push_back(hint.size);
  return sizes;
}

rt::BufferPtr Repadded(const rt::Buffer& buf, const std::vector<int64_t>& real,
                       const std::vector<int64_t>& to, int device) {
  const size_t item = static_cast<size_t>(rt::ItemSize(buf.dtype()));
  std::vector<char> src(static_cast<size_t>(buf.nbytes()));
  buf.ToHost(src.data(), src.size());
  int64_t n = 1;
  for (int64_t d : to) n *= d;
  std::vector<char> dst(static_cast<size_t>(n) * item, 0);
  bool empty = false;
  for (int64_t d : real) empty |= d == 0;
  if (!empty) CopyCorner(src.data(), buf.dims(), dst.data(), to, real, item, 0);
  return Client().FromHost(dst.data(), buf.dtype(), to, device);
}

rt::BufferPtr Unpadded(rt::BufferPtr buf, const std::vector<int64_t>& dims) {
  if (!buf || buf->dims() == dims) return buf;
  return Repadded(*buf, dims, dims, buf->device());
}

std::optional<std::vector<rt::BufferPtr>> RunBounded(
    const ir::Hash128& key, const std::function<const ir::Graph&()>& logical,
    const std::vector<rt::BufferPtr>& params, Donations* donations, int device, int64_t ops) {
  if (!BoundedOn()) return std::nullopt;
  Families& all = AllFamilies();
  Member member;
  {
    std::lock_guard<std::mutex> lock(all.mu);
    if (all.exact.count(key) != 0) return std::nullopt;
    auto it = all.members.find(key);
    if (it != all.members.end()) member = it->second;
  }
  if (member.exe) {
    *donations = member.donations;
    return RunMember(member, params, device, ops);
  }
  // From here on, a part that runs exact says so once (the lock is held or taken again).
  auto exact = [&]() -> std::optional<std::vector<rt::BufferPtr>> {
    if (all.exact.size() >= kMaxMembers) all.exact.clear();
    all.exact.insert(key);
    return std::nullopt;
  };
  const ir::Graph& g = logical();
  const ir::Hash128 shape = ir::ShapelessHash(g);
  std::vector<int64_t> sizes = ir::Sizes(g);
  ir::SizeFormula formula;
  ir::Hash128 formula_hash;
  std::optional<ir::Point> s;
  ir::Point least_bound;
  {
    std::lock_guard<std::mutex> lock(all.mu);
    Family& fam = all.map[shape];
    if (fam.refused) {
      if (sizes != fam.first) SaysExact(g, fam.why);
      return exact();
    }
    // A formula from the first two sizes seen, or from the first and a hint; a hint's guess
    // that the next size does not fit gives way to the first two.
    auto fit = [&](std::optional<ir::SizeFormula> f) {
      if (!f) {
        fam.why = "its sizes change in a way a*s + c*t + b does not explain";
        return false;
      }
      f->dims = ir::DimCount(g);
      fam.why = ir::WhyNotBounded(g, *f);
      if (!fam.why.empty()) return false;
      fam.formula = std::move(f);
      fam.formula_hash = HashFormula(shape, *fam.formula);
      fam.bounds.clear();
      return true;
    };
    if (fam.first.empty()) {
      fam.first = sizes;
      // Two marks of different sizes first (an encoder's and a decoder's lengths), then one.
      for (const auto& [id, hint] : all.hints) {
        for (const auto& [id2, hint2] : all.hints) {
          if (fam.formula || id2 <= id || hint2.size == hint.size) continue;
          if (fit(ir::GuessSizes(g, hint.size, hint2.size))) {
            fam.guessed = id;
            fam.guessed_t = id2;
            fam.least_bound = {hint.max, hint2.max};
          }
        }
      }
      for (const auto& [id, hint] : all.hints) {
        if (!fam.formula && fit(ir::GuessSizes(g, hint.size))) {
          fam.guessed = id;
          fam.least_bound = {hint.max, 0};
        }
      }
      if (!fam.formula) {
        Says(g, "runs exact: the first of its family (one size says nothing of its sizes)");
        return exact();
      }
    } else if (!fam.formula || (fam.guessed != -1 && !ir::SymbolOf(*fam.formula, sizes))) {
      if (sizes == fam.first || sizes == fam.second) return exact();
      if (fam.guessed != -1)
        Says(g, "sizes: a mark's guess does not fit" + Misfit(g, *fam.formula, sizes));
      fam.guessed = -1;
      fam.least_bound = {};
      std::optional<ir::SizeFormula> one = ir::FitSizes(fam.first, sizes, ir::DimCount(g));
      if (!one && fam.second.empty()) {
        // Two sizes that vary apart, maybe: a third member tells.
        fam.second = sizes;
        SaysExact(g, "its sizes change in a way one symbol s (a*s + b) does not explain");
        return exact();
      }
      if (!one) {
        ++fam.refits;
        one = ir::FitSizes(fam.first, fam.second, sizes, ir::DimCount(g));
      } else {
        fam.second = sizes;
      }
      fam.refused = !fit(std::move(one));
      if (fam.refused) {
        SaysExact(g, fam.why);
        return exact();
      }
    }
    s = ir::SymbolOf(*fam.formula, sizes);
    std::string refit;  // why two symbols did not explain it either
    if (!s && !fam.second.empty() && sizes != fam.second && fam.refits < kMaxRefits) {
      // A formula of one symbol (or two) that this member does not fit: two symbols through
      // the first two members and this one, in place of it when they explain it.
      ++fam.refits;
      size_t misfit = ir::kNoSymbol;
      if (fit(ir::FitSizes(fam.first, fam.second, sizes, ir::DimCount(g), &misfit))) {
        s = ir::SymbolOf(*fam.formula, sizes);
      } else if (misfit != ir::kNoSymbol) {
        refit = "; nor a*s + c*t + b: " + std::to_string(fam.first[misfit]) + ", " +
                std::to_string(fam.second[misfit]) + ", " + std::to_string(sizes[misfit]) + " at " +
                ir::SizeSource(g, misfit);
      } else {
        refit = "; in two symbols: " + fam.why;
      }
    }
    if (!s) {
      SaysExact(
          g, "its sizes do not fit the family's formula" + Misfit(g, *fam.formula, sizes) + refit);
      return exact();
    }
    if (sizes != fam.first) {
      fam.guessed = -1;  // a second size fits: the guess holds
    } else if (fam.guessed == kOrphan) {
      return exact();
    }
    formula = *fam.formula;
    formula_hash = fam.formula_hash;
    least_bound = fam.least_bound;
  }
  ir::Point bound = ir::BoundFor(g, formula, *s);
  bound = {std::max(bound.s, least_bound.s),
           formula.TwoSymbols() ? std::max(bound.t, least_bound.t) : 0};
  {
    // A program already compiled for twice the bound serves it: compiling one more program
    // costs far more than padding to twice the size (lengths 17, 45, 128, 18, ... compile for
    // 64 and 128, not also for 32).
    std::lock_guard<std::mutex> lock(all.mu);
    Family& fam = all.map[shape];
    if (fam.formula_hash == formula_hash) {
      // A size past every bound compiled so far is a loop that grows: a bound twice the
      // smallest that holds it, while that costs little, makes the next one a while off.
      ir::Point top;
      for (const ir::Point& p : fam.bounds) top = {std::max(top.s, p.s), std::max(top.t, p.t)};
      if (!fam.bounds.empty() && bound.s > top.s &&
          ir::CheapBound(g, formula, *s, {2 * bound.s, bound.t})) {
        bound.s *= 2;
      }
      if (!fam.bounds.empty() && formula.TwoSymbols() && bound.t > top.t &&
          ir::CheapBound(g, formula, *s, {bound.s, 2 * bound.t})) {
        bound.t *= 2;
      }
      for (const ir::Point& wider : fam.bounds) {
        if (bound.s <= wider.s && wider.s <= 2 * bound.s && bound.t <= wider.t &&
            wider.t <= 2 * bound.t) {
          bound = wider;
          break;
        }
      }
      if (fam.bounds.insert(bound).second) {
        Says(g, "runs bounded at a new bound: s = " + std::to_string(s->s) +
                    ", t = " + std::to_string(s->t) + " in (" + std::to_string(bound.s) + ", " +
                    std::to_string(bound.t) + ")");
      }
    }
  }
  try {
    member.family = shape;
    member.s = static_cast<int32_t>(s->s);
    member.t = static_cast<int32_t>(s->t);
    member.two = formula.TwoSymbols();
    for (ir::Value p : g.params) member.real.push_back(g.type(p).dims);
    member.capacity = ir::CapacityDims(g, formula, g.params, bound);
    // A donation stays when the parameter and the result have one capacity.
    const auto out = ir::CapacityDims(g, formula, g.results, bound);
    ir::Mixer128 exe_key;
    exe_key.Mix(formula_hash.lo);
    exe_key.Mix(formula_hash.hi);
    exe_key.Mix(static_cast<uint64_t>(bound.s));
    exe_key.Mix(static_cast<uint64_t>(bound.t));
    for (const auto& [p, r] : *donations) {
      if (member.capacity[p] != out[r] || g.type(g.params[p]).dtype != g.type(g.results[r]).dtype) {
        continue;
      }
      member.donations.emplace_back(p, r);
      exe_key.Mix(static_cast<uint64_t>(p) << 32 | static_cast<uint64_t>(r));
    }
    member.exe = Executable(exe_key.Get(), [&] {
      ir::Graph b = ir::Bounded(g, formula, bound);
      b.donations = member.donations;
      return b;
    });
    *donations = member.donations;
    {
      std::lock_guard<std::mutex> lock(all.mu);
      if (all.members.size() >= kMaxMembers) all.members.clear();
      all.members.emplace(key, member);
    }
    return RunMember(member, params, device, ops);
  } catch (const rt::Error&) {
    // XLA could not compile or run the family's program (an op without a padding rule): exact
    // programs from now. A hint's guess gives way to the first two sizes seen instead.
    std::lock_guard<std::mutex> lock(all.mu);
    Family& fam = all.map[shape];
    if (!fam.formula || fam.formula_hash != formula_hash) return exact();  // refit meanwhile
    fam.why = "XLA could not compile its bounded program";
    SaysExact(g, fam.why);
    fam.refused = fam.guessed == -1;
    fam.guessed = -1;
    fam.formula.reset();
    return exact();
  }
}

}  // namespace tpu::eager
