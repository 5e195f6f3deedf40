// nn.functional.ctc_loss: _ctc_loss (the forward variables alpha over time) and
// _ctc_loss_backward (the backward variables beta, then each class's gradient), in log space as
// PyTorch's CPU kernel computes them (Graves et al., 2006). The lengths are host integers, so the
// program is specialized to them; each recursion is one stablehlo.while over time whose state
// holds everything its body reads.
#include <algorithm>
#include <cmath>
#include <string>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

Value Bin(Graph& g, const char* op, Value a, Value b) { return ir::Binary(g, op, a, b); }
Value NegInf(Graph& g, const Type& t) { return ir::Constant(g, -INFINITY, t.dtype, t.dims); }

// Elementwise log(sum(exp(x))) over xs; -inf where all are -inf.
Value LogSumExp(Graph& g, const V& xs) {
  const Type t = g.type(xs[0]);
  Value m = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) m = Bin(g, "stablehlo.maximum", m, xs[i]);
  Value safe =
      ir::Select(g, ir::Compare(g, m, NegInf(g, t), "EQ"), ir::Constant(g, 0, t.dtype, t.dims), m);
  Value sum = ir::Constant(g, 0, t.dtype, t.dims);
  for (Value x : xs) {
    Value e = ir::Unary(g, "stablehlo.exponential", Bin(g, "stablehlo.subtract", x, safe));
    sum = Bin(g, "stablehlo.add", sum, e);
  }
  return Bin(g, "stablehlo.add", safe, ir::Unary(g, "stablehlo.log", sum));
}

// x[n, s - k] (k > 0) or x[n, s + |k|] (k < 0) along the last dim; `fill` where out of range.
Value Shift(Graph& g, Value x, int64_t k, Value fill_row) {
  const Type t = g.type(x);
  const int64_t n = t.dims[0], l = t.dims[1], a = std::min<int64_t>(std::abs(k), l);
  Value pad = ir::Slice(g, fill_row, {0, 0}, {n, a});
  if (a == l) return ir::Slice(g, fill_row, {0, 0}, {n, l});
  if (k > 0) return ir::Concat(g, {pad, ir::Slice(g, x, {0, 0}, {n, l - a})}, 1);
  return ir::Concat(g, {ir::Slice(g, x, {0, a}, {n, l}), pad}, 1);
}
Value ShiftInf(Graph& g, Value x, int64_t k) { return Shift(g, x, k, NegInf(g, g.type(x))); }

// Step t of x [T, N, K] as [N, K], and x with step t replaced.
Value Step(Graph& g, Value x, Value t) {
  const Dims& d = g.type(x).dims;
  Value zero = ir::Constant(g, 0, DType::kS64);
  return ir::Reshape(g, ir::DynamicSlice(g, x, {t, zero, zero}, {1, d[1], d[2]}), {d[1], d[2]});
}
Value PutStep(Graph& g, Value x, Value row, Value t) {
  const Dims& d = g.type(x).dims;
  Value zero = ir::Constant(g, 0, DType::kS64);
  return ir::DynamicUpdateSlice(g, x, ir::Reshape(g, row, {1, d[1], d[2]}), {t, zero, zero});
}

Value PerSequence(Graph& g, const Dims& v, const Dims& dims) {
  return ir::BroadcastInDim(g, ir::ConstantI64(g, v), dims, {0});
}

// The extended label sequences (blank, l1, blank, l2, ..., blank; length L = 2 S + 1) and the
// log-probabilities of each step's extended labels.
struct Extended {
  int64_t steps = 0, batch = 0, classes = 0, len = 0;
  Dims in_len, tgt_len;
  Value where;  // s64 [N, L, 2]: (n, class of label s), the gather/scatter coordinates
  Value skip;   // pred [N, L]: label s may follow label s - 2 (it differs from it)
  Value lp;     // [T, N, L]
};

Extended Extend(Ctx& c, Value log_probs, int64_t len) {
  Graph& g = c.g;
  Extended e;
  const Dims& d = c.T(log_probs).dims;
  e.steps = d[0], e.batch = d[1], e.classes = d[2], e.len = len;
  e.in_len = c.Ints("input_lengths");
  e.tgt_len = c.Ints("target_lengths");
  const int64_t n = e.batch, s = (len - 1) / 2, blank = c.Int("blank", 0);
  for (int64_t i = 0; i < n; ++i) {
    if (e.in_len[i] > e.steps || e.in_len[i] < 0) {
      throw ArgError("Expected input_lengths to have value at most " + std::to_string(e.steps) +
                     ", but got value " + std::to_string(e.in_len[i]));
    }
  }
  Value tg = Cast(c, c.In("targets"), DType::kS64);
  Value labels = ir::Constant(g, blank, DType::kS64, {n, s});
  if (s > 0 && c.T(tg).rank() == 2) {
    labels = ir::Slice(g, tg, {0, 0}, {n, s});
  } else if (s > 0) {
    // Concatenated targets: sequence i starts after the lengths before it.
    const int64_t total = std::max<int64_t>(c.T(tg).numel(), 1);
    Dims at;
    for (int64_t i = 0, start = 0; i < n; start += e.tgt_len[i], ++i) {
      for (int64_t j = 0; j < s; ++j) at.push_back(std::min(start + j, total - 1));
    }
    labels = ir::Reshape(
        g, ir::Gather(g, tg, ir::Reshape(g, ir::ConstantI64(g, at), {n * s, 1}), {0}, 0), {n, s});
  }
  Value ext = ir::Constant(g, blank, DType::kS64, {n, 1});
  if (s > 0) {
    Value pairs = ir::Concat(
        g, {ir::Constant(g, blank, DType::kS64, {n, s, 1}), ir::Reshape(g, labels, {n, s, 1})}, 2);
    ext = ir::Concat(g, {ir::Reshape(g, pairs, {n, 2 * s}), ext}, 1);
  }
  Value pos = ir::Iota(g, {DType::kS64, {n, len}}, 1);
  Value before = Shift(g, ext, 2, ir::Constant(g, blank, DType::kS64, {n, len}));
  e.skip =
      Bin(g, "stablehlo.and", ir::Compare(g, pos, ir::Constant(g, 2, DType::kS64, {n, len}), "GE"),
          ir::Compare(g, ext, before, "NE"));
  Value rows = ir::Iota(g, {DType::kS64, {n, len, 1}}, 0);
  e.where = ir::Concat(g, {rows, ir::Reshape(g, ext, {n, len, 1})}, 2);
  e.lp = ir::Gather(g, log_probs, e.where, {1, 2}, 1);
  return e;
}

// outputs: neg_log_likelihood [N], log_alpha [N, T, L]. An impossible alignment gives inf here;
// zero_infinity acts in ctc_loss (PyTorch's composite) and in the backward.
V CtcLoss(Ctx& c) {
  Graph& g = c.g;
  const DType acc = AccOf(c.out[0].dtype);
  Extended e = Extend(c, Cast(c, c.In("log_probs"), acc), c.out[1].dims[2]);
  const int64_t n = e.batch, len = e.len, steps = e.steps;
  if (steps == 0 || n == 0) return {Splat(c, 0, c.out[0]), Splat(c, 0, c.out[1])};
  const Type row{acc, {n, len}};
  Value pos = ir::Iota(g, {DType::kS64, {n, len}}, 1);
  Value has_label = ir::Compare(g, PerSequence(g, e.tgt_len, {n, len}),
                                ir::Constant(g, 0, DType::kS64, {n, len}), "GT");
  Value start =
      Bin(g, "stablehlo.or", ir::Compare(g, pos, ir::Constant(g, 0, DType::kS64, {n, len}), "EQ"),
          Bin(g, "stablehlo.and", has_label,
              ir::Compare(g, pos, ir::Constant(g, 1, DType::kS64, {n, len}), "EQ")));
  Value zero = ir::Constant(g, 0, DType::kS64);
  Value alpha = ir::Select(g, start, Step(g, e.lp, zero), NegInf(g, row));
  Value all = PutStep(g, NegInf(g, {acc, {steps, n, len}}), alpha, zero);
  V out = For(g, 1, steps, 1, {alpha, all, e.lp, e.skip}, [&](Graph& h, Value t, V& s) {
    Value a = s[0];
    Value two = ir::Select(h, s[3], ShiftInf(h, a, 2), NegInf(h, h.type(a)));
    Value next =
        Bin(h, "stablehlo.add", LogSumExp(h, {a, ShiftInf(h, a, 1), two}), Step(h, s[2], t));
    return V{next, PutStep(h, s[1], next, t), s[2], s[3]};
  });
  all = out[1];
  // -log p = -logsumexp of the last two labels at each sequence's last step.
  Dims last, second;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = std::max<int64_t>(e.in_len[i] - 1, 0), end = 2 * e.tgt_len[i];
    last.insert(last.end(), {t, i, end});
    second.insert(second.end(), {t, i, std::max<int64_t>(end - 1, 0)});
  }
  auto pick = [&](const Dims& at) {
    return ir::Gather(g, all, ir::Reshape(g, ir::ConstantI64(g, at), {n, 3}), {0, 1, 2}, 0);
  };
  Value labelled =
      ir::Compare(g, PerSequence(g, e.tgt_len, {n}), ir::Constant(g, 0, DType::kS64, {n}), "GT");
  Value two = ir::Select(g, labelled, pick(second), NegInf(g, {acc, {n}}));
  Value nll = ir::Unary(g, "stablehlo.negate", LogSumExp(g, {pick(last), two}));
  return {Cast(c, nll, c.out[0].dtype), Cast(c, ir::Transpose(g, all, {1, 0, 2}), c.out[1].dtype)};
}

// grad of log_probs [T, N, C]: exp(lp) - exp(log(sum over s with label c of alpha beta) + nll -
// lp), times the incoming gradient; zero past each sequence's length, and where zero_infinity drops
// an infinite loss.
V CtcLossBackward(Ctx& c) {
  Graph& g = c.g;
  const Type& ot = c.out[0];
  const DType acc = AccOf(ot.dtype);
  Value lpf = Cast(c, c.In("log_probs"), acc);
  Extended e = Extend(c, lpf, c.T(c.In("log_alpha")).dims[2]);
  const int64_t n = e.batch, len = e.len, steps = e.steps, classes = e.classes;
  if (steps == 0 || n == 0 || classes == 0) return {Splat(c, 0, ot)};
  Value la = ir::Transpose(g, Cast(c, c.In("log_alpha"), acc), {1, 0, 2});
  Value nll = Cast(c, c.In("neg_log_likelihood"), acc, {n});
  Value gout = Cast(c, c.In("grad"), acc, {n});
  // Sequences whose gradient is zero whatever it computes to: zero_infinity's infinite losses.
  Value kept = ir::Constant(g, 1, DType::kPred, {n});
  if (c.Bool("zero_infinity", false)) {
    kept = ir::Compare(g, nll, ir::Constant(g, INFINITY, acc, {n}), "NE");
  }
  Dims last_step(n), end(n);
  for (int64_t i = 0; i < n; ++i) last_step[i] = e.in_len[i] - 1, end[i] = 2 * e.tgt_len[i];
  Value pos = ir::Iota(g, {DType::kS64, {n, len}}, 1);
  Value ends = PerSequence(g, end, {n, len});
  Value has_label = ir::Compare(g, ends, ir::Constant(g, 0, DType::kS64, {n, len}), "GT");
  Value finish = Bin(
      g, "stablehlo.or", ir::Compare(g, pos, ends, "EQ"),
      Bin(g, "stablehlo.and", has_label,
          ir::Compare(g, pos,
                      Bin(g, "stablehlo.subtract", ends, ir::Constant(g, 1, DType::kS64, {n, len})),
                      "EQ")));
  Value valid = ir::Compare(g, pos, ends, "LE");
  Value skip_up = Shift(g, e.skip, -2, ir::Constant(g, 0, DType::kPred, {n, len}));
  Value beta = NegInf(g, {acc, {n, len}});
  Value grads = ir::Constant(g, 0, acc, {steps, n, classes});
  Value lastv = ir::ConstantI64(g, last_step);
  V state{beta, grads, e.lp, e.where, skip_up, finish, valid, la, lpf, lastv, nll, gout, kept};
  V out = For(g, steps - 1, -1, -1, state, [&](Graph& h, Value t, V& s) {
    const Type row{acc, {n, len}};
    auto per_row = [&](Value v, const Dims& dims) { return ir::BroadcastInDim(h, v, dims, {0}); };
    Value b = s[0], lpt = Step(h, s[2], t);
    Value tn = ir::BroadcastInDim(h, t, {n}, {});
    Value begins = ir::Compare(h, tn, s[9], "EQ"), inside = ir::Compare(h, tn, s[9], "LT");
    Value two = ir::Select(h, s[4], ShiftInf(h, b, -2), NegInf(h, row));
    Value rec = Bin(h, "stablehlo.add", LogSumExp(h, {b, ShiftInf(h, b, -1), two}), lpt);
    Value init = ir::Select(h, s[5], lpt, NegInf(h, row));
    Value next = ir::Select(h, per_row(begins, {n, len}), init,
                            ir::Select(h, per_row(inside, {n, len}), rec, NegInf(h, row)));
    next = ir::Select(h, s[6], next, NegInf(h, row));
    // log of sum over s with label c of alpha beta, per class, shifted by each row's maximum.
    Value ab = Bin(h, "stablehlo.add", Step(h, s[7], t), next);
    Value m = ir::Reduce(h, ab, ir::Constant(h, -INFINITY, acc), {1}, "stablehlo.maximum");
    m = ir::Select(h, ir::Compare(h, m, NegInf(h, {acc, {n}}), "EQ"), ir::Constant(h, 0, acc, {n}),
                   m);
    Value scaled = ir::Unary(h, "stablehlo.exponential",
                             Bin(h, "stablehlo.subtract", ab, per_row(m, {n, len})));
    Value sums = ir::Scatter(h, ir::Constant(h, 0, acc, {n, classes}), s[3], scaled, {0, 1}, 0,
                             ir::ScalarRegion(acc, "stablehlo.add"));
    Value lcab =
        Bin(h, "stablehlo.add", ir::Unary(h, "stablehlo.log", sums), per_row(m, {n, classes}));
    Value lp = Step(h, s[8], t);
    Value bias = Bin(h, "stablehlo.subtract",
                     Bin(h, "stablehlo.add", lcab, per_row(s[10], {n, classes})), lp);
    Value gr = Bin(h, "stablehlo.subtract", ir::Unary(h, "stablehlo.exponential", lp),
                   ir::Unary(h, "stablehlo.exponential", bias));
    gr = Bin(h, "stablehlo.multiply", gr, per_row(s[11], {n, classes}));
    Value live = Bin(h, "stablehlo.and", ir::Compare(h, tn, s[9], "LE"), s[12]);
    gr = ir::Select(h, per_row(live, {n, classes}), gr, ir::Constant(h, 0, acc, {n, classes}));
    V r = s;
    r[0] = next;
    r[1] = PutStep(h, s[1], gr, t);
    return r;
  });
  return {Cast(c, out[1], ot.dtype)};
}

}  // namespace

void AddCtcRules(RuleMap& m) {
  m["aten::_ctc_loss"] = CtcLoss;
  m["aten::_ctc_loss_backward"] = CtcLossBackward;
}

}  // namespace tpu::lowering
