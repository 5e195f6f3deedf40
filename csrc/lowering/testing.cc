// Rules for test-only ops (see aten/testing_ops.cc).
#include "lowering/rule_table.h"

namespace tpu::lowering {

void AddTestingRules(RuleMap& m) {
  m["torchtpu::_invalid_program"] = +[](Ctx& c) {
    return std::vector<Value>{c.g.Op1("stablehlo.this_op_does_not_exist", {c.In("x")}, c.out[0])};
  };
}

}  // namespace tpu::lowering
