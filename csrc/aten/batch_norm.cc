// Batch norm's saved statistics as PyTorch's CPU kernel returns them: empty in eval mode (Meta
// sizes them [C]), and in the input's dtype unless reduced-precision input meets float32
// parameters. The rule computes them in Meta's layout; this adjusts the returns.
#include <torch/library.h>

#include <string>

#include "aten/dispatch.h"

namespace tpu::aten {

namespace {

void NativeBatchNorm(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  bool training = false;
  at::ScalarType dtype = (*stack)[base].toTensor().scalar_type();
  const bool reduced = dtype == at::kBFloat16 || dtype == at::kHalf;
  bool mixed = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = (*stack)[base + i];
    if (args[i].name() == "training") training = v.toBool();
    if (i > 0 && v.isTensor() && v.toTensor().defined()) {
      mixed |= reduced && v.toTensor().scalar_type() == at::kFloat;
    }
  }
  if (mixed) dtype = at::kFloat;
  BoxedKernel(op, ks, stack);
  const size_t out = stack->size() - 3;
  for (size_t i = out + 1; i < stack->size(); ++i) {
    at::Tensor saved = (*stack)[i].toTensor();
    if (!training) {
      (*stack)[i] = at::empty({0}, saved.options().dtype(dtype));
    } else if (saved.scalar_type() != dtype) {
      (*stack)[i] = saved.to(dtype);
    }
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit.no_stats",
        "_native_batch_norm_legit_no_training"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&NativeBatchNorm>());
  }
}

}  // namespace tpu::aten
