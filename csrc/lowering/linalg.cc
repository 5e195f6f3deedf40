// Matrix products: mm, bmm, addmm, baddbmm, addbmm, dot, vdot, mv, addmv.
#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// Half types accumulate in f32, as PyTorch's CPU gemm does; the result is rounded once.

// a x b contracted over (lc, rc) with batch dims (lb, rb), in the accumulation dtype.
// conj_a conjugates a first (vdot).
Value Product(Ctx& c, const char* a, const char* b, const Dims& lb, const Dims& rb, const Dims& lc,
              const Dims& rc, const Dims& out_dims, bool conj_a = false) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In(a), acc), y = Cast(c, c.In(b), acc);
  if (conj_a) x = ir::Conj(c.g, x);
  if (acc == DType::kPred) throw LoweringError("matmul of bool tensors");
  return ir::DotGeneralHighest(c.g, x, y, lb, rb, lc, rc, Type{acc, out_dims});
}

// beta * self + alpha * prod; beta == 0 ignores self (NaN in self does not propagate).
V AddProduct(Ctx& c, Value prod) {
  DType acc = c.T(prod).dtype;
  const Dims& dims = c.out[0].dims;
  if (c.Has("alpha")) {
    prod = ir::Binary(c.g, "stablehlo.multiply", prod, Cast(c, c.In("alpha"), acc, dims));
  }
  Value self = Cast(c, c.In("self"), acc, dims);
  if (c.Has("beta")) {
    Value beta = Cast(c, c.In("beta"), acc, dims);
    Value scaled = ir::Binary(c.g, "stablehlo.multiply", self, beta);
    self =
        ir::Select(c.g, ir::Compare(c.g, beta, Splat(c, 0, beta), "EQ"), Splat(c, 0, beta), scaled);
  }
  return {Cast(c, ir::Binary(c.g, "stablehlo.add", self, prod), c.out[0].dtype)};
}

V Finish(Ctx& c, Value prod) { return {Cast(c, prod, c.out[0].dtype)}; }

Dims Shape(Ctx& c, const char* name) { return c.T(c.In(name)).dims; }

V Mm(Ctx& c) { return Finish(c, Product(c, "self", "mat2", {}, {}, {1}, {0}, c.out[0].dims)); }
V Bmm(Ctx& c) { return Finish(c, Product(c, "self", "mat2", {0}, {0}, {2}, {1}, c.out[0].dims)); }
V Dot(Ctx& c, const char* other, bool conj_self) {
  return Finish(c, Product(c, "self", other, {}, {}, {0}, {0}, {}, conj_self));
}
V Mv(Ctx& c) { return Finish(c, Product(c, "self", "vec", {}, {}, {1}, {0}, c.out[0].dims)); }

V Addmm(Ctx& c) {
  Dims d{Shape(c, "mat1")[0], Shape(c, "mat2")[1]};
  return AddProduct(c, Product(c, "mat1", "mat2", {}, {}, {1}, {0}, d));
}
V Addmv(Ctx& c) {
  return AddProduct(c, Product(c, "mat", "vec", {}, {}, {1}, {0}, {Shape(c, "mat")[0]}));
}
V Baddbmm(Ctx& c) {
  Dims a = Shape(c, "batch1"), b = Shape(c, "batch2");
  return AddProduct(c, Product(c, "batch1", "batch2", {0}, {0}, {2}, {1}, {a[0], a[1], b[2]}));
}
// Sums the batch of products: contract over the batch dim as well.
V Addbmm(Ctx& c) {
  Dims a = Shape(c, "batch1"), b = Shape(c, "batch2");
  return AddProduct(c, Product(c, "batch1", "batch2", {}, {}, {0, 2}, {0, 1}, {a[1], b[2]}));
}

}  // namespace

void AddLinalgRules(RuleMap& m) {
  m["aten::addbmm"] = Addbmm;
  m["aten::addmm"] = Addmm;
  m["aten::addmv"] = Addmv;
  m["aten::baddbmm"] = Baddbmm;
  m["aten::bmm"] = Bmm;
  m["aten::dot"] = +[](Ctx& c) { return Dot(c, "tensor", false); };
  m["aten::mm"] = Mm;
  m["aten::mv"] = Mv;
  m["aten::vdot"] = +[](Ctx& c) { return Dot(c, "other", true); };
}

}  // namespace tpu::lowering
