// multilabel_margin_loss, forward and backward. Each row's targets are the class indices before
// its first -1; the loss sums max(0, 1 - x[target] + x[i]) over its targets and the classes i
// that are not targets, divided by the class count. Computed as [N, K, C] masks (K target slots
// by C classes), in float for half types.
#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

struct Labels {
  int64_t n, classes;
  Value x;       // [N, C] input
  Value slot;    // [N, K, C] pred: slot k is a target and names class c
  Value target;  // [N, C] pred: class c is one of the row's targets
  Value picked;  // [N, K] x at the class slot k names (0 where k is not a target)
};

Labels Prepare(Ctx& c) {
  Value x = c.In("self");
  const Type& xt = c.T(x);
  int64_t classes = xt.rank() == 0 ? 1 : xt.dims.back();
  int64_t n = xt.rank() == 2 ? xt.dims[0] : 1;
  x = ir::Reshape(c.g, Cast(c, x, AccOf(xt.dtype)), {n, classes});
  Value t = ir::Reshape(c.g, Cast(c, c.In("target"), DType::kS64), {n, classes});
  Value ok = ir::Binary(c.g, "stablehlo.and", ir::Compare(c.g, t, Splat(c, -1, t), "GE"),
                        ir::Compare(c.g, t, Splat(c, static_cast<double>(classes), t), "LT"));
  Expect(c, ok, -1, "RuntimeError", "argument #2 'target' is out of range");
  // Slots before the row's first -1 hold targets.
  Type nk{DType::kS64, {n, classes}};
  Value k = ir::Iota(c.g, nk, 1);
  Value end = ir::Select(c.g, ir::Compare(c.g, t, Splat(c, -1, t), "EQ"), k,
                         Splat(c, static_cast<double>(classes), nk));
  end = ir::Reduce(c.g, end, ir::Constant(c.g, static_cast<double>(classes), DType::kS64), {1},
                   "stablehlo.minimum");
  Value valid = ir::Compare(c.g, k, ir::BroadcastInDim(c.g, end, nk.dims, {0}), "LT");
  Dims cube{n, classes, classes};
  Value cls = ir::Iota(c.g, {DType::kS64, cube}, 2);
  Value slot = ir::Binary(c.g, "stablehlo.and",
                          ir::Compare(c.g, ir::BroadcastInDim(c.g, t, cube, {0, 1}), cls, "EQ"),
                          ir::BroadcastInDim(c.g, valid, cube, {0, 1}));
  Value target = ir::Reduce(c.g, slot, ir::Constant(c.g, 0, DType::kPred), {1}, "stablehlo.or");
  Value xs = ir::BroadcastInDim(c.g, x, cube, {0, 2});
  Value picked = SumDim(c, ir::Select(c.g, slot, xs, Splat(c, 0, c.T(xs))), 2);
  return {n, classes, x, slot, target, picked};
}

// [N, K, C] pred: the margin of target slot k against non-target class c is active.
Value Active(Ctx& c, const Labels& l, Value* margin) {
  Dims cube{l.n, l.classes, l.classes};
  Value z = Add(c,
                Sub(c, Splat(c, 1, Type{c.T(l.x).dtype, cube}),
                    ir::BroadcastInDim(c.g, l.picked, cube, {0, 1})),
                ir::BroadcastInDim(c.g, l.x, cube, {0, 2}));
  Value slot_used =
      ir::Reduce(c.g, l.slot, ir::Constant(c.g, 0, DType::kPred), {2}, "stablehlo.or");
  Value on =
      ir::Binary(c.g, "stablehlo.and", ir::BroadcastInDim(c.g, slot_used, cube, {0, 1}),
                 ir::Unary(c.g, "stablehlo.not", ir::BroadcastInDim(c.g, l.target, cube, {0, 2})));
  on = ir::Binary(c.g, "stablehlo.and", on, ir::Compare(c.g, z, Splat(c, 0, c.T(z)), "GT"));
  *margin = z;
  return on;
}

V Forward(Ctx& c) {
  Labels l = Prepare(c);
  Value z;
  Value on = Active(c, l, &z);
  Value per_row = SumDim(c, SumDim(c, ir::Select(c.g, on, z, Splat(c, 0, c.T(z))), 2), 1);
  per_row = Div(c, per_row, Splat(c, static_cast<double>(l.classes), c.T(per_row)));
  int64_t red = c.Int("reduction", 1);
  Value loss = per_row;
  if (red != 0) {
    loss = SumDim(c, per_row, 0);
    if (red == 1) loss = Div(c, loss, Splat(c, static_cast<double>(l.n), c.T(loss)));
  }
  return {ir::Reshape(c.g, Cast(c, loss, c.out[0].dtype), c.out[0].dims),
          ir::Reshape(c.g, Cast(c, l.target, c.out[1].dtype), c.out[1].dims)};
}

// d/dx[c] = (number of active margins against class c - active margins of the slots that name
// class c) * grad / C.
V Backward(Ctx& c) {
  Labels l = Prepare(c);
  Value z;
  Value on = Cast(c, Active(c, l, &z), c.T(l.x).dtype);
  Value against = SumDim(c, on, 1);   // [N, C]
  Value per_slot = SumDim(c, on, 2);  // [N, K]
  Dims cube{l.n, l.classes, l.classes};
  Value named = SumDim(c,
                       ir::Select(c.g, l.slot, ir::BroadcastInDim(c.g, per_slot, cube, {0, 1}),
                                  Splat(c, 0, Type{c.T(l.x).dtype, cube})),
                       1);  // [N, C]
  Value g = Cast(c, c.In("grad_output"), c.T(l.x).dtype);
  int64_t red = c.Int("reduction", 1);
  Type nc = c.T(l.x);
  if (red == 0 && c.T(g).numel() == l.n && c.T(g).rank() == 1) {
    g = ir::BroadcastInDim(c.g, g, nc.dims, {0});
  } else {
    g = ir::BroadcastInDim(c.g, ir::Reshape(c.g, g, {}), nc.dims, {});
    if (red == 1) g = Div(c, g, Splat(c, static_cast<double>(l.n), nc));
  }
  Value r = Mul(c, Sub(c, against, named), Div(c, g, Splat(c, static_cast<double>(l.classes), nc)));
  return {ir::Reshape(c.g, Cast(c, r, c.out[0].dtype), c.out[0].dims)};
}

}  // namespace

void AddMultilabelMarginRules(RuleMap& m) {
  m["aten::multilabel_margin_loss_forward"] = Forward;
  m["aten::multilabel_margin_loss_backward"] = Backward;
}

}  // namespace tpu::lowering
