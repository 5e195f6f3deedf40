#include "runtime/kv_callbacks.h"

#include <cstring>
#include <exception>

namespace tpu::rt {

namespace {

template <typename A>
PJRT_Error* KvFailed(A* args, PJRT_Error_Code code, const std::string& msg) {
  return (*args->callback_error)(code, msg.data(), msg.size());
}
void FreeValue(char* v) { delete[] v; }
// Hands `v` to the plugin, which frees it with value_deleter_callback.
template <typename A>
PJRT_Error* Return(A* args, const std::string& v) {
  args->value = new char[v.size() + 1];
  std::memcpy(args->value, v.data(), v.size());
  args->value_size = v.size();
  args->value_deleter_callback = &FreeValue;
  return nullptr;
}

}  // namespace

PJRT_Error* KvGet(PJRT_KeyValueGetCallback_Args* args) {
  try {
    auto* kv = static_cast<KeyValueStore*>(args->user_arg);
    return Return(args, kv->Get(std::string(args->key, args->key_size), args->timeout_in_ms));
  } catch (const std::exception& e) {
    return KvFailed(args, PJRT_Error_Code_DEADLINE_EXCEEDED, e.what());
  }
}

PJRT_Error* KvTryGet(PJRT_KeyValueTryGetCallback_Args* args) {
  try {
    auto* kv = static_cast<KeyValueStore*>(args->user_arg);
    std::string v;
    std::string key(args->key, args->key_size);
    if (!kv->TryGet(key, &v)) return KvFailed(args, PJRT_Error_Code_NOT_FOUND, key);
    return Return(args, v);
  } catch (const std::exception& e) {
    return KvFailed(args, PJRT_Error_Code_INTERNAL, e.what());
  }
}

PJRT_Error* KvPut(PJRT_KeyValuePutCallback_Args* args) {
  try {
    static_cast<KeyValueStore*>(args->user_arg)
        ->Put(std::string(args->key, args->key_size), std::string(args->value, args->value_size));
    return nullptr;
  } catch (const std::exception& e) {
    return KvFailed(args, PJRT_Error_Code_INTERNAL, e.what());
  }
}

}  // namespace tpu::rt
