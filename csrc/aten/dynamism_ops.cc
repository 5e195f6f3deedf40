// torchtpu::set_dimension_size: bounded dynamism's one op. A tensor padded to a bound along `dim`
// is marked as holding `size` real entries there (a 0-d integer tensor, so that one program
// serves every size); reductions, matmuls and softmax in the same program then count only those.
// It is inserted by the torch.compile backend after a graph's dynamic inputs (torchtpu/_dynamo.py).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(torchtpu, m) {
  m.def("set_dimension_size(Tensor self, int dim, Tensor size) -> Tensor");
}

TORCH_LIBRARY_IMPL(torchtpu, Meta, m) {
  m.impl("set_dimension_size",
         [](const at::Tensor& self, int64_t, const at::Tensor&) { return at::empty_like(self); });
}
