// Resampling ops: upsample (nearest, linear, cubic), adaptive max pooling, max unpooling, grid
// sampling, im2col/col2im. Static index/weight tables are computed on the host exactly as ATen's
// CPU kernels compute them (ATen/native/UpSample.h), then applied as a gather (nearest) or as a
// matmul by an (out x in) interpolation matrix per axis, whose transpose is the backward.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

Value And(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.and", a, b); }
Value Sel(Ctx& c, Value p, Value a, Value b) { return ir::Select(c.g, p, a, b); }
Value Cmp(Ctx& c, Value a, Value b, const char* dir) { return ir::Compare(c.g, a, b, dir); }
Value Bc(Ctx& c, Value x, const Dims& dims, const Dims& map) {
  return ir::BroadcastInDim(c.g, x, dims, map);
}
Value Zeros(Ctx& c, const Type& t) { return Splat(c, 0, t); }

int64_t Numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}
Dims Tail(const Dims& d, int64_t n) { return Dims(d.end() - n, d.end()); }
Dims Head(const Dims& d, int64_t n) { return Dims(d.begin(), d.begin() + n); }
Dims Cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Dims Range(int64_t lo, int64_t hi) {
  Dims r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

// Half types are computed in f32, like PyTorch's opmath.
DType AccOf(DType t) { return t == DType::kF64 ? DType::kF64 : DType::kF32; }

// ---------------------------------------------------------------------------------------------
// Upsampling

enum class Interp { kNearest, kNearestExact, kLinear, kCubic, kLinearAa, kCubicAa };

// A 1-D resampling: output o reads input idx[k][o] with weight w[k][o], summed over taps k.
struct Taps {
  std::vector<Dims> idx;
  std::vector<std::vector<double>> w;
};

// nearest_idx / nearest_exact_idx; `scale` is the op's scales_* argument (<= 0 when absent).
Taps NearestTaps(bool exact, int64_t in, int64_t out, double scale) {
  float s = scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / out;
  Taps t{{Dims(out)}, {std::vector<double>(out, 1.0)}};
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) {
      i = static_cast<int64_t>(std::floor(static_cast<float>((o + 0.5) * s)));
    } else if (out == in) {
      i = o;
    } else if (out == 2 * in) {
      i = o >> 1;
    } else {
      i = static_cast<int64_t>(std::floor(o * s));
    }
    t.idx[0][o] = std::min(i, in - 1);
  }
  return t;
}

template <typename T>
T CubicNear(T x, T a) {  // |x| <= 1
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
template <typename T>
T CubicFar(T x, T a) {  // 1 < |x| < 2
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

// compute_source_index_and_lambda (linear) and the cubic variant, in the opmath type T.
// x rounded to `bits` mantissa bits (nearest even), as storing it in bf16 (7) or f16 (10) does;
// bits = 0 leaves x as is.
template <typename T>
T RoundMantissa(T x, int bits) {
  if (bits == 0 || x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(x, bits + 1 - e)), e - bits - 1);
}

// ATen keeps the weights in the input dtype: `bits` rounds them for half types.
template <typename T>
Taps InterpTaps(bool cubic, int64_t in, int64_t out, bool align, double scale, int bits) {
  T s;
  if (align) {
    s = out > 1 ? static_cast<T>(in - 1) / (out - 1) : static_cast<T>(0);
  } else {
    s = scale > 0 ? static_cast<T>(1.0 / scale) : static_cast<T>(in) / out;
  }
  size_t k = cubic ? 4 : 2;
  Taps t{std::vector<Dims>(k, Dims(out)),
         std::vector<std::vector<double>>(k, std::vector<double>(out))};
  for (int64_t o = 0; o < out; ++o) {
    if (!cubic && in == out) {
      t.idx[0][o] = t.idx[1][o] = o;
      t.w[0][o] = 1;
      t.w[1][o] = 0;
      continue;
    }
    T real = align ? s * o : s * (o + static_cast<T>(0.5)) - static_cast<T>(0.5);
    if (!cubic && real < 0) real = 0;
    // guard_index_and_lambda floors in float even for double inputs.
    int64_t i0 = std::min(static_cast<int64_t>(std::floor(static_cast<float>(real))), in - 1);
    T lambda = std::min(std::max(real - i0, static_cast<T>(0)), static_cast<T>(1));
    if (!cubic) {
      t.idx[0][o] = i0;
      t.idx[1][o] = i0 + (i0 < in - 1 ? 1 : 0);
      T l1 = RoundMantissa(lambda, bits);
      t.w[0][o] = RoundMantissa(static_cast<T>(1) - l1, bits);
      t.w[1][o] = l1;
      continue;
    }
    T a = -0.75, x2 = 1 - lambda;
    T co[4] = {CubicFar<T>(lambda + 1, a), CubicNear<T>(lambda, a), CubicNear<T>(x2, a),
               CubicFar<T>(x2 + 1, a)};
    for (int64_t j = 0; j < 4; ++j) {
      t.idx[j][o] = std::clamp<int64_t>(i0 - 1 + j, 0, in - 1);
      t.w[j][o] = RoundMantissa(co[j], bits);
    }
  }
  return t;
}

// Antialiased taps (_compute_indices_min_size_weights_aa): a triangle (linear) or Keys a = -0.5
// (cubic) filter stretched by the scale when downsampling, normalized per output. The mixed
// float/double arithmetic mirrors ATen's.
template <typename T>
Taps AaTaps(bool cubic, int64_t in, int64_t out, bool align, double scale) {
  T s;
  if (align) {
    s = out > 1 ? static_cast<T>(in - 1) / (out - 1) : static_cast<T>(0);
  } else {
    s = scale > 0 ? static_cast<T>(1.0 / scale) : static_cast<T>(in) / out;
  }
  double half = cubic ? 2.0 : 1.0;
  T support = s >= 1.0 ? half * s : half;
  int64_t max_k = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  auto filter = [&](T x) -> T {
    x = std::abs(x);
    if (!cubic) return x < 1 ? 1 - x : 0;
    return x < 1 ? CubicNear<T>(x, -0.5) : x < 2 ? CubicFar<T>(x, -0.5) : 0;
  };
  Taps t{std::vector<Dims>(max_k, Dims(out)),
         std::vector<std::vector<double>>(max_k, std::vector<double>(out))};
  for (int64_t o = 0; o < out; ++o) {
    T center = s * (o + 0.5);
    T inv = s >= 1.0 ? 1.0 / s : 1.0;
    int64_t lo = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t size = std::min(static_cast<int64_t>(center + support + 0.5), in) - lo;
    size = std::clamp(size, int64_t{0}, max_k);
    T total = 0;
    for (int64_t j = 0; j < size; ++j) {
      T w = filter((j + lo - center + 0.5) * inv);
      t.w[j][o] = w;
      total += w;
    }
    for (int64_t j = 0; j < max_k; ++j) {
      t.idx[j][o] = std::min(lo + j, in - 1);
      if (j < size && total != 0) t.w[j][o] = static_cast<T>(t.w[j][o]) / total;
    }
  }
  return t;
}

const std::vector<std::string>& ScaleNames(size_t n) {
  static const std::vector<std::string> k1{"scales"}, k2{"scales_h", "scales_w"},
      k3{"scales_d", "scales_h", "scales_w"};
  return n == 1 ? k1 : n == 2 ? k2 : k3;
}

Taps TapsFor(Ctx& c, Interp m, int64_t in, int64_t out, const std::string& scale_arg, DType acc,
             DType rounded = DType::kInvalid) {
  int bits = rounded == DType::kBF16 ? 7 : rounded == DType::kF16 ? 10 : 0;
  double s = c.Has(scale_arg) ? c.Double(scale_arg, 0) : 0;
  bool align = c.Bool("align_corners", false);
  bool cubic = m == Interp::kCubic;
  switch (m) {
    case Interp::kNearest:
    case Interp::kNearestExact:
      return NearestTaps(m == Interp::kNearestExact, in, out, s);
    case Interp::kLinearAa:
    case Interp::kCubicAa: {
      bool aa_cubic = m == Interp::kCubicAa;
      return acc == DType::kF64 ? AaTaps<double>(aa_cubic, in, out, align, s)
                                : AaTaps<float>(aa_cubic, in, out, align, s);
    }
    default:
      return acc == DType::kF64 ? InterpTaps<double>(cubic, in, out, align, s, bits)
                                : InterpTaps<float>(cubic, in, out, align, s, bits);
  }
}

// The (out x in) matrix of a 1-D resampling, built from iota compares (repeated indices add).
Value WeightMatrix(Ctx& c, const Taps& t, int64_t in, DType acc) {
  Dims d{static_cast<int64_t>(t.idx[0].size()), in};
  Value col = ir::Iota(c.g, Type{DType::kS64, d}, 1);
  Value zero = Zeros(c, Type{acc, d}), w = zero;
  for (size_t k = 0; k < t.idx.size(); ++k) {
    Value hit = Cmp(c, col, Bc(c, ir::ConstantI64(c.g, t.idx[k]), d, {0}), "EQ");
    w = Add(c, w, Sel(c, hit, Bc(c, ir::ConstantVector(c.g, t.w[k], acc), d, {0}), zero));
  }
  return w;
}

// Multiplies axis `axis` of x by w (out x in), or by w's transpose for a backward.
Value ApplyAxis(Ctx& c, Value x, Value w, int64_t axis, bool transpose) {
  const Type& t = c.T(x);
  int64_t r = t.rank(), wdim = transpose ? 0 : 1;
  Dims od;
  for (int64_t i = 0; i < r; ++i) {
    if (i != axis) od.push_back(t.dims[i]);
  }
  od.push_back(c.T(w).dims[1 - wdim]);
  Value y = ir::DotGeneralHighest(c.g, x, w, {}, {}, {axis}, {wdim}, Type{t.dtype, od});
  Dims perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i < axis ? i : i == axis ? r - 1 : i - 1);
  return ir::Transpose(c.g, y, perm);
}

// x with axis `axis` replaced by x[..., idx, ...] (idx shaped `shape`).
Value GatherAxis(Ctx& c, Value x, const Dims& idx, Dims shape, int64_t axis) {
  shape.push_back(1);
  return ir::Gather(c.g, x, ir::Reshape(c.g, ir::ConstantI64(c.g, idx), shape), {axis}, axis);
}

bool IsIdentity(const Dims& idx) {
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

V Upsample(Ctx& c, Interp m) {
  Value x = c.In("self");
  Dims xd = c.T(x).dims, out = c.Ints("output_size");
  int64_t n = out.size(), r = xd.size();
  bool nearest = m == Interp::kNearest || m == Interp::kNearestExact;
  DType acc = AccOf(c.out[0].dtype);
  if (!nearest) x = Cast(c, x, acc);
  // Last axis first: bilinear then sums like PyTorch's h0l * (w0l * x00 + w1l * x01) + ...
  for (int64_t a = n - 1; a >= 0; --a) {
    int64_t axis = r - n + a, in = xd[axis];
    // ATen's bilinear2d kernel keeps float weights for half types; the others round them.
    DType rounded = m == Interp::kLinear && n == 2 ? acc : c.out[0].dtype;
    Taps t = TapsFor(c, m, in, out[a], ScaleNames(n)[a], acc, rounded);
    if (!nearest) {
      x = ApplyAxis(c, x, WeightMatrix(c, t, in, acc), axis, false);
    } else if (!(in == out[a] && IsIdentity(t.idx[0]))) {
      x = GatherAxis(c, x, t.idx[0], {out[a]}, axis);
    }
  }
  return {Cast(c, x, c.out[0].dtype)};
}

V UpsampleBackward(Ctx& c, Interp m) {
  DType acc = AccOf(c.out[0].dtype);
  Value g = Cast(c, c.In("grad_output"), acc);
  Dims out = c.Ints("output_size"), in = c.Ints("input_size");
  int64_t n = out.size(), r = in.size();
  for (int64_t a = 0; a < n; ++a) {
    int64_t axis = r - n + a;
    Taps t = TapsFor(c, m, in[axis], out[a], ScaleNames(n)[a], acc);
    g = ApplyAxis(c, g, WeightMatrix(c, t, in[axis], acc), axis, true);
  }
  return {Cast(c, g, c.out[0].dtype)};
}

// ---------------------------------------------------------------------------------------------
// Adaptive max pooling, max unpooling

// Adaptive pooling bins along one axis: start = floor(o*in/out), end = ceil((o+1)*in/out).
// tbl[o*k + j] is the (clamped) input index of tap j of bin o.
struct Bins {
  Dims start, len, tbl;
  int64_t k = 0;
};
Bins BinsOf(int64_t in, int64_t out) {
  Bins b;
  for (int64_t o = 0; o < out; ++o) {
    int64_t s = o * in / out, e = ((o + 1) * in + out - 1) / out;
    b.start.push_back(s);
    b.len.push_back(e - s);
    b.k = std::max(b.k, e - s);
  }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t j = 0; j < b.k; ++j) b.tbl.push_back(std::min(b.start[o] + j, in - 1));
  }
  return b;
}

// Values and flat per-plane indices like PyTorch's CPU kernel: the first maximum of each bin
// wins, and a NaN wins over everything (the last NaN, as `val > max || isnan(val)` scans).
V AdaptiveMaxPool(Ctx& c) {
  Value x = c.In("self");
  Dims xd = c.T(x).dims, out = c.Ints("output_size");
  int64_t n = out.size(), r = xd.size(), lead = r - n;
  if (Numel(c.out[0].dims) == 0) return {Zeros(c, c.out[0]), Zeros(c, c.out[1])};
  std::vector<Bins> bins;
  for (int64_t a = 0; a < n; ++a) bins.push_back(BinsOf(xd[lead + a], out[a]));
  // Window taps: each spatial axis becomes (out, k); last axis first keeps earlier positions.
  for (int64_t a = n - 1; a >= 0; --a) {
    x = GatherAxis(c, x, bins[a].tbl, {out[a], bins[a].k}, lead + a);
  }
  Dims perm = Range(0, lead), ks;
  for (int64_t a = 0; a < n; ++a) perm.push_back(lead + 2 * a);
  for (int64_t a = 0; a < n; ++a) perm.push_back(lead + 2 * a + 1), ks.push_back(bins[a].k);
  x = ir::Transpose(c.g, x, perm);
  Dims full = Cat(Cat(Head(xd, lead), out), ks);
  Value valid = -1, flat = -1;
  int64_t stride = 1;
  for (int64_t a = n - 1; a >= 0; --a) {
    Dims d{out[a], bins[a].k}, map{lead + a, lead + n + a};
    Value ok = Cmp(c, ir::Iota(c.g, Type{DType::kS64, d}, 1),
                   Bc(c, ir::ConstantI64(c.g, bins[a].len), d, {0}), "LT");
    Dims at = bins[a].tbl;
    for (int64_t& v : at) v *= stride;
    Value pos = Bc(c, ir::Reshape(c.g, ir::ConstantI64(c.g, at), d), full, map);
    ok = Bc(c, ok, full, map);
    valid = valid < 0 ? ok : And(c, valid, ok);
    flat = flat < 0 ? pos : Add(c, flat, pos);
    stride *= xd[lead + a];
  }
  int64_t kt = Numel(ks), last = lead + n;
  Dims red = Cat(Cat(Head(xd, lead), out), {kt}), keep = Range(0, last);
  x = ir::Reshape(c.g, x, red);
  valid = ir::Reshape(c.g, valid, red);
  flat = ir::Reshape(c.g, flat, red);
  DType t = c.T(x).dtype;
  Value low = ir::Constant(c.g, LowestOf(t), t);
  Value vm = Sel(c, valid, x, Bc(c, low, red, {}));
  Value mx = ir::Reduce(c.g, vm, low, {last}, "stablehlo.maximum");
  Value k = ir::Iota(c.g, Type{DType::kS64, red}, last);
  Value hit = And(c, valid, Cmp(c, vm, Bc(c, mx, red, keep), "EQ"));
  Value pick = ir::Reduce(c.g, Sel(c, hit, k, Splat(c, kt, k)), ir::Constant(c.g, kt, DType::kS64),
                          {last}, "stablehlo.minimum");
  if (rt::IsFloat(t)) {
    Value nan = And(c, valid, Cmp(c, x, x, "NE"));
    Value last_nan = ir::Reduce(c.g, Sel(c, nan, k, Splat(c, -1, k)),
                                ir::Constant(c.g, -1, DType::kS64), {last}, "stablehlo.maximum");
    Value has = Cmp(c, last_nan, Splat(c, 0, last_nan), "GE");
    pick = Sel(c, has, last_nan, pick);
    mx = Sel(c, has, Splat(c, NAN, mx), mx);
  }
  Value chosen = Cmp(c, k, Bc(c, pick, red, keep), "EQ");
  Value idx = ir::Reduce(c.g, Sel(c, chosen, flat, Splat(c, 0, flat)),
                         ir::Constant(c.g, 0, DType::kS64), {last}, "stablehlo.add");
  return {Cast(c, mx, c.out[0].dtype), Cast(c, idx, c.out[1].dtype)};
}

// Combines upd [P, L] into base [P, S] at the flat per-plane positions idx [P, L].
Value PlaneScatter(Ctx& c, Value base, Value idx, Value upd, std::shared_ptr<Graph> combiner) {
  Dims d = c.T(upd).dims;
  Value plane = ir::Iota(c.g, Type{DType::kS64, {d[0], d[1], 1}}, 0);
  Value at = ir::Concat(c.g, {plane, ir::Reshape(c.g, idx, {d[0], d[1], 1})}, 2);
  return ir::Scatter(c.g, base, at, upd, {0, 1}, 0, std::move(combiner));
}

// Gradient of a max pooling given its per-plane argmax indices: a scatter-add.
V AdaptiveMaxPoolBackward(Ctx& c, int64_t n) {
  Dims in = c.out[0].dims, go = c.T(c.In("grad_output")).dims;
  int64_t lead = in.size() - n;
  if (Numel(in) == 0 || Numel(go) == 0) return {Zeros(c, c.out[0])};
  DType acc = AccOf(c.out[0].dtype);
  int64_t p = Numel(Head(in, lead)), l = Numel(Tail(go, n));
  Value g = ir::Reshape(c.g, Cast(c, c.In("grad_output"), acc), {p, l});
  Value idx = ir::Reshape(c.g, Cast(c, c.In("indices"), DType::kS64), {p, l});
  Value gi = PlaneScatter(c, Zeros(c, Type{acc, {p, Numel(Tail(in, n))}}), idx, g,
                          ir::ScalarRegion(acc, "stablehlo.add"));
  return {Cast(c, ir::Reshape(c.g, gi, in), c.out[0].dtype)};
}

V MaxUnpool(Ctx& c, int64_t n) {
  const Type& ot = c.out[0];
  Dims sd = c.T(c.In("self")).dims;
  int64_t lead = ot.rank() - n, p = Numel(Head(ot.dims, lead)), l = Numel(Tail(sd, n));
  if (Numel(ot.dims) == 0 || Numel(sd) == 0) return {Zeros(c, ot)};
  Value v = ir::Reshape(c.g, Cast(c, c.In("self"), ot.dtype), {p, l});
  Value idx = ir::Reshape(c.g, Cast(c, c.In("indices"), DType::kS64), {p, l});
  Value y = PlaneScatter(c, Zeros(c, Type{ot.dtype, {p, Numel(Tail(ot.dims, n))}}), idx, v,
                         ir::OverwriteRegion(ot.dtype));
  return {ir::Reshape(c.g, y, ot.dims)};
}

// ---------------------------------------------------------------------------------------------
// im2col / col2im (nn.functional.unfold / fold)

struct Window {
  Dims k, d, p, s, in, out;  // 2-D each
};
Window WindowOf(Ctx& c, const Dims& in) {
  Window w{c.Ints("kernel_size"), c.Ints("dilation"), c.Ints("padding"), c.Ints("stride"), in, {}};
  for (int64_t a = 0; a < 2; ++a) {
    w.out.push_back((in[a] + 2 * w.p[a] - w.d[a] * (w.k[a] - 1) - 1) / w.s[a] + 1);
  }
  return w;
}

V Im2col(Ctx& c) {
  Value x = c.In("self");
  Dims xd = c.T(x).dims;
  if (xd.size() == 3) xd.insert(xd.begin(), 1);
  Window w = WindowOf(c, Tail(xd, 2));
  if (Numel(c.out[0].dims) == 0) return {Zeros(c, c.out[0])};
  int64_t nb = xd[0], ch = xd[1];
  Value xp = ir::Pad(c.g, ir::Reshape(c.g, x, xd), ir::Constant(c.g, 0, c.T(x).dtype),
                     {0, 0, w.p[0], w.p[1]}, {0, 0, w.p[0], w.p[1]});
  std::vector<Value> taps;
  for (int64_t i = 0; i < w.k[0]; ++i) {
    for (int64_t j = 0; j < w.k[1]; ++j) {
      int64_t h0 = i * w.d[0], w0 = j * w.d[1];
      Value t =
          ir::Slice(c.g, xp, {0, 0, h0, w0},
                    {nb, ch, h0 + (w.out[0] - 1) * w.s[0] + 1, w0 + (w.out[1] - 1) * w.s[1] + 1},
                    {1, 1, w.s[0], w.s[1]});
      taps.push_back(ir::Reshape(c.g, t, {nb, ch, 1, w.out[0] * w.out[1]}));
    }
  }
  return {ir::Reshape(c.g, ir::Concat(c.g, taps, 2), c.out[0].dims)};
}

// The transpose of im2col: each tap is padded (interior padding = stride - 1) into place.
V Col2im(Ctx& c) {
  const Type& ot = c.out[0];
  Dims od = ot.dims;
  if (od.size() == 3) od.insert(od.begin(), 1);
  Window w = WindowOf(c, c.Ints("output_size"));
  if (Numel(od) == 0) return {Zeros(c, ot)};
  DType acc = AccOf(ot.dtype);
  int64_t nb = od[0], ch = od[1], kt = w.k[0] * w.k[1];
  int64_t hp = w.in[0] + 2 * w.p[0], wp = w.in[1] + 2 * w.p[1];
  Value x = ir::Reshape(c.g, Cast(c, c.In("self"), acc), {nb, ch, kt, w.out[0], w.out[1]});
  Value zero = ir::Constant(c.g, 0, acc), sum = Zeros(c, Type{acc, {nb, ch, hp, wp}});
  for (int64_t i = 0; i < w.k[0]; ++i) {
    for (int64_t j = 0; j < w.k[1]; ++j) {
      int64_t t = i * w.k[1] + j, h0 = i * w.d[0], w0 = j * w.d[1];
      Value v =
          ir::Reshape(c.g, ir::Slice(c.g, x, {0, 0, t, 0, 0}, {nb, ch, t + 1, w.out[0], w.out[1]}),
                      {nb, ch, w.out[0], w.out[1]});
      Dims hi{0, 0, hp - (h0 + (w.out[0] - 1) * w.s[0] + 1),
              wp - (w0 + (w.out[1] - 1) * w.s[1] + 1)};
      sum = Add(c, sum, ir::Pad(c.g, v, zero, {0, 0, h0, w0}, hi, {0, 0, w.s[0] - 1, w.s[1] - 1}));
    }
  }
  Value y =
      ir::Slice(c.g, sum, {0, 0, w.p[0], w.p[1]}, {nb, ch, w.p[0] + w.in[0], w.p[1] + w.in[1]});
  return {Cast(c, ir::Reshape(c.g, y, ot.dims), ot.dtype)};
}

// ---------------------------------------------------------------------------------------------
// grid_sampler_2d / grid_sampler_3d (bilinear and nearest)

// Source coordinate for normalized coordinates g along an axis of `size`, and d(src)/d(g)
// (grid_sampler_compute_source_index_set_grad). padding: 0 zeros, 1 border, 2 reflection.
std::pair<Value, Value> GridSource(Ctx& c, Value g, int64_t size, int64_t padding, bool align) {
  auto k = [&](double v) { return Splat(c, v, g); };
  Value one = k(1);
  Value src = align ? Mul(c, ir::Binary(c.g, "stablehlo.divide", Add(c, g, one), k(2)), k(size - 1))
                    : ir::Binary(c.g, "stablehlo.divide",
                                 Sub(c, Mul(c, Add(c, g, one), k(size)), one), k(2));
  Value grad = k(align ? (size - 1) / 2.0 : size / 2.0);
  if (padding == 2) {
    int64_t lo = align ? 0 : -1, hi = align ? 2 * (size - 1) : 2 * size - 1;
    if (lo == hi) return {k(0), k(0)};
    Value d = Sub(c, src, k(lo / 2.0));
    Value span = k((hi - lo) / 2.0), a = ir::Unary(c.g, "stablehlo.abs", d);
    Value extra = ir::Binary(c.g, "stablehlo.remainder", a, span);
    Value flips = ir::Unary(c.g, "stablehlo.floor", ir::Binary(c.g, "stablehlo.divide", a, span));
    Value odd = Cmp(c, ir::Binary(c.g, "stablehlo.remainder", flips, k(2)), k(0), "NE");
    src = Add(c, Sel(c, odd, Sub(c, span, extra), extra), k(lo / 2.0));
    Value sign = Sel(c, Cmp(c, d, k(0), "LT"), k(-1), one);
    grad = Mul(c, grad, Sel(c, odd, ir::Unary(c.g, "stablehlo.negate", sign), sign));
  }
  if (padding != 0) {
    Value inside = And(c, Cmp(c, src, k(0), "GT"), Cmp(c, src, k(size - 1), "LT"));
    src = ir::Clamp(c.g, k(0), src, k(size - 1));
    grad = Sel(c, inside, grad, k(0));
  }
  return {src, grad};
}

// One interpolation corner: flat index into the input plane, in-bounds mask, weight, and the
// weight's derivative along each spatial axis.
struct Corner {
  Value flat, valid, w;
  std::vector<Value> dw;
};

struct GridSetup {
  int64_t n = 0;
  Dims spatial, outd;  // input spatial sizes; [N, out spatial...]
  std::vector<Value> dsrc;
  std::vector<Corner> corners;
  Value table = -1;  // input as [N, S, C]
};

GridSetup SetupGrid(Ctx& c, DType acc) {
  GridSetup s;
  Value input = c.In("input"), grid = Cast(c, c.In("grid"), acc);
  Dims id = c.T(input).dims, gd = c.T(grid).dims;
  s.n = gd.back();
  s.spatial = Tail(id, s.n);
  s.outd = Head(gd, gd.size() - 1);
  int64_t mode = c.Int("interpolation_mode"), padding = c.Int("padding_mode");
  bool align = c.Bool("align_corners", false);
  if (mode != 0 && mode != 1) throw LoweringError("grid_sampler: bicubic mode is not supported");
  int64_t nb = id[0], ch = id[1], sn = Numel(s.spatial);
  s.table = ir::Transpose(c.g, ir::Reshape(c.g, Cast(c, input, acc), {nb, ch, sn}), {0, 2, 1});
  // Per axis: the low/high integer corner and its weight (nearest: one corner, weight 1).
  std::vector<std::array<Value, 2>> at(s.n), wt(s.n);
  for (int64_t a = 0; a < s.n; ++a) {
    int64_t j = s.n - 1 - a;  // grid coordinate 0 is x, the last axis
    Dims start(gd.size(), 0), limit = gd;
    start.back() = j;
    limit.back() = j + 1;
    Value g = ir::Reshape(c.g, ir::Slice(c.g, grid, start, limit), s.outd);
    auto [src, d] = GridSource(c, g, s.spatial[a], padding, align);
    s.dsrc.push_back(d);
    if (mode == 1) {
      at[a] = {ir::Unary(c.g, "stablehlo.round_nearest_even", src), -1};
      continue;
    }
    Value lo = ir::Unary(c.g, "stablehlo.floor", src), hi = Add(c, lo, Splat(c, 1, lo));
    at[a] = {lo, hi};
    wt[a] = {Sub(c, hi, src), Sub(c, src, lo)};
  }
  int64_t count = mode == 1 ? 1 : 1 << s.n;
  for (int64_t m = 0; m < count; ++m) {
    Corner k;
    k.w = Splat(c, 1, Type{acc, s.outd});
    k.dw.assign(s.n, k.w);
    int64_t stride = sn;
    for (int64_t a = 0; a < s.n; ++a) {
      int64_t bit = (m >> (s.n - 1 - a)) & 1;
      stride /= s.spatial[a];
      Value i = Cast(c, at[a][bit], DType::kS64);
      Value ok =
          And(c, Cmp(c, i, Splat(c, 0, i), "GE"), Cmp(c, i, Splat(c, s.spatial[a], i), "LT"));
      i = ir::Clamp(c.g, Splat(c, 0, i), i, Splat(c, s.spatial[a] - 1, i));
      i = Mul(c, i, Splat(c, stride, i));
      k.flat = a == 0 ? i : Add(c, k.flat, i);
      k.valid = a == 0 ? ok : And(c, k.valid, ok);
      if (mode == 1) continue;
      for (int64_t b = 0; b < s.n; ++b) {
        k.dw[b] = Mul(c, k.dw[b], b == a ? Splat(c, bit ? 1 : -1, k.w) : wt[a][bit]);
      }
      k.w = Mul(c, k.w, wt[a][bit]);
    }
    s.corners.push_back(k);
  }
  return s;
}

// [N, out spatial..., 2] gather/scatter coordinates (batch, flat index) of a corner.
Value CornerAt(Ctx& c, const GridSetup& s, const Corner& k) {
  Dims d = Cat(s.outd, {1});
  Value b = ir::Iota(c.g, Type{DType::kS64, d}, 0);
  return ir::Concat(c.g, {b, ir::Reshape(c.g, k.flat, d)}, static_cast<int64_t>(d.size()) - 1);
}

// Moves the channel dim between [N, C, out...] and [N, out..., C].
Value ChannelsLast(Ctx& c, Value x, bool to_last) {
  int64_t r = c.T(x).rank();
  Dims perm{0};
  if (to_last) {
    for (int64_t i = 2; i < r; ++i) perm.push_back(i);
    perm.push_back(1);
  } else {
    perm.push_back(r - 1);
    for (int64_t i = 1; i < r - 1; ++i) perm.push_back(i);
  }
  return ir::Transpose(c.g, x, perm);
}

// Corner values, zero where out of bounds: [N, out..., C].
Value CornerValues(Ctx& c, const GridSetup& s, const Corner& k) {
  Value v = ir::Gather(c.g, s.table, CornerAt(c, s, k), {0, 1}, 0);
  Dims vd = c.T(v).dims;
  return Sel(c, Bc(c, k.valid, vd, Range(0, vd.size() - 1)), v, Zeros(c, c.T(v)));
}

V GridSampler(Ctx& c) {
  // ATen's CPU grid sampler computes half types in the half type itself; matching it keeps bf16
  // results within tolerance of CPU (f32 math would be closer to exact but further from CPU).
  DType acc = c.out[0].dtype;
  if (Numel(c.out[0].dims) == 0) return {Zeros(c, c.out[0])};
  GridSetup s = SetupGrid(c, acc);
  Value y = -1;
  for (const Corner& k : s.corners) {
    Value v = CornerValues(c, s, k);
    Dims vd = c.T(v).dims;
    v = Mul(c, v, Bc(c, k.w, vd, Range(0, vd.size() - 1)));
    y = y < 0 ? v : Add(c, y, v);
  }
  return {Cast(c, ChannelsLast(c, y, false), c.out[0].dtype)};
}

V GridSamplerBackward(Ctx& c) {
  const Type &gi_t = c.out[0], &gg_t = c.out[1];
  DType acc = AccOf(gg_t.dtype);
  Dims id = c.T(c.In("input")).dims, gd = c.T(c.In("grid")).dims;
  bool want_input = gi_t.dims == id;
  if (Numel(id) == 0 || Numel(gd) == 0) return {Zeros(c, gi_t), Zeros(c, gg_t)};
  GridSetup s = SetupGrid(c, acc);
  Value go = ChannelsLast(c, Cast(c, c.In("grad_output"), acc), true);  // [N, out..., C]
  Dims vd = c.T(go).dims, keep = Range(0, vd.size() - 1);
  Value gi = Zeros(c, c.T(s.table));
  std::vector<Value> gsrc(s.n, Zeros(c, Type{acc, s.outd}));
  for (const Corner& k : s.corners) {
    if (want_input) {
      Value upd = Mul(c, go, Bc(c, k.w, vd, keep));
      upd = Sel(c, Bc(c, k.valid, vd, keep), upd, Zeros(c, c.T(upd)));
      gi = ir::Scatter(c.g, gi, CornerAt(c, s, k), upd, {0, 1}, 0,
                       ir::ScalarRegion(acc, "stablehlo.add"));
    }
    if (c.Int("interpolation_mode") == 1) continue;
    Value dot = ir::Reduce(c.g, Mul(c, go, CornerValues(c, s, k)), ir::Constant(c.g, 0, acc),
                           {static_cast<int64_t>(vd.size()) - 1}, "stablehlo.add");
    for (int64_t a = 0; a < s.n; ++a) gsrc[a] = Add(c, gsrc[a], Mul(c, dot, k.dw[a]));
  }
  std::vector<Value> coords;
  Dims cd = Cat(s.outd, {1});
  for (int64_t j = 0; j < s.n; ++j) {
    int64_t a = s.n - 1 - j;
    coords.push_back(ir::Reshape(c.g, Mul(c, gsrc[a], s.dsrc[a]), cd));
  }
  Value gg = ir::Concat(c.g, coords, static_cast<int64_t>(cd.size()) - 1);
  Value gin = Zeros(c, gi_t);
  if (want_input) {
    gin = Cast(c, ir::Reshape(c.g, ir::Transpose(c.g, gi, {0, 2, 1}), id), gi_t.dtype);
  }
  return {gin, Cast(c, gg, gg_t.dtype)};
}

}  // namespace

void AddResampleRules(RuleMap& m) {
  m["aten::_upsample_bicubic2d_aa"] = +[](Ctx& c) { return Upsample(c, Interp::kCubicAa); };
  m["aten::_upsample_bicubic2d_aa_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kCubicAa); };
  m["aten::_upsample_bilinear2d_aa"] = +[](Ctx& c) { return Upsample(c, Interp::kLinearAa); };
  m["aten::_upsample_bilinear2d_aa_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kLinearAa); };
  m["aten::_upsample_nearest_exact1d"] = +[](Ctx& c) { return Upsample(c, Interp::kNearestExact); };
  m["aten::_upsample_nearest_exact1d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kNearestExact); };
  m["aten::_upsample_nearest_exact2d"] = +[](Ctx& c) { return Upsample(c, Interp::kNearestExact); };
  m["aten::_upsample_nearest_exact2d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kNearestExact); };
  m["aten::_upsample_nearest_exact3d"] = +[](Ctx& c) { return Upsample(c, Interp::kNearestExact); };
  m["aten::_upsample_nearest_exact3d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kNearestExact); };
  m["aten::adaptive_max_pool2d"] = AdaptiveMaxPool;
  m["aten::adaptive_max_pool2d_backward"] = +[](Ctx& c) { return AdaptiveMaxPoolBackward(c, 2); };
  m["aten::adaptive_max_pool3d"] = AdaptiveMaxPool;
  m["aten::adaptive_max_pool3d_backward"] = +[](Ctx& c) { return AdaptiveMaxPoolBackward(c, 3); };
  m["aten::col2im"] = Col2im;
  m["aten::grid_sampler_2d"] = GridSampler;
  m["aten::grid_sampler_2d_backward"] = GridSamplerBackward;
  m["aten::grid_sampler_3d"] = GridSampler;
  m["aten::grid_sampler_3d_backward"] = GridSamplerBackward;
  m["aten::im2col"] = Im2col;
  m["aten::max_unpool2d"] = +[](Ctx& c) { return MaxUnpool(c, 2); };
  m["aten::max_unpool3d"] = +[](Ctx& c) { return MaxUnpool(c, 3); };
  m["aten::upsample_bicubic2d"] = +[](Ctx& c) { return Upsample(c, Interp::kCubic); };
  m["aten::upsample_bicubic2d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kCubic); };
  m["aten::upsample_bilinear2d"] = +[](Ctx& c) { return Upsample(c, Interp::kLinear); };
  m["aten::upsample_bilinear2d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kLinear); };
  m["aten::upsample_linear1d"] = +[](Ctx& c) { return Upsample(c, Interp::kLinear); };
  m["aten::upsample_linear1d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kLinear); };
  m["aten::upsample_nearest1d"] = +[](Ctx& c) { return Upsample(c, Interp::kNearest); };
  m["aten::upsample_nearest1d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kNearest); };
  m["aten::upsample_nearest2d"] = +[](Ctx& c) { return Upsample(c, Interp::kNearest); };
  m["aten::upsample_nearest2d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kNearest); };
  m["aten::upsample_nearest3d"] = +[](Ctx& c) { return Upsample(c, Interp::kNearest); };
  m["aten::upsample_nearest3d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kNearest); };
  m["aten::upsample_trilinear3d"] = +[](Ctx& c) { return Upsample(c, Interp::kLinear); };
  m["aten::upsample_trilinear3d_backward"] =
      +[](Ctx& c) { return UpsampleBackward(c, Interp::kLinear); };
}

}  // namespace tpu::lowering
