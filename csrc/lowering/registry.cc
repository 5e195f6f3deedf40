#include <mutex>

#include "lowering/rule_table.h"

namespace tpu::lowering {

namespace {
const RuleMap& Rules() {
  static const RuleMap rules = [] {
    RuleMap m;
    AddElementwiseRules(m);
    AddReduceRules(m);
    AddShapeRules(m);
    AddIndexRules(m);
    AddLinalgRules(m);
    AddNnRules(m);
    AddFactoryRules(m);
    AddResampleRules(m);
    AddSpecialRules(m);
    AddTestingRules(m);
    AddAttentionRules(m);
    AddDecompRules(m);
    AddPolynomialRules(m);
    AddOrderStatRules(m);
    AddMultilabelMarginRules(m);
    AddComplexRules(m);
    AddFftRules(m);
    AddSpecialFunctionRules(m);
    AddEmbeddingBagRules(m);
    AddCtcRules(m);
    AddHistogramRules(m);
    AddIgammaRules(m);
    AddBesselRules(m);
    return m;
  }();
  return rules;
}

Rule Lookup(const std::string& key) {
  auto it = Rules().find(key);
  return it == Rules().end() ? nullptr : it->second;
}
}  // namespace

Rule FindRule(const std::string& name, const std::string& overload) {
  std::string base = name;
  // "aten::add_" is the in-place form of "aten::add"; dunder names are left alone.
  if (base.size() > 1 && base.back() == '_' && base[base.size() - 2] != '_') base.pop_back();
  if (!overload.empty()) {
    if (Rule r = Lookup(base + "." + overload)) return r;
    const std::string suffix = "_out";
    if (overload.size() > suffix.size() &&
        overload.compare(overload.size() - suffix.size(), suffix.size(), suffix) == 0) {
      if (Rule r = Lookup(base + "." + overload.substr(0, overload.size() - suffix.size())))
        return r;
    }
  }
  return Lookup(base);
}

const Arg* Ctx::Find(const std::string& name) const {
  for (const auto& [n, a] : args) {
    if (n == name) return &a;
  }
  return nullptr;
}

bool Ctx::Has(const std::string& name) const {
  const Arg* a = Find(name);
  return a != nullptr && a->kind != Arg::Kind::kNone;
}

namespace {
const Arg& Need(const Ctx& c, const std::string& name) {
  const Arg* a = c.Find(name);
  if (a == nullptr || a->kind == Arg::Kind::kNone)
    throw LoweringError("missing argument '" + name + "'");
  return *a;
}
}  // namespace

Value Ctx::In(const std::string& name) const {
  const Arg& a = Need(*this, name);
  if (a.kind != Arg::Kind::kValue) throw LoweringError("argument '" + name + "' is not a tensor");
  return a.value;
}
std::vector<Value> Ctx::List(const std::string& name) const { return Need(*this, name).values; }
int64_t Ctx::Int(const std::string& name) const { return Need(*this, name).i; }
int64_t Ctx::Int(const std::string& name, int64_t fallback) const {
  return Has(name) ? Find(name)->i : fallback;
}
Dims Ctx::Ints(const std::string& name) const {
  if (!Has(name)) return {};
  const Arg* a = Find(name);
  return a->kind == Arg::Kind::kInt ? Dims{a->i} : a->ints;
}
std::vector<double> Ctx::Doubles(const std::string& name) const {
  return Has(name) ? Find(name)->doubles : std::vector<double>{};
}
double Ctx::Double(const std::string& name, double fallback) const {
  if (!Has(name)) return fallback;
  const Arg* a = Find(name);
  return a->kind == Arg::Kind::kInt ? static_cast<double>(a->i) : a->d;
}
bool Ctx::Bool(const std::string& name, bool fallback) const {
  return Has(name) ? Find(name)->b : fallback;
}
std::string Ctx::Str(const std::string& name, const std::string& fallback) const {
  return Has(name) ? Find(name)->s : fallback;
}
DType Ctx::Dtype(const std::string& name, DType fallback) const {
  return Has(name) ? Find(name)->dtype : fallback;
}

}  // namespace tpu::lowering
