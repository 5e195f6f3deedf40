// PyTorch's argument checks for the ops whose Meta kernels check the same things in other words
// or in another order than the CPU kernels: run before the Meta kernel, so that a tpu op raises
// the error (type and message) the same call raises on CPU.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace tpu::aten {

// Raises PyTorch's error for bad arguments of a call of `schema`'s op.
using ArgumentCheck = void (*)(const c10::FunctionSchema& schema,
                               const std::vector<c10::IValue>& args);

// The check of the op named `name` ("aten::amax"), or nullptr when it has none of its own here.
ArgumentCheck FindArgumentCheck(const std::string& name);

}  // namespace tpu::aten
