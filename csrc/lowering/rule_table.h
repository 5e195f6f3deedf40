// The table each rule family fills; registry.cc calls every Add*Rules once.
#pragma once

#include <string>
#include <unordered_map>

#include "lowering/rule.h"

namespace tpu::lowering {

using RuleMap = std::unordered_map<std::string, Rule>;

void AddElementwiseRules(RuleMap& m);
void AddReduceRules(RuleMap& m);
void AddShapeRules(RuleMap& m);
void AddIndexRules(RuleMap& m);
void AddLinalgRules(RuleMap& m);
void AddNnRules(RuleMap& m);
void AddFactoryRules(RuleMap& m);
void AddResampleRules(RuleMap& m);
void AddSpecialRules(RuleMap& m);
void AddTestingRules(RuleMap& m);
void AddAttentionRules(RuleMap& m);
void AddDecompRules(RuleMap& m);
void AddPolynomialRules(RuleMap& m);
void AddOrderStatRules(RuleMap& m);
void AddMultilabelMarginRules(RuleMap& m);
void AddComplexRules(RuleMap& m);
void AddFftRules(RuleMap& m);
void AddSpecialFunctionRules(RuleMap& m);
void AddEmbeddingBagRules(RuleMap& m);
void AddCtcRules(RuleMap& m);
void AddHistogramRules(RuleMap& m);
void AddIgammaRules(RuleMap& m);
void AddBesselRules(RuleMap& m);

}  // namespace tpu::lowering
