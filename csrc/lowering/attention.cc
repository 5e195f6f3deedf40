// Fused scaled-dot-product attention (PyTorch's "overrideable" SDPA kernels), forward and
// backward, with causal / boolean / additive masks, grouped-query heads and dropout. Scores and
// softmax are computed in f32 (f64 for f64 inputs); the backward recomputes the probabilities
// from the saved logsumexp, as flash attention does.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/random.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

DType AccOf(DType t) { return t == DType::kF64 ? DType::kF64 : DType::kF32; }

Dims Iota(int64_t n) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = i;
  return d;
}

// a @ b over the last two dims, leading dims batched; contracting a's dim ca with b's dim cb.
Value BatchDot(Ctx& c, Value a, Value b, int64_t ca, int64_t cb) {
  const Type& ta = c.T(a);
  const Type& tb = c.T(b);
  int64_t r = ta.rank();
  Dims batch = Iota(r - 2);
  Dims out(ta.dims.begin(), ta.dims.end() - 2);
  out.push_back(ta.dims[ca == r - 1 ? r - 2 : r - 1]);
  out.push_back(tb.dims[cb == r - 1 ? r - 2 : r - 1]);
  return ir::DotGeneralHighest(c.g, a, b, batch, batch, {ca}, {cb}, Type{ta.dtype, out});
}

// Key/value heads repeated for grouped-query attention: kv head h serves q heads h*g .. h*g+g-1.
Value RepeatHeads(Ctx& c, Value x, int64_t hq) {
  Dims d = c.T(x).dims;
  int64_t r = static_cast<int64_t>(d.size()), hk = d[r - 3];
  if (hk == hq) return x;
  Dims grouped = d;
  grouped.insert(grouped.begin() + (r - 2), hq / hk);
  Dims mapping;
  for (int64_t i = 0; i < r; ++i) mapping.push_back(i < r - 2 ? i : i + 1);
  Value b = ir::BroadcastInDim(c.g, x, grouped, mapping);
  d[r - 3] = hq;
  return ir::Reshape(c.g, b, d);
}

// The inverse of RepeatHeads for gradients: sum each group back onto its kv head.
Value SumHeads(Ctx& c, Value g, int64_t hk) {
  Dims d = c.T(g).dims;
  int64_t r = static_cast<int64_t>(d.size()), hq = d[r - 3];
  if (hk == hq) return g;
  Dims grouped = d;
  grouped[r - 3] = hk;
  grouped.insert(grouped.begin() + (r - 2), hq / hk);
  Value x = ir::Reshape(c.g, g, grouped);
  return ir::Reduce(c.g, x, ir::Constant(c.g, 0, c.T(g).dtype), {r - 2}, "stablehlo.add");
}

double ScaleOf(Ctx& c, Value q) {
  double e = static_cast<double>(c.T(q).dims.back());
  return c.Has("scale") ? c.Double("scale", 0) : 1.0 / std::sqrt(e);
}

// Scaled scores q k^T with the causal mask (top-left aligned, like PyTorch) and attn_bias.
Value Scores(Ctx& c, Value q, Value k, const std::string& bias_name) {
  DType acc = c.T(q).dtype;
  Value s = BatchDot(c, q, k, c.T(q).rank() - 1, c.T(k).rank() - 1);
  const Type st = c.T(s);
  s = Mul(c, s, Splat(c, ScaleOf(c, q), st));
  Value neg_inf = Splat(c, -INFINITY, st);
  int64_t r = st.rank();
  if (c.Bool("is_causal", false)) {
    Type it{DType::kS64, st.dims};
    Value keep = ir::Compare(c.g, ir::Iota(c.g, it, r - 1), ir::Iota(c.g, it, r - 2), "LE");
    s = ir::Select(c.g, keep, s, neg_inf);
  }
  if (c.Has(bias_name)) {
    Value bias = c.In(bias_name);
    if (c.T(bias).dtype == DType::kPred) {
      s = ir::Select(c.g, ir::BroadcastTo(c.g, bias, st.dims), s, neg_inf);
    } else {
      s = ir::Binary(c.g, "stablehlo.add", s, Cast(c, bias, acc, st.dims));
    }
  }
  return s;
}

// -inf (a fully masked row) becomes 0 so that exp(s - m) stays finite.
Value Finite(Ctx& c, Value m) {
  Value a = ir::Unary(c.g, "stablehlo.abs", m);
  return ir::Select(c.g, ir::Compare(c.g, a, Splat(c, INFINITY, a), "EQ"), Splat(c, 0, m), m);
}

// Keep-mask scaled by 1/(1-p) for dropout, from the call's generator state.
Value DropoutScale(Ctx& c, const Type& t, double p) {
  Value u = Uniform01(c, t.dims, t.dtype);
  Value keep = ir::Compare(c.g, u, Splat(c, p, c.T(u)), "GE");
  return Mul(c, Cast(c, keep, t.dtype), Splat(c, 1.0 / (1.0 - p), t));
}

Value RowsumKeep(Ctx& c, Value x) {
  int64_t r = c.T(x).rank();
  return ir::Reduce(c.g, x, ir::Constant(c.g, 0, c.T(x).dtype), {r - 1}, "stablehlo.add");
}

Value Unsqueezed(Ctx& c, Value row, const Type& like) {
  Dims mapping = Iota(like.rank() - 1);
  return ir::BroadcastInDim(c.g, row, like.dims, mapping);
}

V Forward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value q = Cast(c, c.In("query"), acc);
  int64_t hq = c.T(q).dims[c.T(q).rank() - 3];
  Value k = RepeatHeads(c, Cast(c, c.In("key"), acc), hq);
  Value v = RepeatHeads(c, Cast(c, c.In("value"), acc), hq);
  Value s = Scores(c, q, k, "attn_bias");
  const Type st = c.T(s);
  int64_t r = st.rank();
  Value m = Finite(
      c, ir::Reduce(c.g, s, ir::Constant(c.g, -INFINITY, acc), {r - 1}, "stablehlo.maximum"));
  Value e = ir::Unary(c.g, "stablehlo.exponential", Sub(c, s, Unsqueezed(c, m, st)));
  Value sum = RowsumKeep(c, e);
  // Fully masked rows give zero probabilities (and output), not NaN.
  Value safe =
      ir::Select(c.g, ir::Compare(c.g, sum, Splat(c, 0, sum), "EQ"), Splat(c, 1, sum), sum);
  Value p = ir::Binary(c.g, "stablehlo.divide", e, Unsqueezed(c, safe, st));
  Value lse = ir::Binary(c.g, "stablehlo.add", m, ir::Unary(c.g, "stablehlo.log", sum));
  double drop = c.Double("dropout_p", 0);
  Value seed = Splat(c, 0, c.out[6]), offset = Splat(c, 0, c.out[7]);
  if (drop > 0) {
    p = Mul(c, p, DropoutScale(c, st, drop));
    Value state = Cast(c, c.In("generator"), DType::kS64);
    seed = ir::Reshape(c.g, ir::Slice(c.g, state, {0}, {1}), {});
    offset = ir::Reshape(c.g, ir::Slice(c.g, state, {1}, {2}), {});
  }
  Value out = BatchDot(c, p, v, r - 1, c.T(v).rank() - 2);
  V res{Cast(c, out, c.out[0].dtype), Cast(c, lse, c.out[1].dtype)};
  for (size_t i = 2; i < c.out.size(); ++i) res.push_back(Splat(c, 0, c.out[i]));
  res[6] = seed;
  res[7] = offset;
  return res;
}

// Sums a gradient of the scores down to the (broadcast) shape of attn_bias.
Value ToBiasShape(Ctx& c, Value ds, const Type& bias) {
  const Type st = c.T(ds);
  int64_t lead = st.rank() - bias.rank();
  Dims dims;
  for (int64_t i = 0; i < st.rank(); ++i) {
    if (i < lead || (bias.dims[i - lead] == 1 && st.dims[i] != 1)) dims.push_back(i);
  }
  Value r = dims.empty()
                ? ds
                : ir::Reduce(c.g, ds, ir::Constant(c.g, 0, st.dtype), dims, "stablehlo.add");
  return ir::Reshape(c.g, r, bias.dims);
}

V Backward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value q = Cast(c, c.In("query"), acc);
  int64_t r = c.T(q).rank(), hq = c.T(q).dims[r - 3];
  int64_t hk = c.T(c.In("key")).dims[r - 3];
  Value k = RepeatHeads(c, Cast(c, c.In("key"), acc), hq);
  Value v = RepeatHeads(c, Cast(c, c.In("value"), acc), hq);
  Value dout = Cast(c, c.In("grad_out"), acc);
  Value s = Scores(c, q, k, "attn_bias");
  const Type st = c.T(s);
  Value lse = Finite(c, Cast(c, c.In("logsumexp"), acc));
  Value p = ir::Unary(c.g, "stablehlo.exponential", Sub(c, s, Unsqueezed(c, lse, st)));
  double drop = c.Double("dropout_p", 0);
  Value pd = p, dp = BatchDot(c, dout, v, r - 1, r - 1);  // dO V^T: [.., L, S]
  if (drop > 0) {
    // The forward's [seed, offset] regenerate the same keep-mask.
    Value seed = ir::Reshape(c.g, Cast(c, c.In("philox_seed"), DType::kU64), {1});
    Value offset = ir::Reshape(c.g, Cast(c, c.In("philox_offset"), DType::kU64), {1});
    Arg state;
    state.kind = Arg::Kind::kValue;
    state.value = ir::Concat(c.g, {seed, offset}, 0);
    c.args.emplace_back("generator", state);
    Value keep = DropoutScale(c, st, drop);
    pd = Mul(c, p, keep);
    dp = Mul(c, dp, keep);
  }
  Value dv = BatchDot(c, pd, dout, r - 2, r - 2);  // P^T dO: [.., S, Ev]
  Value delta = RowsumKeep(c, Mul(c, dp, p));
  Value ds = Mul(c, p, Sub(c, dp, Unsqueezed(c, delta, st)));
  Value scale = Splat(c, ScaleOf(c, q), c.T(q));
  Value dq = Mul(c, BatchDot(c, ds, k, r - 1, r - 2), scale);
  Value dk = BatchDot(c, ds, q, r - 2, r - 2);  // dS^T Q: [.., S, E]
  dk = Mul(c, dk, Splat(c, ScaleOf(c, q), c.T(dk)));
  Dims mask = c.Ints("grad_input_mask");
  auto want = [&](size_t i) { return mask.size() <= i || mask[i] != 0; };
  V res;
  res.push_back(want(0) ? Cast(c, dq, c.out[0].dtype) : Splat(c, 0, c.out[0]));
  res.push_back(want(1) ? Cast(c, SumHeads(c, dk, hk), c.out[1].dtype) : Splat(c, 0, c.out[1]));
  res.push_back(want(2) ? Cast(c, SumHeads(c, dv, hk), c.out[2].dtype) : Splat(c, 0, c.out[2]));
  bool bias_grad = want(3) && c.Has("attn_bias") && c.out[3].dims != Dims{0} &&
                   c.T(c.In("attn_bias")).dtype != DType::kPred;
  res.push_back(bias_grad ? Cast(c, ToBiasShape(c, ds, c.out[3]), c.out[3].dtype)
                          : Splat(c, 0, c.out[3]));
  return res;
}

}  // namespace

void AddAttentionRules(RuleMap& m) {
  m["aten::_scaled_dot_product_fused_attention_overrideable"] = Forward;
  m["aten::_scaled_dot_product_fused_attention_overrideable_backward"] = Backward;
}

}  // namespace tpu::lowering
