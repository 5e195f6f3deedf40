// nn.functional.embedding_bag: _embedding_bag (and its forward-only twin), its dense backward
// and the per_sample_weights backward. Each index belongs to the bag of the last offset at or
// before it (a running count of the offsets); with include_last_offset the last offset closes
// the last bag (it is the indices' length in the CSR layout the flag stands for). Indices equal to
// padding_idx take no part, nor count in a mean's size. Bags are scatters of the gathered rows, so
// the memory is that of the rows, whatever the number of bags.
#include <cmath>
#include <string>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

enum Mode { kSum = 0, kMean = 1, kMax = 2 };

Value Flat(Ctx& c, Value x) { return ir::Reshape(c.g, x, {c.T(x).numel()}); }
Value AddRegionScatter(Ctx& c, Value into, Value at, Value updates) {
  return ir::Scatter(c.g, into, AsVector(c, at), updates, {0}, 0,
                     ir::ScalarRegion(c.T(into).dtype, "stablehlo.add"));
}

// Which indices take part: not padding, and in a bag (bag < bags).
Value Kept(Ctx& c, Value rows, Value bag, int64_t bags, int64_t pad) {
  const Dims& d = c.T(rows).dims;
  Value keep =
      ir::Compare(c.g, bag, ir::Constant(c.g, static_cast<double>(bags), DType::kS64, d), "LT");
  if (pad < 0) return keep;
  return ir::Binary(
      c.g, "stablehlo.and", keep,
      ir::Compare(c.g, rows, ir::Constant(c.g, static_cast<double>(pad), DType::kS64, d), "NE"));
}

// The rows of `table` ([R, D]) that `at` ([L]) names, each scaled by `scale` ([L]) when given.
Value Rows(Ctx& c, Value table, Value at, Value scale = -1) {
  Value r = ir::Gather(c.g, table, AsVector(c, at), {0}, 0);
  if (scale < 0) return r;
  return ir::Binary(c.g, "stablehlo.multiply", r, ir::BroadcastInDim(c.g, scale, c.T(r).dims, {0}));
}

// x ([L, D]) where keep ([L]) holds, else 0.
Value Masked(Ctx& c, Value keep, Value x) {
  const Type t = c.T(x);
  return ir::Select(c.g, ir::BroadcastInDim(c.g, keep, t.dims, {0}), x, Splat(c, 0, t));
}

// Outputs: [B, D] result, offset2bag [L], bag_size, max_indices (shapes as Meta gives them).
V EmbeddingBag(Ctx& c) {
  V res;
  for (const Type& t : c.out) res.push_back(Splat(c, 0, t));
  const Type wt = c.T(c.In("weight"));
  const int64_t num_rows = wt.dims[0], width = wt.dims[1];
  const int64_t mode = c.Int("mode", kSum), pad = c.Int("padding_idx", -1);
  Value ind = c.In("indices");
  Value off = Flat(c, Cast(c, c.In("offsets"), DType::kS64));
  const int64_t n = c.T(ind).numel(), o = c.T(off).numel();
  const int64_t bags = c.out[0].dims[0];
  ExpectIndex(c, ind, num_rows, false, "IndexError", "index out of range in self");
  if (o > 0) {
    Value first = ir::Reshape(c.g, ir::Slice(c.g, off, {0}, {1}), {});
    Expect(c, ir::Compare(c.g, first, ir::Constant(c.g, 0, DType::kS64, {}), "EQ"), first,
           "RuntimeError",
           "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
           "position 0. However, got {}");
    Value last = ir::Reshape(c.g, ir::Slice(c.g, off, {o - 1}, {o}), {});
    Expect(c,
           ir::Compare(c.g, last, ir::Constant(c.g, static_cast<double>(n), DType::kS64, {}), "LE"),
           last, "RuntimeError",
           "offsets[-1] can not be greater than input's length " + std::to_string(n) +
               " but got offsets[-1] of {}");
  }
  if (n == 0 || bags == 0) return res;
  DType acc = AccOf(c.out[0].dtype);
  Value rows = Flat(c, Cast(c, ind, DType::kS64));
  // marks[p]: how many offsets are p; a bag is their running count - 1 (bags and beyond: none).
  Value marks = AddRegionScatter(c, ir::Constant(c.g, 0, DType::kS64, {n}), off,
                                 ir::Constant(c.g, 1, DType::kS64, {o}));
  Value bag = CallRule(c, "aten::cumsum", "", {{"self", ValueArg(marks)}, {"dim", IntArg(0)}},
                       {Type{DType::kS64, {n}}})[0];
  bag = ir::Binary(c.g, "stablehlo.subtract", bag, ir::Constant(c.g, 1, DType::kS64, {n}));
  Value keep = Kept(c, rows, bag, bags, pad);
  Value psw = c.Has("per_sample_weights") ? Flat(c, Cast(c, c.In("per_sample_weights"), acc)) : -1;
  Value r = Rows(c, Cast(c, c.In("weight"), acc), rows, psw);
  Value size = AddRegionScatter(c, ir::Constant(c.g, 0, DType::kS64, {bags}), bag,
                                ir::Convert(c.g, keep, DType::kS64));
  Value nonempty = ir::Compare(c.g, size, ir::Constant(c.g, 0, DType::kS64, {bags}), "GT");
  Value out;
  if (mode == kMax) {
    Value lowest = ir::Constant(c.g, -INFINITY, acc, {bags, width});
    Value dropped = ir::Select(c.g, ir::BroadcastInDim(c.g, keep, {n, width}, {0}), r,
                               ir::Constant(c.g, -INFINITY, acc, {n, width}));
    out = ir::Scatter(c.g, lowest, AsVector(c, bag), dropped, {0}, 0,
                      ir::ScalarRegion(acc, "stablehlo.maximum"));
    // The first index in its bag that reaches the maximum (CPU updates on a strictly larger one).
    Value hit = ir::Compare(
        c.g, dropped,
        Rows(c, out, ir::Select(c.g, keep, bag, ir::Constant(c.g, 0, DType::kS64, {n}))), "EQ");
    hit = ir::Binary(c.g, "stablehlo.and", hit, ir::BroadcastInDim(c.g, keep, {n, width}, {0}));
    Value pos = ir::Select(c.g, hit, ir::Iota(c.g, {DType::kS64, {n, width}}, 0),
                           ir::Constant(c.g, static_cast<double>(n), DType::kS64, {n, width}));
    Value first = ir::Scatter(
        c.g, ir::Constant(c.g, static_cast<double>(n), DType::kS64, {bags, width}),
        AsVector(c, bag), pos, {0}, 0, ir::ScalarRegion(DType::kS64, "stablehlo.minimum"));
    Value at = Flat(c, ir::Clamp(c.g, ir::Constant(c.g, 0, DType::kS64, {}), first,
                                 ir::Constant(c.g, static_cast<double>(n - 1), DType::kS64, {})));
    Value arg = ir::Reshape(c.g, ir::Gather(c.g, rows, AsVector(c, at), {0}, 0), {bags, width});
    Value full = ir::BroadcastInDim(c.g, nonempty, {bags, width}, {0});
    out = ir::Select(c.g, full, out, ir::Constant(c.g, 0, acc, {bags, width}));
    if (c.out[3].dims == Dims{bags, width}) {
      res[3] = ir::Select(c.g, full, arg, ir::Constant(c.g, 0, DType::kS64, {bags, width}));
    }
  } else {
    out = AddRegionScatter(c, ir::Constant(c.g, 0, acc, {bags, width}), bag, Masked(c, keep, r));
    if (mode == kMean) {
      Value denom = ir::Convert(c.g,
                                ir::Clamp(c.g, ir::Constant(c.g, 1, DType::kS64, {}), size,
                                          ir::Constant(c.g, 9e18, DType::kS64, {})),
                                acc);
      out = ir::Binary(c.g, "stablehlo.divide", out,
                       ir::BroadcastInDim(c.g, denom, {bags, width}, {0}));
    }
  }
  res[0] = Cast(c, out, c.out[0].dtype);
  if (c.out[1].numel() == n) res[1] = Cast(c, bag, c.out[1].dtype);
  const int64_t sizes = c.out[2].numel();
  if (sizes > 0 && c.out[2].rank() == 1) {
    Value s = ir::Slice(c.g, size, {0}, {std::min(sizes, bags)});
    if (sizes > bags)
      s = ir::Concat(c.g, {s, ir::Constant(c.g, 0, DType::kS64, {sizes - bags})}, 0);
    res[2] = Cast(c, s, c.out[2].dtype);
  }
  return res;
}

// grad_weight [num_weights, D] from grad [B, D] and the forward's offset2bag, bag_size and
// max_indices.
V EmbeddingBagDenseBackward(Ctx& c) {
  const Type& ot = c.out[0];
  const int64_t num_rows = ot.dims[0], width = ot.dims[1];
  DType acc = AccOf(ot.dtype);
  Value grad = Cast(c, c.In("grad"), acc);
  const int64_t bags = c.T(grad).dims[0];
  const int64_t mode = c.Int("mode", kSum), pad = c.Int("padding_idx", -1);
  Value zeros = ir::Constant(c.g, 0, acc, {num_rows, width});
  if (mode == kMax) {
    Value mi = Cast(c, c.In("maximum_indices"), DType::kS64);
    if (c.T(mi).dims != Dims{bags, width} || bags == 0) return {Cast(c, zeros, ot.dtype)};
    Value coords = ir::Concat(
        c.g, {AsVector(c, mi), AsVector(c, ir::Iota(c.g, {DType::kS64, {bags, width}}, 1))}, 2);
    Value size = Cast(c, c.In("bag_size"), DType::kS64);
    Value live = ir::Compare(c.g, ir::Slice(c.g, size, {0}, {bags}),
                             ir::Constant(c.g, 0, DType::kS64, {bags}), "GT");
    Value g = ir::Select(c.g, ir::BroadcastInDim(c.g, live, {bags, width}, {0}), grad,
                         ir::Constant(c.g, 0, acc, {bags, width}));
    return {Cast(
        c, ir::Scatter(c.g, zeros, coords, g, {0, 1}, 0, ir::ScalarRegion(acc, "stablehlo.add")),
        ot.dtype)};
  }
  Value rows = Flat(c, Cast(c, c.In("indices"), DType::kS64));
  const int64_t n = c.T(rows).numel();
  if (n == 0 || bags == 0) return {Cast(c, zeros, ot.dtype)};
  Value bag = Flat(c, Cast(c, c.In("offset2bag"), DType::kS64));
  Value keep = Kept(c, rows, bag, bags, pad);
  Value safe = ir::Select(c.g, keep, bag, ir::Constant(c.g, 0, DType::kS64, {n}));
  Value scale = -1;
  if (mode == kMean) {
    Value size = ir::Convert(c.g, Cast(c, c.In("bag_size"), DType::kS64), acc);
    Value per = ir::Gather(c.g, size, AsVector(c, safe), {0}, 0);
    scale = ir::Binary(
        c.g, "stablehlo.divide", ir::Constant(c.g, 1, acc, {n}),
        ir::Clamp(c.g, ir::Constant(c.g, 1, acc, {}), per, ir::Constant(c.g, 1e300, acc, {})));
  }
  if (c.Has("per_sample_weights")) {
    Value psw = Flat(c, Cast(c, c.In("per_sample_weights"), acc));
    scale = scale < 0 ? psw : ir::Binary(c.g, "stablehlo.multiply", scale, psw);
  }
  if (c.Bool("scale_grad_by_freq", false)) {
    Value counts = AddRegionScatter(c, ir::Constant(c.g, 0, acc, {num_rows}), rows,
                                    ir::Constant(c.g, 1, acc, {n}));
    Value inv = ir::Binary(c.g, "stablehlo.divide", ir::Constant(c.g, 1, acc, {n}),
                           ir::Gather(c.g, counts, AsVector(c, rows), {0}, 0));
    scale = scale < 0 ? inv : ir::Binary(c.g, "stablehlo.multiply", scale, inv);
  }
  Value g = Masked(c, keep, Rows(c, grad, safe, scale));
  return {Cast(c, AddRegionScatter(c, zeros, rows, g), ot.dtype)};
}

// d/d per_sample_weights[i] = grad[bag(i)] . weight[indices[i]] (sum mode only).
V EmbeddingBagPerSampleWeightsBackward(Ctx& c) {
  const Type& ot = c.out[0];
  DType acc = AccOf(ot.dtype);
  Value grad = Cast(c, c.In("grad"), acc);
  const int64_t bags = c.T(grad).dims[0];
  Value rows = Flat(c, Cast(c, c.In("indices"), DType::kS64));
  const int64_t n = c.T(rows).numel();
  if (n == 0 || bags == 0) return {Splat(c, 0, ot)};
  Value bag = Flat(c, Cast(c, c.In("offset2bag"), DType::kS64));
  Value keep = Kept(c, rows, bag, bags, c.Int("padding_idx", -1));
  Value safe = ir::Select(c.g, keep, bag, ir::Constant(c.g, 0, DType::kS64, {n}));
  Value prod = ir::Binary(c.g, "stablehlo.multiply", Rows(c, grad, safe),
                          Rows(c, Cast(c, c.In("weight"), acc), rows));
  Value dot = ir::Reduce(c.g, prod, ir::Constant(c.g, 0, acc, {}), {1}, "stablehlo.add");
  return {Cast(c, ir::Select(c.g, keep, dot, ir::Constant(c.g, 0, acc, {n})), ot.dtype)};
}

}  // namespace

void AddEmbeddingBagRules(RuleMap& m) {
  m["aten::_embedding_bag"] = EmbeddingBag;
  m["aten::_embedding_bag_forward_only"] = EmbeddingBag;
  m["aten::_embedding_bag_backward"] = +[](Ctx& c) {
    if (c.Bool("sparse", false)) throw LoweringError("sparse gradients are not supported");
    return EmbeddingBagDenseBackward(c);
  };
  m["aten::_embedding_bag_dense_backward"] = EmbeddingBagDenseBackward;
  m["aten::_embedding_bag_per_sample_weights_backward"] = EmbeddingBagPerSampleWeightsBackward;
}

}  // namespace tpu::lowering
