// linalg.eig and linalg.eigvals run on the host, as PyTorch's CUDA backend runs them (MAGMA's geev
// takes host memory): XLA has no general (nonsymmetric) eigensolver, and the eigenvalues' order
// and the eigenvectors' phases are LAPACK's own, which users compare against. The input is read
// back (a flush in fused mode), LAPACK runs through PyTorch's CPU kernel with its checks and
// messages, and the complex results are uploaded. Autograd is PyTorch's, over tpu tensors.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>

namespace tpu::aten {

namespace {

using at::Tensor;

std::tuple<Tensor, Tensor> LinalgEig(const Tensor& self) {
  auto [values, vectors] = at::linalg_eig(self.cpu());
  return {values.to(self.device()), vectors.to(self.device())};
}

std::tuple<Tensor&, Tensor&> LinalgEigOut(const Tensor& self, Tensor& values, Tensor& vectors) {
  auto [l, v] = LinalgEig(self);
  at::native::resize_output(values, l.sizes());
  at::native::resize_output(vectors, v.sizes());
  values.copy_(l);
  vectors.copy_(v);
  return {values, vectors};
}

Tensor LinalgEigvals(const Tensor& self) {
  return at::linalg_eigvals(self.cpu()).to(self.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_eig", LinalgEig);
  m.impl("linalg_eig.out", LinalgEigOut);
  m.impl("_linalg_eigvals", LinalgEigvals);
}

}  // namespace tpu::aten
