// The schema-driven boxed kernel every tpu op without a hand-written kernel goes through.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace tpu::aten {

// Meta kernel for shapes and errors, lowering rule for values, schema aliases for write-back.
void BoxedKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
// Output shapes for the ops whose Meta kernel is PyTorch's "not implemented" default: replaces
// the stack's arguments with empty outputs; false for other ops.
bool MetaOverride(const std::string& name, torch::jit::Stack& s);

// Runs `fn`, turning runtime and lowering failures into PyTorch exceptions that name `op`.
void RethrowAsTorchError(const std::string& op);
// A host read or sync: raises (as PyTorch's error) a value check that failed in fused mode.
void RaiseFailedChecks(int device, bool wait);

}  // namespace tpu::aten
