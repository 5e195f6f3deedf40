// Meta cache: output sizes, strides and dtypes of an op call depend only on its arguments'
// metadata, so a call that looks like an earlier one reuses that Meta result instead of running
// the Meta kernel again (in PyTorch 2.11 many Meta kernels are Python and cost tens of us).
// Only successful calls are cached, and a float whose value a Meta kernel may check is part of
// the key, so every error is still raised by the Meta kernel.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <vector>

namespace tpu::aten {

struct TensorMeta {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  at::ScalarType dtype;
  bool defined = true;            // backward ops return undefined tensors for outputs not asked for
  std::optional<int64_t> scalar;  // an int/SymInt return (attention's max_q), not a tensor
};

// Appends a non-tensor argument, or the tensors in it through `tensor` (which says whether it
// could key the tensor), to a key. Doubles enter by value when `by_value` (else by type only);
// generators and complex numbers then make the call unkeyable. Returns whether it could key `v`.
template <class TensorFn>
bool AppendKey(std::string& out, const c10::IValue& v, bool by_value, TensorFn&& tensor) {
  auto i64 = [&](int64_t x) { out.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  if (v.isNone()) {
    out.push_back('n');
  } else if (v.isTensor()) {
    return tensor(v.toTensor());
  } else if (v.isTensorList()) {
    out.push_back('L');
    i64(static_cast<int64_t>(v.toTensorList().size()));
    for (const at::Tensor& t : v.toTensorList()) {
      if (!tensor(t)) return false;
    }
  } else if (v.isOptionalTensorList()) {
    out.push_back('O');
    for (std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      if (!tensor(t ? *t : at::Tensor())) return false;
    }
    out.push_back(';');
  } else if (v.isDouble()) {
    out.push_back('d');
    double d = v.toDouble();
    if (by_value) out.append(reinterpret_cast<const char*>(&d), sizeof(d));
  } else if (v.isInt() || v.isSymInt()) {
    out.push_back('i');
    i64(v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__));
  } else if (v.isBool()) {
    out.push_back('b');
    i64(v.toBool());
  } else if (v.isIntList()) {
    out.push_back('I');
    for (int64_t x : v.toIntVector()) i64(x);
    out.push_back(';');
  } else if (v.isBoolList()) {
    out.push_back('B');
    for (bool x : v.toBoolList()) i64(x);
    out.push_back(';');
  } else if (v.isString()) {
    out.push_back('s');
    out += v.toStringRef();
    out.push_back(';');
  } else if (v.isDevice()) {
    out.push_back('D');
    i64(static_cast<int64_t>(v.toDevice().type()) * 1024 + v.toDevice().index());
  } else if (!by_value && (v.isGenerator() || v.isComplexDouble())) {
    out.push_back(v.isGenerator() ? 'g' : 'c');
  } else {
    return false;  // lists of symints or doubles, ...: not worth keying
  }
  return true;
}

// The cache key of a call, or nullopt when an argument has no metadata we can key on.
// Integers enter by value; floats by type only for pointwise and _foreach_ ops, else by value.
std::optional<std::string> MetaKey(const c10::OperatorHandle& op,
                                   const std::vector<c10::IValue>& args);

// The cached result for `key`, if any (a copy: the cache may be cleared concurrently).
std::optional<std::vector<TensorMeta>> LookupMeta(const std::string& key);
void StoreMeta(const std::string& key, std::vector<TensorMeta> result);

}  // namespace tpu::aten
