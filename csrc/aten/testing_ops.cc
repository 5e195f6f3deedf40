// torchtpu::_invalid_program: a test-only op whose lowering XLA rejects, so the tests can check
// how a compile failure is reported (it must name the op, not print the module).
#include <torch/library.h>

TORCH_LIBRARY(torchtpu, m) { m.def("_invalid_program(Tensor x) -> Tensor"); }

TORCH_LIBRARY_IMPL(torchtpu, Meta, m) {
  m.impl("_invalid_program", [](const at::Tensor& x) { return at::empty_like(x); });
}
