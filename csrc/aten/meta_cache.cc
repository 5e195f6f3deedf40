#include "aten/meta_cache.h"

#include <mutex>
#include <unordered_map>

namespace tpu::aten {

namespace {

struct KeyWriter {
  std::string out;
  bool float_values = false;  // float Scalars set the output size (arange): key them by value
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
    if (v.isNone()) {
      Tag('n');
    } else if (v.isTensor()) {
      Tensor(v.toTensor());
    } else if (v.isTensorList()) {
      Tag('L');
      Int(static_cast<int64_t>(v.toTensorList().size()));
      for (const at::Tensor& t : v.toTensorList()) Tensor(t);
    } else if (v.isOptionalTensorList()) {
      Tag('O');
      for (std::optional<at::Tensor> t : v.toOptionalTensorList()) t ? Tensor(*t) : Tag('u');
    } else if (v.isDouble()) {
      Tag('d');
      if (float_values) {
        double d = v.toDouble();
        Bytes(&d, sizeof(d));
      }
    } else if (v.isInt()) {
      Tag('i');
      Int(v.toInt());
    } else if (v.isBool()) {
      Tag('b');
      Int(v.toBool());
    } else if (v.isSymInt()) {
      Tag('i');
      Int(v.toSymInt().guard_int(__FILE__, __LINE__));
    } else if (v.isIntList()) {
      Tag('I');
      for (int64_t x : v.toIntVector()) Int(x);
      Tag(';');
    } else if (v.isBoolList()) {
      Tag('B');
      for (bool x : v.toBoolList()) Int(x);
      Tag(';');
    } else if (v.isString()) {
      Tag('s');
      out += v.toStringRef();
      Tag(';');
    } else if (v.isDevice()) {
      Tag('D');
      Int(static_cast<int64_t>(v.toDevice().type()));
      Int(v.toDevice().index());
    } else if (v.isGenerator()) {
      Tag('g');
    } else if (v.isComplexDouble()) {
      Tag('c');
    } else {
      return false;  // lists of symints, doubles, ...: not worth keying
    }
    return true;
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
  w.float_values = name == "aten::arange" || name == "aten::range";
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
