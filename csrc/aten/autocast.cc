// torch.autocast("tpu"): the same cast policy as CUDA's (matmuls and convolutions in the lower
// precision, numerically sensitive ops in float32, mixed-input ops promoted), so mixed-precision
// code written for CUDA behaves the same here.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

// The KERNEL macros name ATen types and autocast policies unqualified, as inside ATen.
namespace at::autocast {
namespace {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TPU_LOW_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOW_PRECISION)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  KERNEL_PRIVATEUSEONE(addcdiv, promote)
  KERNEL_PRIVATEUSEONE(addcmul, promote)
  KERNEL_PRIVATEUSEONE(atan2, promote)
  KERNEL_PRIVATEUSEONE(bilinear, promote)
  KERNEL_PRIVATEUSEONE(cross, promote)
  KERNEL_PRIVATEUSEONE(dot, promote)
  KERNEL_PRIVATEUSEONE(vdot, promote)
  KERNEL_PRIVATEUSEONE(grid_sampler, promote)
  KERNEL_PRIVATEUSEONE(index_put, promote)
  KERNEL_PRIVATEUSEONE(tensordot, promote)
  KERNEL_PRIVATEUSEONE(scatter_add, promote)
  KERNEL_PRIVATEUSEONE(stack, promote)
  KERNEL_PRIVATEUSEONE(cat, promote)
  KERNEL_PRIVATEUSEONE(index_copy, promote)
#undef TPU_LOW_PRECISION
#undef TPU_FP32
#undef TPU_FP32_SET_OPT_DTYPE
}

}  // namespace
}  // namespace at::autocast
