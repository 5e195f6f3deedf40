// What a lowering rule sees: IR values and plain attributes, never an at::Tensor.
// A rule maps one ATen op (keyed by its schema name) to StableHLO built with ir/builder.h.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ir/builder.h"

namespace tpu::lowering {

using ir::Dims;
using ir::Graph;
using ir::Type;
using ir::Value;
using rt::DType;

// One argument of the ATen call. Tensors and Scalars arrive as values (graph parameters).
struct Arg {
  enum class Kind {
    kNone,
    kValue,
    kValues,
    kInt,
    kInts,
    kDouble,
    kDoubles,
    kBool,
    kString,
    kDType
  };
  Kind kind = Kind::kNone;
  Value value = -1;
  std::vector<Value> values;  // Tensor[] and Tensor?[] (absent entries are -1)
  int64_t i = 0;
  Dims ints;
  double d = 0;
  std::vector<double> doubles;  // float[] (histogram's range)
  bool b = false;
  std::string s;
  DType dtype = DType::kInvalid;
  // A Scalar argument's host value (the value itself still enters as a parameter): rules may
  // specialize on the few values that have much cheaper forms (pow(x, 2) is x * x).
  bool has_host_scalar = false;
  double host_scalar = 0;
};

// Raised for inputs a rule cannot lower; the dispatcher reports it with the op's name.
class LoweringError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised for arguments PyTorch's CPU kernel rejects on their host values (a sample count, a
// range): the dispatcher raises RuntimeError with PyTorch's message.
class ArgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value check of the op's inputs (an index in range, a valid probability), computed in the
// op's program like CUDA's device-side asserts, but recoverable: the op raises `type` with
// `message` (PyTorch's text; "{}" stands for `quoted`, the first failing element's value).
struct Check {
  Value failed;       // pred scalar
  Value quoted = -1;  // s64 scalar, or -1
  std::string type;   // "IndexError" or "RuntimeError"
  std::string message;
};

struct Ctx {
  Graph& g;
  std::vector<std::pair<std::string, Arg>> args;  // in schema order
  std::vector<Type> out;                          // result types, computed by the Meta kernel
  DType common = DType::kInvalid;                 // PyTorch's result_type over inputs
  int64_t random_seed = 0;                        // for Generator? args (see random rules)
  std::vector<Check> checks = {};                 // added by rules; see lowering/helpers.h

  const Arg* Find(const std::string& name) const;
  bool Has(const std::string& name) const;  // present and not None
  Value In(const std::string& name) const;
  std::vector<Value> List(const std::string& name) const;
  int64_t Int(const std::string& name) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  Dims Ints(const std::string& name) const;
  std::vector<double> Doubles(const std::string& name) const;
  double Double(const std::string& name, double fallback) const;
  bool Bool(const std::string& name, bool fallback) const;
  std::string Str(const std::string& name, const std::string& fallback) const;
  DType Dtype(const std::string& name, DType fallback) const;
  const Type& T(Value v) const { return g.type(v); }
};

using Rule = std::vector<Value> (*)(Ctx&);

// Looks up "aten::name.overload", then the overload without "_out", then "aten::name".
// In-place names ("add_") map to their functional rule.
Rule FindRule(const std::string& name, const std::string& overload);

}  // namespace tpu::lowering
