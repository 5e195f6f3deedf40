#include "aten/meta_cache.h"

#include <mutex>
#include <unordered_map>

namespace tpu::aten {

namespace {

struct KeyWriter {
  std::string out;
  bool float_values = false;  // key float Scalars by value, not by type only
  void Bytes(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  void Int(int64_t v) { Bytes(&v, sizeof(v)); }
  void Tag(char c) { out.push_back(c); }
  void Tensor(const at::Tensor& t) {
    if (!t.defined()) return Tag('u');
    Tag('t');
    Int(static_cast<int64_t>(t.scalar_type()));
    Int(static_cast<int64_t>(t.device().type()));
    Int(t.unsafeGetTensorImpl()->is_wrapped_number());
    Int(t.dim());
    for (int64_t s : t.sizes()) Int(s);
    for (int64_t s : t.strides()) Int(s);
  }
  bool Value(const c10::IValue& v) {
    return AppendKey(out, v, float_values, [&](const at::Tensor& t) { return Tensor(t), true; });
  }
};

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::vector<TensorMeta>> map;
};

Cache& TheCache() {
  static Cache c;
  return c;
}

}  // namespace

std::optional<std::string> MetaKey(const c10::OperatorHandle& op,
                                   const std::vector<c10::IValue>& args) {
  KeyWriter w;
  const std::string& name = op.schema().name();
  // Pointwise ops (and the optimizers' _foreach_ ones) only compute with their float Scalars,
  // which change every step under a learning-rate schedule. Other Meta kernels may check a
  // float's value (normal_'s std >= 0, huber_loss's delta > 0) or size an output by it
  // (arange): their floats enter by value, or a cached success would hide a later error.
  w.float_values = !op.hasTag(at::Tag::pointwise) && name.compare(0, 15, "aten::_foreach_") != 0;
  const void* id = &op.schema();
  w.Bytes(&id, sizeof(id));
  for (const auto& v : args) {
    if (!w.Value(v)) return std::nullopt;
  }
  return std::move(w.out);
}

std::optional<std::vector<TensorMeta>> LookupMeta(const std::string& key) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.map.find(key);
  if (it == c.map.end()) return std::nullopt;
  return it->second;
}

void StoreMeta(const std::string& key, std::vector<TensorMeta> result) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.map.size() > 65536) c.map.clear();  // bounded; shapes in a program are few
  c.map.emplace(key, std::move(result));
}

}  // namespace tpu::aten
