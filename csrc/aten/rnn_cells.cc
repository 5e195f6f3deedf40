// The fused LSTM and GRU cells. PyTorch's RNN layers call them on every accelerator
// (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell` and their backwards: CUDA kernels, with no CPU
// kernel). Here each is a few ATen ops on tpu tensors, which fused mode records into one program
// with the rest of the step. Gate order and workspace layouts are CUDA's, which autograd's
// formulas expect: LSTM [i, f, g, o] activated; GRU [r, z, n, hx, h_n + b_hn].
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace tpu::aten {

namespace {

using at::Tensor;

Tensor WithBiases(Tensor gates, const std::optional<Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

std::tuple<Tensor, Tensor, Tensor> LstmCell(const Tensor& input_gates, const Tensor& hidden_gates,
                                            const Tensor& cx, const std::optional<Tensor>& ib,
                                            const std::optional<Tensor>& hb) {
  Tensor gates = WithBiases(WithBiases(input_gates + hidden_gates, ib), hb);
  auto c = gates.chunk(4, 1);
  Tensor i = c[0].sigmoid(), f = c[1].sigmoid(), g = c[2].tanh(), o = c[3].sigmoid();
  Tensor cy = f * cx + i * g;
  Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> LstmCellBackward(const std::optional<Tensor>& grad_hy,
                                                    const std::optional<Tensor>& grad_cy,
                                                    const Tensor& cx, const Tensor& cy,
                                                    const Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(4, 1);
  const Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  Tensor tanh_cy = cy.tanh();
  bool has_hy = grad_hy.has_value() && grad_hy->defined();
  Tensor go = has_hy ? *grad_hy * tanh_cy : at::zeros_like(cy);
  Tensor gc = has_hy ? *grad_hy * o * (1 - tanh_cy * tanh_cy) : at::zeros_like(cy);
  if (grad_cy.has_value() && grad_cy->defined()) gc = gc + *grad_cy;
  Tensor grad_gates = at::cat(
      {gc * g * i * (1 - i), gc * cx * f * (1 - f), gc * i * (1 - g * g), go * o * (1 - o)}, 1);
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, gc * f, grad_bias};
}

std::tuple<Tensor, Tensor> GruCell(const Tensor& input_gates, const Tensor& hidden_gates,
                                   const Tensor& hx, const std::optional<Tensor>& ib,
                                   const std::optional<Tensor>& hb) {
  auto in = WithBiases(input_gates, ib).chunk(3, 1);
  auto hid = WithBiases(hidden_gates, hb).chunk(3, 1);
  Tensor r = (in[0] + hid[0]).sigmoid(), z = (in[1] + hid[1]).sigmoid();
  Tensor n = (in[2] + r * hid[2]).tanh();
  Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hid[2]}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> GruCellBackward(const Tensor& grad_hy,
                                                                   const Tensor& workspace,
                                                                   bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  Tensor gr = gn * hn * r * (1 - r);
  Tensor grad_input = at::cat({gr, gz, gn}, 1);
  Tensor grad_hidden = at::cat({gr, gz, gn * r}, 1);
  Tensor gib = has_bias ? grad_input.sum(0) : Tensor();
  Tensor ghb = has_bias ? grad_hidden.sum(0) : Tensor();
  return {grad_input, grad_hidden, grad_hy * z, gib, ghb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", LstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", LstmCellBackward);
  m.impl("_thnn_fused_gru_cell", GruCell);
  m.impl("_thnn_fused_gru_cell_backward", GruCellBackward);
}

}  // namespace tpu::aten
