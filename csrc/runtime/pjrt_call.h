// The one way we call PJRT: zero-padded argument structs, errors turned into rt::Error.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "pjrt_c_api.h"
#include "runtime/client.h"

namespace tpu::rt {

// Newer plugins than our header check struct_size >= their own size. We pass the header's
// size plus zeroed padding, so fields added after our header read as zero/null.
inline constexpr size_t kStructPad = 256;

template <typename T>
class Args {
 public:
  Args() {
    std::memset(storage_, 0, sizeof(storage_));
    get()->struct_size = sizeof(T) + kStructPad;
  }
  T* get() { return reinterpret_cast<T*>(storage_); }
  T* operator->() { return get(); }

 private:
  alignas(T) unsigned char storage_[sizeof(T) + kStructPad];
};

// Turns a PJRT_Error into an rt::Error (and frees it). `what` names the PJRT function.
void ThrowIfError(const PJRT_Api* api, PJRT_Error* err, const char* what);

}  // namespace tpu::rt

// Calls api->PJRT_<fn>(args) and throws on error, naming the function.
#define TPU_PJRT(api, fn, args) \
  ::tpu::rt::ThrowIfError((api), (api)->PJRT_##fn((args).get()), "PJRT_" #fn)
