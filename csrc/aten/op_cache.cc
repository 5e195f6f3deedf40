#include "aten/op_cache.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "aten/storage.h"
#include "eager/checks.h"
#include "eager/executor.h"
#include "eager/trace.h"
#include "runtime/env.h"

namespace tpu::aten {

namespace {

// A training step makes about a thousand.
const size_t kMaxRecipes = rt::EnvCount("TORCHTPU_OP_CACHE_RECIPES", 8192);

struct Key {
  std::string out;
  CallTensors& call;
  std::vector<const c10::StorageImpl*> storages;  // per tensor, for aliasing

  void Bytes(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  void Int(int64_t v) { Bytes(&v, sizeof(v)); }
  void Tag(char c) { out.push_back(c); }

  // Everything Read and Write look at: the layout, the storage's size and current buffer, and
  // which earlier tensor of the call shares the storage.
  bool Tensor(const at::Tensor& t) {
    call.tensors.push_back(t);
    call.buffers.emplace_back();
    if (!t.defined()) {
      storages.push_back(nullptr);
      Tag('u');
      return true;
    }
    if (t.device().type() == c10::DeviceType::CPU && t.dim() == 0) {  // a scalar, by value
      if (t.is_complex()) return false;                               // uploaded each call
      storages.push_back(nullptr);
      auto [bits, dtype] = ScalarBits(t.item());
      Tag('c');
      Int(static_cast<int64_t>(t.scalar_type()) |
          (static_cast<int64_t>(t.unsafeGetTensorImpl()->is_wrapped_number()) << 8) |
          (static_cast<int64_t>(dtype) << 16));
      Int(static_cast<int64_t>(bits));
      return true;
    }
    if (t.device().type() != c10::DeviceType::PrivateUse1) return false;  // uploaded each call
    if (t.is_conj() || t.is_neg()) return false;                          // read through its bit
    Tag('t');
    Int(static_cast<int64_t>(t.scalar_type()) | (static_cast<int64_t>(t.device().index()) << 8) |
        (t.dim() << 16));
    for (int64_t s : t.sizes()) Int(s);
    for (int64_t s : t.strides()) Int(s);
    Int(t.storage_offset());
    Int(static_cast<int64_t>(t.storage().nbytes()));
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    int64_t alias = -1;
    for (size_t k = 0; k < storages.size() && alias < 0; ++k) {
      if (storages[k] == storage) alias = static_cast<int64_t>(k);
    }
    storages.push_back(storage);
    Int(alias);
    eager::LazyPtr& buf = call.buffers.back();
    buf = Current(t.storage());
    if (!buf) return Tag('z'), true;
    Int(static_cast<int64_t>(buf->type.dtype));
    for (int64_t d : buf->type.dims) Int(d);
    Tag(';');
    return true;
  }

  // Doubles by value: a rule may specialize on them (pow by 2).
  bool Value(const c10::IValue& v) {
    return AppendKey(out, v, true, [&](const at::Tensor& t) { return Tensor(t); });
  }
};

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, OpRecipePtr> map;
};

Cache& TheCache() {
  static auto& c = *new Cache();  // never destroyed: ops may run during interpreter exit
  return c;
}

std::atomic<bool>& Enabled() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("TORCHTPU_OP_CACHE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

}  // namespace

bool OpCacheEnabled() { return Enabled().load(std::memory_order_relaxed); }
void SetOpCacheEnabled(bool on) { Enabled().store(on); }

std::optional<std::string> OpCacheKey(const c10::OperatorHandle& op,
                                      const std::vector<c10::IValue>& args, int device,
                                      CallTensors& call) {
  // A capture rebinds its inputs on every call (graph_capture.h): it lowers each time.
  if (!OpCacheEnabled() || eager::TraceOf(device).CapturingHere()) return std::nullopt;
  Key k{{}, call, {}};
  k.out.reserve(256);
  call.tensors.reserve(args.size());
  call.buffers.reserve(args.size());
  k.storages.reserve(args.size());
  const void* id = &op.schema();
  k.Bytes(&id, sizeof(id));
  k.Int(device | (static_cast<int64_t>(eager::GetMode()) << 16) |
        (static_cast<int64_t>(eager::ChecksEnabled()) << 24) |
        (static_cast<int64_t>(eager::HasFloat64()) << 25));  // float scalars' dtype
  for (const auto& v : args) {
    if (!k.Value(v)) return std::nullopt;
  }
  return std::move(k.out);
}

OpRecipePtr LookupRecipe(const std::string& key) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.map.find(key);
  return it == c.map.end() ? nullptr : it->second;
}

void StoreRecipe(const std::string& key, const GraphBuilder& b, std::vector<TensorMeta> metas,
                 const CallTensors& call, const std::vector<at::Tensor>& targets) {
  if (!b.replayable() || b.submitted() == nullptr) return;
  const std::vector<at::Tensor>& tensors = call.tensors;
  auto tensor_of = [&](const c10::StorageImpl* s) {
    for (size_t k = 0; k < tensors.size(); ++k) {
      if (tensors[k].defined() && tensors[k].storage().unsafeGetStorageImpl() == s) {
        return static_cast<int>(k);
      }
    }
    return INT_MIN;
  };
  auto r = std::make_shared<OpRecipe>();
  for (const GraphBuilder::Source& src : b.sources()) {
    if (src.storage == nullptr) {
      r->inputs.push_back({-1, src.bits, src.dtype});
      continue;
    }
    int k = tensor_of(src.storage);
    if (k < 0) return;
    r->inputs.push_back({k, 0, rt::DType::kInvalid});
  }
  for (const c10::StorageImpl* s : b.WrittenStorages()) {
    int k = tensor_of(s);
    for (size_t i = 0; k < 0 && i < targets.size(); ++i) {
      if (targets[i].defined() && targets[i].storage().unsafeGetStorageImpl() == s) {
        k = ~static_cast<int>(i);
      }
    }
    if (k == INT_MIN) return;
    r->writes.push_back(k);
  }
  r->checks = b.has_check() ? b.check_texts() : nullptr;
  r->results = b.submitted()->results.size() - r->writes.size() - (b.has_check() ? 1 : 0);
  r->metas = std::move(metas);
  r->g = b.submitted();
  r->hash = b.hash();
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.map.size() >= kMaxRecipes) c.map.clear();
  c.map.emplace(key, std::move(r));
}

std::vector<eager::LazyPtr> RecipeInputs(const OpRecipe& r, const CallTensors& call, int device) {
  std::vector<eager::LazyPtr> inputs;
  inputs.reserve(r.inputs.size());
  for (const OpRecipe::Input& in : r.inputs) {
    inputs.push_back(in.tensor >= 0 ? call.buffers[in.tensor]
                                    : eager::ScalarBuffer(&in.bits, in.dtype, device));
  }
  return inputs;
}

}  // namespace tpu::aten
