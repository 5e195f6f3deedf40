#include "aten/arg_checks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace tpu::aten {

namespace {

// The arguments of one call, by name.
class Args {
 public:
  Args(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args)
      : schema_(schema), args_(args) {}

  bool Has(const std::string& name) const { return Index(name) >= 0; }
  const c10::IValue& operator[](const std::string& name) const { return args_.at(Index(name)); }
  const at::Tensor& Tensor(const std::string& name) const { return (*this)[name].toTensor(); }
  int64_t Int(const std::string& name) const { return (*this)[name].toInt(); }

 private:
  int Index(const std::string& name) const {
    const auto& a = schema_.arguments();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].name() == name) return static_cast<int>(i);
    }
    return -1;
  }
  const c10::FunctionSchema& schema_;
  const std::vector<c10::IValue>& args_;
};

// Each check as an ArgumentCheck: it reads the call through Args.
template <void (*F)(const Args&)>
void Run(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  F(Args(schema, args));
}

// amax/amin: the out tensor holds the input's dtype, no other.
void SameOutDtype(const Args& a) {
  if (!a.Has("out")) return;
  const at::Tensor &self = a.Tensor("self"), &out = a.Tensor("out");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "Expected the dtype for input and out to match, but got ", self.scalar_type(),
              " for input's dtype and ", out.scalar_type(), " for out's dtype.");
}

// aminmax (a structured kernel): both out tensors hold the input's dtype.
void AminmaxOut(const Args& a) {
  if (!a.Has("min")) return;
  for (const char* name : {"min", "max"}) {
    const at::Tensor &self = a.Tensor("self"), &out = a.Tensor(name);
    TORCH_CHECK(out.dtype() == self.dtype(), "Expected out tensor to have dtype ", self.dtype(),
                ", but got ", out.dtype(), " instead");
  }
}

void MaskedScatter(const Args& a) {
  TORCH_CHECK(a.Tensor("mask").scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              a.Tensor("mask").scalar_type());
}

void Multinomial(const Args& a) {
  const at::Tensor& self = a.Tensor("self");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(
      at::isFloatingType(self.scalar_type()),
      "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(a.Int("num_samples") > 0, "cannot sample n_sample <= 0 samples");
}

// Matrix products take one dtype (CPU's kernels raise; XLA would promote or convert silently).
// Each message is the one CPU's kernel gives for that op.
void Mm(const Args& a) {
  const at::Tensor &self = a.Tensor("self"), &mat2 = a.Tensor("mat2");
  TORCH_CHECK(self.dtype() == mat2.dtype(),
              "expected m1 and m2 to have the same dtype, but got: ", self.dtype(),
              " != ", mat2.dtype());
}

// bmm, mv, addmv, baddbmm: CPU's kernel checks each operand against the first (addmv: the matrix;
// mv reaches it with a result of its vector's dtype).
template <const char* kFirst, const char*... kOthers>
void SameScalarType(const Args& a) {
  const at::ScalarType first = a.Tensor(kFirst).scalar_type();
  for (const char* name : {kOthers...}) {
    const at::ScalarType other = a.Tensor(name).scalar_type();
    TORCH_CHECK(other == first, "expected scalar type ", first, " but found ", other);
  }
}

void Dot(const Args& a) {
  const at::ScalarType self = a.Tensor("self").scalar_type();
  const at::ScalarType other =
      a.Tensor(a.Has("tensor") ? "tensor" : "other").scalar_type();  // vdot
  TORCH_CHECK(self == other, "dot : expected both vectors to have same dtype, but found ", self,
              " and ", other);
}

void Addbmm(const Args& a) {
  const at::ScalarType b1 = a.Tensor("batch1").scalar_type(), b2 = a.Tensor("batch2").scalar_type();
  const at::ScalarType self = a.Tensor("self").scalar_type();
  TORCH_CHECK(b1 == b2, "self and mat2 must have the same dtype, but got ", b1, " and ", b2);
  TORCH_CHECK(self == b1, "self and mat2 must have the same dtype, but got ", self, " and ", b1);
}

// index_fill: CPU's kernel checks in this order, with these types (its Meta kernel, a Python
// reference, says other things).
void IndexFill(const Args& a) {
  const at::Tensor &self = a.Tensor("self"), &index = a.Tensor("index");
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong,
                    "index_fill_(): Expected dtype int64 for index.");
  if (a["value"].isTensor()) {
    const int64_t d = a.Tensor("value").dim();
    TORCH_CHECK(d == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor ",
                "with ", d, " dimension(s).");
  }
  at::maybe_wrap_dim(a.Int("dim"), std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(index.dim() <= 1, "Index has to be a vector/scalar");
  const c10::IValue& value = a["value"];
  const bool complex = value.isTensor() ? at::isComplexType(value.toTensor().scalar_type())
                                        : value.toScalar().isComplex();
  TORCH_CHECK(!complex || at::isComplexType(self.scalar_type()),
              "index_fill_(): Converting complex Scalar to non-complex type is not supported");
}

// Rounding divisions of complex numbers: CPU's kernels have no complex dtypes (XLA would round
// the real and imaginary parts alone).
void NoComplexRounding(const Args& a, const std::string& mode) {
  const c10::IValue& other = a["other"];
  const at::Tensor& self = a.Tensor("self");
  const at::ScalarType t = other.isTensor() ? at::result_type(self, other.toTensor())
                                            : at::result_type(self, other.toScalar());
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(t), "\"div_", mode, "_tpu\" not implemented for '",
                              at::toString(t), "'");
}

void DivMode(const Args& a) {
  if (a.Has("rounding_mode") && !a["rounding_mode"].isNone()) {
    NoComplexRounding(a, a["rounding_mode"].toStringRef());
  }
}

void FloorDivide(const Args& a) { NoComplexRounding(a, "floor"); }

// index_put: the index tensors broadcast together (index's Meta kernel says so for reads).
void IndexPutIndices(const Args& a) {
  std::vector<at::IntArrayRef> shapes;
  std::string written;
  for (std::optional<at::Tensor> t : a["indices"].toOptionalTensorList()) {
    if (!t || !t->defined()) continue;
    shapes.push_back(t->sizes());
    written += (written.empty() ? "" : ", ") + c10::str(t->sizes());
  }
  std::vector<int64_t> out;
  for (at::IntArrayRef s : shapes) {
    const size_t n = std::max(out.size(), s.size());
    std::vector<int64_t> next(n, 1);
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = i < out.size() ? out[out.size() - 1 - i] : 1;
      const int64_t y = i < s.size() ? s[s.size() - 1 - i] : 1;
      TORCH_CHECK_INDEX(x == y || x == 1 || y == 1,
                        "shape mismatch: indexing tensors could not be broadcast together with "
                        "shapes ",
                        written);
      next[n - 1 - i] = x == 1 ? y : x;
    }
    out = std::move(next);
  }
}

// In-place random fills whose argument checks CPU's kernels make on the host.
void Bernoulli(const Args& a) {
  if (!a.Has("p") || !a["p"].isDouble()) return;  // a tensor of probabilities: per element
  const double p = a["p"].toDouble();
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
}

void Random(const Args& a) {
  if (!a.Has("to")) return;
  const int64_t from = a.Has("from") ? a.Int("from") : 0;
  if (a["to"].isNone()) return;
  const int64_t to = a.Int("to");
  TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", to);
}

// embedding: its composite CPU kernel's checks (the Meta kernel asserts in Python instead).
void Embedding(const Args& a) {
  TORCH_CHECK(a.Tensor("weight").dim() == 2, "'weight' must be 2-D");
  at::checkScalarTypes("embedding", at::TensorArg(a.Tensor("indices"), "indices", 1),
                       {at::kLong, at::kInt});
}

void UnfoldBackward(const Args& a) {
  TORCH_CHECK_VALUE(a.Int("step") > 0, "step is ", a.Int("step"), " but must be > 0");
}

constexpr char kSelf[] = "self", kMat2[] = "mat2", kVec[] = "vec", kMat[] = "mat",
               kBatch1[] = "batch1", kBatch2[] = "batch2";

}  // namespace

ArgumentCheck FindArgumentCheck(const std::string& name) {
  static const auto* checks = new std::unordered_map<std::string, ArgumentCheck>{
      {"aten::amax", &Run<SameOutDtype>},
      {"aten::amin", &Run<SameOutDtype>},
      {"aten::aminmax", &Run<AminmaxOut>},
      {"aten::masked_scatter", &Run<MaskedScatter>},
      {"aten::masked_scatter_", &Run<MaskedScatter>},
      {"aten::multinomial", &Run<Multinomial>},
      {"aten::mm", &Run<Mm>},
      {"aten::dot", &Run<Dot>},
      {"aten::vdot", &Run<Dot>},
      {"aten::bmm", &Run<SameScalarType<kSelf, kMat2>>},
      {"aten::mv", &Run<SameScalarType<kSelf, kVec>>},
      {"aten::addmv", &Run<SameScalarType<kMat, kVec, kSelf>>},
      {"aten::addmv_", &Run<SameScalarType<kMat, kVec, kSelf>>},
      {"aten::baddbmm", &Run<SameScalarType<kSelf, kBatch1, kBatch2>>},
      {"aten::baddbmm_", &Run<SameScalarType<kSelf, kBatch1, kBatch2>>},
      {"aten::addbmm", &Run<Addbmm>},
      {"aten::addbmm_", &Run<Addbmm>},
      {"aten::div", &Run<DivMode>},
      {"aten::div_", &Run<DivMode>},
      {"aten::floor_divide", &Run<FloorDivide>},
      {"aten::floor_divide_", &Run<FloorDivide>},
      {"aten::index_put", &Run<IndexPutIndices>},
      {"aten::index_put_", &Run<IndexPutIndices>},
      {"aten::_index_put_impl_", &Run<IndexPutIndices>},
      {"aten::bernoulli_", &Run<Bernoulli>},
      {"aten::random_", &Run<Random>},
      {"aten::index_fill", &Run<IndexFill>},
      {"aten::index_fill_", &Run<IndexFill>},
      {"aten::unfold_backward", &Run<UnfoldBackward>},
      {"aten::embedding", &Run<Embedding>},
  };
  auto it = checks->find(name);
  return it == checks->end() ? nullptr : it->second;
}

}  // namespace tpu::aten
