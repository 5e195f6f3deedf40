// torch.fft through stablehlo.fft: _fft_c2c, _fft_r2c and _fft_c2r, one 1-D transform per dim
// (each dim moved last, where stablehlo.fft works). XLA's inverse transforms divide by the length;
// PyTorch's normalization (none, 1/sqrt(n) or 1/n, n the signal size) is applied at the end.
#include <cmath>
#include <numeric>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// One 1-D transform of x along `dim`: `kind` is FFT, IFFT, RFFT or IRFFT; `length` the signal
// length (IRFFT's output length).
Value Along(Ctx& c, Value x, int64_t dim, const char* kind, int64_t length) {
  const Type t = c.T(x);
  int64_t last = t.rank() - 1;
  Dims perm(t.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[dim], perm[last]);
  Value moved = ir::Transpose(c.g, x, perm);
  Type out = c.T(moved);
  std::string k = kind;
  if (k == "RFFT") {
    out.dtype = out.dtype == DType::kF64 ? DType::kC128 : DType::kC64;
    out.dims[last] = length / 2 + 1;
  } else if (k == "IRFFT") {
    out.dtype = rt::RealOf(out.dtype);
    out.dims[last] = length;
  }
  Value r =
      c.g.Op1("stablehlo.fft", {moved}, out,
              "fft_type = #stablehlo<fft_type " + k + ">, fft_length = " + ir::I64Array({length}));
  return ir::Transpose(c.g, r, perm);
}

Dims FftDims(Ctx& c, int64_t rank) {
  Dims dims = c.Ints("dim");
  for (int64_t& d : dims) d = ir::WrapDim(d, rank);
  return dims;
}

// PyTorch's normalization of a transform of `n` points, times n for XLA's inverse transforms.
Value Normalize(Ctx& c, Value x, double n, bool xla_divided) {
  int64_t mode = c.Int("normalization", 0);
  double scale = mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(n) : 1.0 / n;
  if (xla_divided) scale *= n;
  if (scale == 1.0) return x;
  return Mul(c, x, Splat(c, scale, c.T(x)));
}

// Complex input in the result's complex dtype.
Value AsComplex(Ctx& c, Value x, DType t) { return Cast(c, x, t); }

V C2C(Ctx& c) {
  const Type& out = c.out[0];
  Value x = AsComplex(c, c.In("self"), out.dtype);
  if (out.numel() == 0) return {x};
  bool forward = c.Bool("forward", true);
  double n = 1;
  for (int64_t d : FftDims(c, out.rank())) {
    int64_t len = c.T(x).dims[d];
    n *= static_cast<double>(len);
    x = Along(c, x, d, forward ? "FFT" : "IFFT", len);
  }
  return {Normalize(c, x, n, !forward)};
}

// Real to complex: the last dim of `dim` halved (onesided) by an RFFT, the others full FFTs. Not
// onesided: the full spectrum, as a complex FFT of the real input.
V R2C(Ctx& c) {
  const Type& out = c.out[0];
  Value x = c.In("self");
  if (out.numel() == 0) return {Splat(c, 0, out)};
  Dims dims = FftDims(c, out.rank());
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(c.T(x).dims[d]);
  if (!c.Bool("onesided", true)) {
    x = AsComplex(c, x, out.dtype);
    for (int64_t d : dims) x = Along(c, x, d, "FFT", c.T(x).dims[d]);
    return {Normalize(c, x, n, false)};
  }
  x = Cast(c, x, rt::RealOf(out.dtype));
  x = Along(c, x, dims.back(), "RFFT", c.T(x).dims[dims.back()]);
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    x = Along(c, x, dims[i], "FFT", c.T(x).dims[dims[i]]);
  return {Normalize(c, x, n, false)};
}

// Complex (Hermitian half) to real: inverse FFTs over all but the last dim of `dim`, then an IRFFT
// to last_dim_size points along it.
V C2R(Ctx& c) {
  const Type& out = c.out[0];
  Value x = AsComplex(c, c.In("self"), out.dtype == DType::kF64 ? DType::kC128 : DType::kC64);
  if (out.numel() == 0) return {Splat(c, 0, out)};
  Dims dims = FftDims(c, out.rank());
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(out.dims[d]);
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    x = Along(c, x, dims[i], "IFFT", c.T(x).dims[dims[i]]);
  x = Along(c, x, dims.back(), "IRFFT", out.dims[dims.back()]);
  return {Normalize(c, x, n, true)};
}

}  // namespace

void AddFftRules(RuleMap& m) {
  m["aten::_fft_c2c"] = C2C;
  m["aten::_fft_r2c"] = R2C;
  m["aten::_fft_c2r"] = C2R;
}

}  // namespace tpu::lowering
