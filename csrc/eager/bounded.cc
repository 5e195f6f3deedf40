#include "eager/bounded.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "eager/executor.h"
#include "ir/size_family.h"

namespace tpu::eager {

namespace {

std::atomic<bool>& Enabled() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("TORCHTPU_BOUNDED");
    return e != nullptr && std::string(e) == "1";
  }()};
  return on;
}

struct Family {
  std::vector<int64_t> first;  // the sizes of its first member
  std::optional<ir::SizeFormula> formula;
  ir::Hash128 formula_hash;
  bool refused = false;  // its members run exact programs
};

struct Families {
  std::mutex mu;
  std::unordered_map<ir::Hash128, Family, ir::Hash128Hasher> map;
};
Families& AllFamilies() {
  static auto* f = new Families();
  return *f;
}

ir::Hash128 HashFormula(const ir::Hash128& shape, const ir::SizeFormula& f) {
  uint64_t a = shape.lo ^ 0x6a09e667f3bcc909ULL, b = shape.hi ^ 0xbb67ae8584caa73bULL;
  auto mix = [&](uint64_t x) {
    a = (a ^ x) * 0x100000001b3ULL;
    b = ((b ^ x) + 0x7f4a7c159e3779b9ULL) * 0xff51afd7ed558ccdULL;
  };
  mix(f.symbol);
  for (const ir::Affine& s : f.sizes) {
    mix(static_cast<uint64_t>(s.a));
    mix(static_cast<uint64_t>(s.b));
  }
  return {a, b};
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

}  // namespace

void SetBounded(bool on) {
  Enabled().store(on, std::memory_order_relaxed);
  Families& all = AllFamilies();
  std::lock_guard<std::mutex> lock(all.mu);
  all.map.clear();  // switched, it starts over: no program belongs to a family yet
}
bool BoundedOn() { return Enabled().load(std::memory_order_relaxed); }

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

rt::BufferPtr Unpadded(const Lazy& v, rt::BufferPtr buf) {
  if (!buf || buf->dims() == v.type.dims) return buf;
  return Repadded(*buf, v.type.dims, v.type.dims, buf->device());
}

std::optional<std::vector<rt::BufferPtr>> RunBounded(const ir::Hash128& key,
                                                     const std::function<ir::Graph()>& logical,
                                                     const std::vector<rt::BufferPtr>& params,
                                                     int device, int64_t ops) {
  if (!BoundedOn() || IsLoaded(key)) return std::nullopt;
  const ir::Graph g = logical();
  const ir::Hash128 shape = ir::ShapelessHash(g);
  std::vector<int64_t> sizes = ir::Sizes(g);
  ir::SizeFormula formula;
  ir::Hash128 formula_hash;
  {
    Families& all = AllFamilies();
    std::lock_guard<std::mutex> lock(all.mu);
    Family& fam = all.map[shape];
    if (fam.refused) return std::nullopt;
    if (fam.first.empty()) {
      fam.first = std::move(sizes);
      return std::nullopt;
    }
    if (!fam.formula) {
      if (sizes == fam.first) return std::nullopt;
      fam.formula = ir::FitSizes(fam.first, sizes);
      if (fam.formula) fam.formula->dims = ir::DimCount(g);
      fam.refused = !fam.formula || !ir::WhyNotBounded(g, *fam.formula).empty();
      if (fam.refused) return std::nullopt;
      fam.formula_hash = HashFormula(shape, *fam.formula);
    }
    formula = *fam.formula;
    formula_hash = fam.formula_hash;
  }
  const std::optional<int64_t> s = ir::SymbolOf(formula, sizes);
  if (!s) return std::nullopt;
  const int64_t bound = ir::BoundFor(formula, *s);
  try {
    rt::ExecutablePtr exe =
        Executable({formula_hash.lo ^ static_cast<uint64_t>(bound), formula_hash.hi},
                   [&] { return ir::Bounded(g, formula, bound); });
    std::vector<rt::BufferPtr> args;
    for (size_t k = 0; k < params.size(); ++k) {
      const ir::Value p = g.params[k];
      std::vector<int64_t> cap = ir::CapacityDims(g, formula, p, bound);
      args.push_back(params[k]->dims() == cap ? params[k]
                                              : Repadded(*params[k], g.type(p).dims, cap, device));
    }
    const int32_t s32 = static_cast<int32_t>(*s);
    args.push_back(ScalarBuffer(&s32, rt::DType::kS32, device)->buf);
    GetMetrics().bounded_runs++;
    return Execute(*exe, args, device, ops);
  } catch (const rt::Error&) {
    // XLA could not bound the family (an op without a padding rule): exact programs from now.
    Families& all = AllFamilies();
    std::lock_guard<std::mutex> lock(all.mu);
    all.map[shape].refused = true;
    return std::nullopt;
  }
}

}  // namespace tpu::eager
