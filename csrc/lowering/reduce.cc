// TODO(family owner): rules for this family.
#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {

void AddReduceRules(RuleMap& m) { (void)m; }

}  // namespace tpu::lowering
