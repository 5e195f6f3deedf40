// scaled_dot_product_attention on tpu: PyTorch asks each device which fused kernel to use; we
// answer "overrideable", so SDPA (forward and backward) becomes our own attention lowering
// (lowering/attention.cc) instead of the unfused math decomposition.
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <torch/library.h>

#include "aten/dispatch.h"

namespace tpu::aten {

// The overrideable op (and its Meta kernel) takes [batch, heads, seq, dim] inputs: other ranks
// take PyTorch's math decomposition.
int64_t FusedSdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>&, double, bool, std::optional<double>,
                       bool) {
  bool four_d = query.dim() == 4 && key.dim() == 4 && value.dim() == 4;
  return static_cast<int64_t>(four_d ? sdp::SDPBackend::overrideable : sdp::SDPBackend::math);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", FusedSdpChoice);
  for (const char* name : {"_scaled_dot_product_fused_attention_overrideable",
                           "_scaled_dot_product_fused_attention_overrideable_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&BoxedKernel>());
  }
}

// Shapes of the backward for FakeTensor, which has no other way to trace it with symbolic sizes
// (torch.compile with dynamic shapes).
void SdpaBackwardMeta(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* s) {
  MetaOverride(op.schema().name(), *s);
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&SdpaBackwardMeta>());
}

}  // namespace tpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &tpu::aten::FusedSdpChoice);
}  // namespace at::native
