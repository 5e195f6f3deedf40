#include "aten/arg_checks.h"

#include <ATen/ATen.h>

#include <string>
#include <unordered_map>

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

}  // namespace

ArgumentCheck FindArgumentCheck(const std::string& name) {
  static const auto* checks = new std::unordered_map<std::string, ArgumentCheck>{
      {"aten::amax", &Run<SameOutDtype>},
      {"aten::amin", &Run<SameOutDtype>},
      {"aten::aminmax", &Run<AminmaxOut>},
      {"aten::masked_scatter", &Run<MaskedScatter>},
      {"aten::masked_scatter_", &Run<MaskedScatter>},
      {"aten::multinomial", &Run<Multinomial>},
  };
  auto it = checks->find(name);
  return it == checks->end() ? nullptr : it->second;
}

}  // namespace tpu::aten
