// Meta cache: output sizes, strides and dtypes of an op call depend only on its arguments'
// metadata, so a call that looks like an earlier one reuses that Meta result instead of running
// the Meta kernel again (in PyTorch 2.11 many Meta kernels are Python and cost tens of us).
// Only successful calls are cached, so every error is still raised by the Meta kernel.
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

// The cache key of a call, or nullopt when an argument has no metadata we can key on.
// Float scalars enter by type only (their values never change shapes); integers by value.
std::optional<std::string> MetaKey(const c10::OperatorHandle& op,
                                   const std::vector<c10::IValue>& args);

// The cached result for `key`, if any (a copy: the cache may be cleared concurrently).
std::optional<std::vector<TensorMeta>> LookupMeta(const std::string& key);
void StoreMeta(const std::string& key, std::vector<TensorMeta> result);

}  // namespace tpu::aten
