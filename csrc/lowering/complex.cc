// Complex numbers: conj_physical, complex(real, imag), polar(abs, angle). Elementwise arithmetic,
// matmul and reductions take complex operands through their usual rules (StableHLO ops accept
// them); view_as_real/view_as_complex are views (lowering/view.cc reads complex storage as its
// interleaved parts).
#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

V ConjPhysical(Ctx& c) { return {ir::Conj(c.g, Cast(c, c.In("self"), c.out[0].dtype))}; }

// Parts broadcast to the output's shape in its part dtype.
Value Part(Ctx& c, const char* name) {
  return Cast(c, c.In(name), rt::RealOf(c.out[0].dtype), c.out[0].dims);
}

V MakeComplex(Ctx& c) { return {ir::Complex(c.g, Part(c, "real"), Part(c, "imag"))}; }

V Polar(Ctx& c) {
  Value r = Part(c, "abs"), theta = Part(c, "angle");
  return {ir::Complex(c.g, Mul(c, r, ir::Unary(c.g, "stablehlo.cosine", theta)),
                      Mul(c, r, ir::Unary(c.g, "stablehlo.sine", theta)))};
}

}  // namespace

void AddComplexRules(RuleMap& m) {
  m["aten::_conj_physical"] = ConjPhysical;
  m["aten::conj_physical"] = ConjPhysical;
  m["aten::complex"] = MakeComplex;
  m["aten::polar"] = Polar;
}

}  // namespace tpu::lowering
