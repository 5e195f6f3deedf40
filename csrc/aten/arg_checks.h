// PyTorch's argument checks for the ops whose Meta kernels check the same things in other words
// or in another order than the CPU kernels: run before the Meta kernel, so that a tpu op raises
// the error (type and message) the same call raises on CPU.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

namespace tpu::aten {

// Raises PyTorch's error for bad arguments of `schema`'s op, if it has checks of its own here.
void CheckArguments(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

}  // namespace tpu::aten
