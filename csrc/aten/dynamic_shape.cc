// Ops whose output shape depends on data (nonzero, masked_select, repeat_interleave, lstsq's
// residuals): one small program counts, the host reads the count, then a static program of that
// size computes the result.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "aten/dispatch.h"
#include "aten/graph_builder.h"
#include "eager/executor.h"

namespace tpu::aten {

namespace {

using ir::Dims;

// Number of true elements of a flat pred value, read back to the host.
int64_t CountTrue(const at::Tensor& like, const std::function<Value(GraphBuilder&)>& mask,
                  const char* op) {
  GraphBuilder b(like.device().index(), op);
  Value m = ir::Convert(b.g, mask(b), rt::DType::kS64);
  b.g.results = {ir::Reduce(b.g, m, ir::Constant(b.g, 0, rt::DType::kS64), {0}, "stablehlo.add")};
  int64_t count = 0;
  eager::Materialize(b.Run()[0])->ToHost(&count, sizeof(count));
  RaiseFailedChecks(b.device(), false);
  return count;
}

// Flat positions of the true elements, in order: sort (mask ? i : n) and keep `count`.
Value TruePositions(ir::Graph& g, Value flat_mask, int64_t count) {
  int64_t n = g.type(flat_mask).dims[0];
  ir::Type t{rt::DType::kS64, {n}};
  Value key = ir::Select(g, flat_mask, ir::Iota(g, t, 0),
                         ir::Constant(g, static_cast<double>(n), rt::DType::kS64, {n}));
  auto less = std::make_shared<ir::Graph>();
  Value a = less->Param({rt::DType::kS64, {}});
  Value c = less->Param({rt::DType::kS64, {}});
  less->results = {ir::Compare(*less, a, c, "LT")};
  Value sorted = g.Op1("stablehlo.sort", {key}, t, "dimension = 0 : i64, is_stable = true", {less});
  return ir::Slice(g, sorted, {0}, {count});
}

Value FlatPred(GraphBuilder& b, const at::Tensor& t, const Dims& shape) {
  Value v = ir::BroadcastTo(b.g, ir::Convert(b.g, b.Read(t), rt::DType::kPred), shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return ir::Reshape(b.g, v, {n});
}

at::Tensor Nonzero(const at::Tensor& self) {
  try {
    Dims shape = self.sizes().vec();
    int64_t count = CountTrue(
        self, [&](GraphBuilder& b) { return FlatPred(b, self, shape); }, "aten::nonzero");
    int64_t rank = self.dim();
    at::Tensor out = at::empty({count, rank}, self.options().dtype(at::kLong));
    if (count == 0 || rank == 0) return out;
    GraphBuilder b(self.device().index(), "aten::nonzero");
    Value pos = TruePositions(b.g, FlatPred(b, self, shape), count);
    Dims strides = ir::ContiguousStrides(shape);
    std::vector<Value> coords;
    for (int64_t d = 0; d < rank; ++d) {
      Value q =
          ir::Binary(b.g, "stablehlo.divide", pos,
                     ir::Constant(b.g, static_cast<double>(strides[d]), rt::DType::kS64, {count}));
      Value r =
          ir::Binary(b.g, "stablehlo.remainder", q,
                     ir::Constant(b.g, static_cast<double>(shape[d]), rt::DType::kS64, {count}));
      coords.push_back(ir::Reshape(b.g, r, {count, 1}));
    }
    b.Write(out, ir::Concat(b.g, coords, 1));
    b.Run();
    return out;
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError("aten::nonzero");
  }
  return {};
}

at::Tensor MaskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  try {
    Dims shape = at::infer_size(self.sizes(), mask.sizes());
    int64_t count = CountTrue(
        self, [&](GraphBuilder& b) { return FlatPred(b, mask, shape); }, "aten::masked_select");
    at::Tensor out = at::empty({count}, self.options());
    if (count == 0) return out;
    GraphBuilder b(self.device().index(), "aten::masked_select");
    Value pos = TruePositions(b.g, FlatPred(b, mask, shape), count);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Value flat = ir::Reshape(b.g, ir::BroadcastTo(b.g, b.Read(self), shape), {n});
    b.Write(out, ir::Gather(b.g, flat, ir::Reshape(b.g, pos, {count, 1}), {0}, 0));
    b.Run();
    return out;
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError("aten::masked_select");
  }
  return {};
}

at::Tensor& NonzeroOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  TORCH_CHECK(self.device() == out.device(),
              "expected self and out to be on the same device, but got out on ", out.device(),
              " and self on ", self.device());
  at::Tensor r = Nonzero(self);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor& MaskedSelectOut(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  at::Tensor r = MaskedSelect(self, mask);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

// repeat_interleave(repeats, output_size=None): without output_size, the host reads the sum (and
// the minimum, for CPU's check) of repeats; the boxed kernel then lowers it with that size.
void RepeatInterleave(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                      torch::jit::Stack* stack) {
  const at::Tensor repeats = (*stack)[stack->size() - 2].toTensor();
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  if (stack->back().isNone() && repeats.numel() > 0) {
    int64_t sum_min[2] = {0, 0};
    try {
      GraphBuilder b(repeats.device().index(), "aten::repeat_interleave");
      Value r = ir::Convert(b.g, b.Read(repeats), rt::DType::kS64);
      auto reduce = [&](double init, const char* op) {
        return ir::Reshape(
            b.g, ir::Reduce(b.g, r, ir::Constant(b.g, init, rt::DType::kS64), {0}, op), {1});
      };
      b.g.results = {
          ir::Concat(b.g, {reduce(0, "stablehlo.add"), reduce(9.0e18, "stablehlo.minimum")}, 0)};
      eager::Materialize(b.Run()[0])->ToHost(sum_min, sizeof(sum_min));
    } catch (const c10::Error&) {
      throw;
    } catch (...) {
      RethrowAsTorchError("aten::repeat_interleave");
    }
    TORCH_CHECK(sum_min[1] >= 0, "repeats can not be negative");
    stack->back() = c10::IValue(sum_min[0]);
  } else if (stack->back().isNone()) {
    stack->back() = c10::IValue(static_cast<int64_t>(0));
  }
  BoxedKernel(op, ks, stack);
}

// linalg_lstsq.out: gelsd and gelss return residuals only when every matrix has full rank. The
// program computes them as if so (Meta sizes them that way); the host reads the ranks and empties
// them otherwise.
void LinalgLstsqOut(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                    torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[0].toTensor();
  BoxedKernel(op, ks, stack);
  const int64_t n = self.size(-1);
  at::Tensor residuals = (*stack)[stack->size() - 3].toTensor();
  const at::Tensor rank = (*stack)[stack->size() - 2].toTensor();
  if (residuals.numel() > 0 && rank.numel() > 0 && rank.min().item<int64_t>() < n) {
    residuals.resize_({0});
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lstsq.out", torch::CppFunction::makeFromBoxedFunction<&LinalgLstsqOut>());
  m.impl("nonzero", Nonzero);
  m.impl("nonzero.out", NonzeroOut);
  m.impl("masked_select", MaskedSelect);
  m.impl("masked_select.out", MaskedSelectOut);
  m.impl("repeat_interleave.Tensor",
         torch::CppFunction::makeFromBoxedFunction<&RepeatInterleave>());
}

}  // namespace tpu::aten
