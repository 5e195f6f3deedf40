#include "aten/dispatch.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/TypeProperties.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "aten/arg_checks.h"
#include "aten/generator.h"
#include "aten/graph_builder.h"
#include "aten/graph_capture.h"
#include "aten/meta_cache.h"
#include "aten/op_cache.h"
#include "eager/executor.h"
#include "lowering/rule.h"

namespace tpu::aten {

namespace {

using lowering::Arg;

bool IsOut(const c10::Argument& a) {
  return a.kwarg_only() && a.alias_info() != nullptr && a.alias_info()->isWrite();
}

c10::TypePtr Unwrapped(const c10::TypePtr& t) {
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType();
  return t;
}

bool IsTpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

at::Tensor ToMeta(const at::Tensor& t) {
  if (!IsTpu(t)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

c10::IValue ToMeta(const c10::IValue& v) {
  if (v.isTensor()) return ToMeta(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(ToMeta(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(ToMeta(*t)) : std::nullopt);
    }
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1)
    return c10::Device(at::kMeta);
  return v;
}

// Device of the op and the same-device check (CPU 0-d tensors are scalars, as on CUDA).
int OpDevice(const std::vector<c10::IValue>& args) {
  int device = -1;
  bool cpu = false;
  auto visit = [&](const at::Tensor& t, bool index_list) {
    if (!t.defined()) return;
    if (IsTpu(t)) {
      if (device >= 0 && device != t.device().index()) {
        TORCH_CHECK(
            false,
            "Expected all tensors to be on the same device, but found at least two devices, tpu:",
            device, " and tpu:", static_cast<int>(t.device().index()), "!");
      }
      device = t.device().index();
    } else if (t.dim() > 0 && !index_list) {
      cpu = true;
    }
  };
  for (const auto& v : args) {
    if (v.isTensor()) visit(v.toTensor(), false);
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList()) visit(t, false);
    if (v.isOptionalTensorList()) {
      for (std::optional<at::Tensor> t : v.toOptionalTensorList())
        if (t) visit(*t, true);
    }
  }
  for (const auto& v : args) {
    if (device < 0 && v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      device = v.toDevice().has_index() ? v.toDevice().index() : -1;
    }
  }
  if (device < 0) {
    device = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  }
  TORCH_CHECK(!cpu,
              "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              device, " and cpu!");
  return device;
}

Value TensorValue(GraphBuilder& b, const at::Tensor& t) {
  return IsTpu(t) ? b.Read(t) : b.Upload(t.cpu());
}

Arg ToArg(GraphBuilder& b, const c10::Argument& a, const c10::IValue& v) {
  Arg r;
  if (v.isNone()) return r;
  c10::TypePtr type = Unwrapped(a.real_type());
  switch (type->kind()) {
    case c10::TypeKind::TensorType: {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) return r;
      r.kind = Arg::Kind::kValue;
      r.value = TensorValue(b, t);
      return r;
    }
    case c10::TypeKind::NumberType:
      r.kind = Arg::Kind::kValue;
      r.value = b.Scalar(v.toScalar());
      r.has_host_scalar = !v.toScalar().isComplex();
      if (r.has_host_scalar) r.host_scalar = v.toScalar().toDouble();
      return r;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      if (a.type()->kind() == c10::TypeKind::OptionalType && v.isNone()) return r;
      r.kind = Arg::Kind::kInt;
      r.i = v.isSymInt() ? v.toSymInt().guard_int(__FILE__, __LINE__) : v.toInt();
      return r;
    case c10::TypeKind::FloatType:
      r.kind = Arg::Kind::kDouble;
      r.d = v.toDouble();
      return r;
    case c10::TypeKind::BoolType:
      r.kind = Arg::Kind::kBool;
      r.b = v.toBool();
      return r;
    case c10::TypeKind::StringType:
      r.kind = Arg::Kind::kString;
      r.s = v.toStringRef();
      return r;
    case c10::TypeKind::ScalarTypeType:
      r.kind = Arg::Kind::kDType;
      r.dtype = ToDType(static_cast<at::ScalarType>(v.toInt()));
      return r;
    case c10::TypeKind::ListType: {
      c10::TypePtr elem = type->castRaw<c10::ListType>()->getElementType();
      if (v.isTensorList()) {
        r.kind = Arg::Kind::kValues;
        for (const at::Tensor& t : v.toTensorList()) r.values.push_back(TensorValue(b, t));
      } else if (v.isOptionalTensorList()) {
        r.kind = Arg::Kind::kValues;
        for (std::optional<at::Tensor> t : v.toOptionalTensorList()) {
          r.values.push_back(t && t->defined() ? TensorValue(b, *t) : -1);
        }
      } else if (v.isBoolList()) {
        r.kind = Arg::Kind::kInts;
        for (bool x : v.toBoolList()) r.ints.push_back(x);
      } else if (v.isIntList()) {
        r.kind = Arg::Kind::kInts;
        r.ints = v.toIntVector();
      } else if (v.isDoubleList()) {
        r.kind = Arg::Kind::kDoubles;
        r.doubles = v.toDoubleVector();
      } else if (v.isList() && elem->kind() == c10::TypeKind::SymIntType) {
        r.kind = Arg::Kind::kInts;
        for (const c10::SymInt& s : v.toSymIntList())
          r.ints.push_back(s.guard_int(__FILE__, __LINE__));
      }
      return r;
    }
    default:
      return r;  // Layout, Device, MemoryFormat, Generator: not values
  }
}

bool CpuFallbackEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCHTPU_CPU_FALLBACK");
    return v != nullptr && std::string(v) == "1";
  }();
  return enabled;
}

void CpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(name).second) {
      TORCH_WARN("The operator '", name, "' has no tpu lowering; it runs on the CPU (slow) ",
                 "because TORCHTPU_CPU_FALLBACK=1.");
    }
  }
  eager::GetMetrics().cpu_fallbacks++;
  at::native::cpu_fallback(op, stack);
}

}  // namespace

// Shape functions for ops whose Meta kernel is a "not implemented for this backend" default.
bool MetaOverride(const std::string& name, torch::jit::Stack& s) {
  auto T = [&](size_t i) { return s[i].isNone() ? at::Tensor() : s[i].toTensor(); };
  // index_add/index_reduce's Meta kernel selects element 0 of the indexed dim of a meta result
  // and of the source (a TensorIterator check only meta tensors run), which a dim of size 0 does
  // not have: CPU returns self as it is. The checks that still mean something come first.
  const bool index_func = name == "aten::index_reduce" || name == "aten::index_reduce_" ||
                          name == "aten::index_add" || name == "aten::index_add_";
  auto empty_along = [&](const at::Tensor& t) {
    return t.dim() > 0 && t.size(at::maybe_wrap_dim(s[1].toInt(), t.dim())) == 0;
  };
  if (index_func && T(0).dim() > 0 && (empty_along(T(0)) || empty_along(T(3)))) {
    const at::Tensor self = T(0), index = T(2), source = T(3);
    const char* func = name.starts_with("aten::index_add") ? "index_add" : "index_reduce";
    if (empty_along(source)) {
      const int64_t dim = at::maybe_wrap_dim(s[1].toInt(), source.dim());
      TORCH_CHECK(index.numel() == 0, func, "_(): Number of indices (", index.numel(),
                  ") should be equal to source.size(dim): (", source.size(dim),
                  "), for dim: ", dim);
    }
    TORCH_CHECK_INDEX(index.dim() <= 1, func,
                      "_(): Index is supposed to be a vector, but got dim: ", index.dim(),
                      " with type: ", index.scalar_type(), " and size: ", index.sizes());
    TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, func,
                "_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
    TORCH_CHECK(self.scalar_type() == source.scalar_type(), func, "_(): self (", self.scalar_type(),
                ") and source (", source.scalar_type(), ") must have the same scalar type");
    const bool in_place = name.ends_with("_");
    const size_t args = std::string(func) == "index_add" ? 5 : 6;  // without out=
    const bool out = !in_place && s.size() > args;
    at::Tensor result = in_place ? self
                        : out    ? s.back().toTensor()
                                 : at::empty(self.sizes(), self.options());
    s.clear();
    s.emplace_back(result);
    return true;
  }
  if (name == "aten::native_layer_norm") {
    // The Meta kernel types the statistics float32 for every reduced-precision input; CPU keeps
    // the input's dtype unless the weight or bias is float32 (mixed).
    const at::Tensor x = T(0), w = T(2), b = T(3);
    auto [y, mean, rstd] =
        at::native_layer_norm_symint(x, s[1].toSymIntVector(), w, b, s[4].toDouble());
    const bool mixed = at::isReducedFloatingType(x.scalar_type()) &&
                       ((w.defined() && w.scalar_type() == at::kFloat) ||
                        (b.defined() && b.scalar_type() == at::kFloat));
    const at::ScalarType stat = mixed ? at::kFloat : x.scalar_type();
    s.clear();
    s.emplace_back(y);
    s.emplace_back(at::empty(mean.sizes(), mean.options().dtype(stat)));
    s.emplace_back(at::empty(rstd.sizes(), rstd.options().dtype(stat)));
    return true;
  }
  if (name == "aten::convolution_overrideable") {
    at::Tensor out = at::convolution_symint(T(0), T(1), T(2), s[3].toSymIntVector(),
                                            s[4].toSymIntVector(), s[5].toSymIntVector(),
                                            s[6].toBool(), s[7].toSymIntVector(), s[8].toSymInt());
    s.clear();
    s.emplace_back(out);
    return true;
  }
  if (name == "aten::convolution_backward_overrideable") {
    at::Tensor input = T(1), weight = T(2);
    int64_t channels = s[6].toBool() ? weight.size(1) * s[8].toInt() : weight.size(0);
    at::Tensor gi = at::empty_like(input), gw = at::empty_like(weight);
    at::Tensor gb = at::empty({channels}, weight.options());
    s.clear();
    s.emplace_back(gi);
    s.emplace_back(gw);
    s.emplace_back(gb);
    return true;
  }
  if (name == "aten::_scaled_dot_product_fused_attention_overrideable_backward") {
    at::Tensor bias = T(4);
    at::Tensor gq = at::empty_like(T(1)), gk = at::empty_like(T(2)), gv = at::empty_like(T(3));
    at::Tensor gb = bias.defined() ? at::empty_like(bias) : at::Tensor();
    s.clear();
    s.emplace_back(gq);
    s.emplace_back(gk);
    s.emplace_back(gv);
    s.emplace_back(gb);
    return true;
  }
  return false;
}

namespace {

// Boolean masks in Tensor?[] indices become their nonzero() coordinates, as in ATen's index
// kernels; that read of the mask's size is the one host sync x[mask] needs.
void ExpandMaskIndices(const c10::FunctionSchema& schema, std::vector<c10::IValue>& args) {
  // index_put's uint8 masks warn as CPU's (index's warn in its Meta kernel, which sees them).
  const bool put = schema.name() == "aten::index_put" || schema.name() == "aten::index_put_" ||
                   schema.name() == "aten::_index_put_impl_";
  for (auto& v : args) {
    if (put && v.isList() && !v.isOptionalTensorList()) {
      // TorchScript passes index_put's Tensor?[] as a list of another type.
      c10::List<std::optional<at::Tensor>> optional;
      for (const c10::IValue& e : v.toListRef()) {
        optional.push_back(e.isTensor() ? std::optional<at::Tensor>(e.toTensor()) : std::nullopt);
      }
      v = optional;
    }
    if (!v.isOptionalTensorList()) continue;
    bool has_mask = false;
    for (std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      has_mask |=
          t && t->defined() && (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte);
    }
    if (!has_mask) continue;
    c10::List<std::optional<at::Tensor>> out;
    for (std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      if (t && t->defined() && (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte)) {
        if (put && t->scalar_type() == at::kByte) {
          TORCH_WARN(
              "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
              "instead.");
        }
        at::Tensor nz = at::nonzero(*t);
        for (int64_t k = 0; k < t->dim(); ++k) out.push_back(nz.select(1, k));
      } else {
        out.push_back(t);
      }
    }
    v = out;
  }
}

// native_batch_norm updates its running stats although its schema does not say so.
bool IsUnannotatedMutation(const c10::FunctionSchema& s, size_t j) {
  const std::string& arg = s.arguments()[j].name();
  return s.name() == "aten::native_batch_norm" && (arg == "running_mean" || arg == "running_var");
}

// The argument a return writes into (its alias annotation), or -1.
int AliasedArg(const c10::FunctionSchema& s, size_t ret) {
  const c10::AliasInfo* alias = s.returns()[ret].alias_info();
  if (alias == nullptr || !alias->isWrite()) return -1;
  for (size_t j = 0; j < s.arguments().size(); ++j) {
    const c10::AliasInfo* ai = s.arguments()[j].alias_info();
    if (ai != nullptr && ai->beforeSets() == alias->beforeSets()) return static_cast<int>(j);
  }
  return -1;
}

bool NeedsGenerator(const c10::FunctionSchema& s, const std::vector<c10::IValue>& args) {
  if (s.name() == "aten::native_dropout") return true;
  if (s.name() == "aten::_scaled_dot_product_fused_attention_overrideable") {
    return args[4].toDouble() > 0;  // dropout_p
  }
  for (const auto& a : s.arguments()) {
    if (a.name() == "generator") return true;
  }
  return false;
}

// How many random values an op may draw: enough for its output and for its largest input (ops
// like multinomial draw one value per input element), so calls never share offsets.
int64_t RandomCount(const std::vector<c10::IValue>& args, const std::vector<ir::Type>& out) {
  int64_t n = out.empty() ? 1 : out[0].numel();
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined()) n = std::max<int64_t>(n, v.toTensor().numel());
  }
  return n;
}

Value GeneratorState(GraphBuilder& b, const std::vector<c10::IValue>& args,
                     const c10::FunctionSchema& s, int64_t numel) {
  at::Generator gen;
  for (size_t i = 0; i < s.arguments().size(); ++i) {
    if (s.arguments()[i].name() == "generator" && !args[i].isNone()) gen = args[i].toGenerator();
  }
  if (!gen.defined()) gen = DefaultGenerator(b.device());
  eager::LazyPtr state = DrawState(gen, static_cast<uint64_t>(numel), b.device());
  NoteRandomDraw(state->buf, gen, static_cast<uint64_t>(numel));
  return b.Input(state);
}

}  // namespace

void RethrowAsTorchError(const std::string& op) {
  try {
    throw;
  } catch (const rt::Error& e) {
    eager::OpError err = eager::DescribeFailure(e, op);
    TORCH_CHECK_WITH(OutOfMemoryError, !err.out_of_memory, err.what());
    TORCH_CHECK(false, err.what());
  } catch (const eager::OpError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory, e.what());
    TORCH_CHECK_WITH(DistBackendError, !e.distributed, e.what());
    TORCH_CHECK_INDEX(!e.index_error, e.what());
    TORCH_CHECK(false, e.what());
  } catch (const lowering::ArgError& e) {
    TORCH_CHECK(false, e.what());
  } catch (const lowering::LoweringError& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu cannot lower ", op, ": ", e.what());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu cannot lower ", op, ": ", e.what());
  } catch (const std::bad_alloc&) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu ran out of host memory while running ", op,
                     " (std::bad_alloc)");
  }
}

void RaiseFailedChecks(int device, bool wait) {
  try {
    eager::RaiseFailedChecks(device, wait);
  } catch (const eager::OpError&) {
    RethrowAsTorchError("a value check");
  }
}

namespace {

// One call of an op, as the steps below see it.
struct OpCall {
  const c10::OperatorHandle& op;
  const c10::FunctionSchema& schema;
  const std::string& name;  // "aten::add.Tensor"
  std::vector<c10::IValue> args;
  int device = 0;
  // With at least one tensor return, Meta gives every return (tensors and ints); ops returning
  // only scalars (torch.equal) compute them on the device and read them back.
  bool tensor_returns = false;
};

// Step 3: output sizes, strides and dtypes, and PyTorch's own errors, from the Meta kernel
// (cached by argument metadata).
std::vector<TensorMeta> MetaShapes(const OpCall& call) {
  std::vector<TensorMeta> metas;
  if (!call.tensor_returns) return metas;
  std::optional<std::string> key = MetaKey(call.op, call.args);
  if (key) {
    if (std::optional<std::vector<TensorMeta>> hit = LookupMeta(*key)) return std::move(*hit);
  }
  std::vector<c10::IValue> meta_args;
  for (const auto& v : call.args) meta_args.push_back(ToMeta(v));
  torch::jit::Stack meta_stack = meta_args;
  if (!MetaOverride(call.schema.name(), meta_stack)) {
    call.op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
  }
  for (size_t i = 0; i < meta_stack.size(); ++i) {
    const c10::IValue& r = meta_stack[i];
    if (r.isInt() || r.isSymInt()) {
      int64_t v = r.isInt() ? r.toInt() : r.toSymInt().guard_int(__FILE__, __LINE__);
      metas.push_back({{}, {}, at::kLong, false, v});
      continue;
    }
    // A return that aliases an out= argument is read from that argument: some composite out=
    // kernels (linalg_inv_ex.inverse) return references to their own temporaries, so the
    // returned IValue cannot be trusted, nor destroyed.
    int j = AliasedArg(call.schema, i);
    at::Tensor t = j >= 0 ? meta_args[j].toTensor() : (r.isTensor() ? r.toTensor() : at::Tensor());
    if (j >= 0) new (&meta_stack[i]) c10::IValue();
    if (!t.defined()) {
      metas.push_back({{0}, {1}, at::kFloat, false, std::nullopt});
      continue;
    }
    metas.push_back({t.sizes().vec(), t.strides().vec(), t.scalar_type(), true, std::nullopt});
  }
  if (key) StoreMeta(*key, metas);
  return metas;
}

// An out= argument must not overlap itself, nor an input in part; for ops that read their
// inputs while writing (gather, cat, ...) not at all. PyTorch's CPU kernels check the same.
void CheckOutOverlap(const OpCall& call) {
  static const std::set<std::string> kNoOverlap = {"aten::bernoulli", "aten::cat",
                                                   "aten::gather",    "aten::index_select",
                                                   "aten::kthvalue",  "aten::take"};
  bool none = kNoOverlap.count(call.schema.name()) > 0;
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (!IsOut(call.schema.arguments()[i]) || !call.args[i].isTensor()) continue;
    const at::Tensor& out = call.args[i].toTensor();
    at::assert_no_internal_overlap(out);
    auto check = [&](const at::Tensor& in) {
      if (!in.defined()) return;
      if (none) {
        at::assert_no_overlap(out, in);
      } else {
        at::assert_no_partial_overlap(out, in);
      }
    };
    for (size_t j = 0; j < call.args.size(); ++j) {
      if (IsOut(call.schema.arguments()[j])) continue;
      if (call.args[j].isTensor()) check(call.args[j].toTensor());
      if (call.args[j].isTensorList()) {
        for (const at::Tensor& t : call.args[j].toTensorList().vec()) check(t);
      }
    }
  }
}

// PyTorch's promoted dtype of the tensor and number arguments, optionally leaving bool tensors
// out of it.
at::ScalarType CommonType(const OpCall& call, bool with_bool) {
  at::native::ResultTypeState rts{};
  for (size_t i = 0; i < call.schema.arguments().size(); ++i) {
    const c10::Argument& a = call.schema.arguments()[i];
    const c10::IValue& v = call.args[i];
    if (IsOut(a)) continue;
    if (v.isTensor() && v.toTensor().defined()) {
      if (with_bool || v.toTensor().scalar_type() != at::kBool) {
        rts = at::native::update_result_type_state(v.toTensor(), rts);
      }
    } else if (Unwrapped(a.real_type())->kind() == c10::TypeKind::NumberType && !v.isNone()) {
      rts = at::native::update_result_type_state(v.toScalar(), rts);
    }
  }
  return at::native::result_type(rts);
}

// Step 4: the rule's arguments. Tensors become IR values read through their views, scalars
// 0-d parameters; also the promoted dtype. float8 promotes with nothing, not even bool: when
// promotion refuses, a condition or mask stays out of it (`where(mask, f8, f8)` is f8), and
// when it still refuses (an index: `index_select(f8, 0, long)`) there is no common dtype. An
// op that does promote its operands has raised PyTorch's error in its Meta kernel already.
void ReadInputs(const OpCall& call, GraphBuilder& b, lowering::Ctx& ctx) {
  for (size_t i = 0; i < call.schema.arguments().size(); ++i) {
    const c10::Argument& a = call.schema.arguments()[i];
    ctx.args.emplace_back(a.name(), IsOut(a) ? Arg{} : ToArg(b, a, call.args[i]));
  }
  at::ScalarType t;
  try {
    t = CommonType(call, true);
  } catch (const c10::Error&) {
    try {
      t = CommonType(call, false);
    } catch (const c10::Error&) {
      t = at::ScalarType::Undefined;
    }
  }
  ctx.common = t == at::ScalarType::Undefined ? rt::DType::kInvalid : ToDType(t);
}

// Step 5 (before lowering): where each return goes (a new tensor allocated with Meta's layout,
// or the argument an in-place / out= op writes), and the types the rule must produce (into ctx,
// unless it is null: a replay lowers nothing).
std::vector<at::Tensor> PrepareOutputs(const OpCall& call, const std::vector<TensorMeta>& metas,
                                       lowering::Ctx* ctx) {
  std::vector<at::Tensor> targets;
  const auto& returns = call.schema.returns();
  for (size_t i = 0; i < returns.size(); ++i) {
    if (!call.tensor_returns) {
      c10::TypeKind k = returns[i].type()->kind();
      ctx->out.push_back({k == c10::TypeKind::BoolType  ? rt::DType::kPred
                          : k == c10::TypeKind::IntType ? rt::DType::kS64
                                                        : rt::DType::kF64,
                          {}});
      continue;
    }
    const TensorMeta& meta = metas[i];
    if (!meta.defined) {  // the rule still returns a value; it is dropped
      targets.emplace_back();
      if (ctx) ctx->out.push_back({meta.scalar ? rt::DType::kS64 : rt::DType::kF32, {0}});
      continue;
    }
    at::Tensor target;
    const c10::AliasInfo* alias = returns[i].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      int j = AliasedArg(call.schema, i);
      if (j >= 0) target = call.args[j].toTensor();
      TORCH_CHECK(target.defined(), "tpu: cannot find the argument ", call.name, " writes into");
      if (target.sizes() != c10::IntArrayRef(meta.sizes)) target.resize_(meta.sizes);
      if (target.strides() != c10::IntArrayRef(meta.strides))
        target.as_strided_(meta.sizes, meta.strides);
    } else if (alias != nullptr) {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: view op ", call.name, " has no tpu kernel");
    } else {
      target = at::empty_strided(
          meta.sizes, meta.strides,
          at::TensorOptions().dtype(meta.dtype).device(c10::DeviceType::PrivateUse1, call.device));
    }
    targets.push_back(target);
    if (ctx) ctx->out.push_back({ToDType(meta.dtype), meta.sizes});
  }
  return targets;
}

// Random ops read [seed, offset] from their generator, which then advances.
void DrawRandomState(const OpCall& call, GraphBuilder& b, lowering::Ctx& ctx) {
  if (!NeedsGenerator(call.schema, call.args)) return;
  Arg gen;
  gen.kind = Arg::Kind::kValue;
  gen.value = GeneratorState(b, call.args, call.schema, RandomCount(call.args, ctx.out));
  auto it = std::find_if(ctx.args.begin(), ctx.args.end(),
                         [](const auto& a) { return a.first == "generator"; });
  if (it != ctx.args.end()) {
    it->second = gen;
  } else {
    ctx.args.emplace_back("generator", gen);
  }
}

// Step 6: each result is written to its output (through the output's view), and arguments the
// op mutates without returning them (running stats) take the rule's extra results.
void WriteBack(const OpCall& call, GraphBuilder& b, const lowering::Ctx& ctx,
               const std::vector<Value>& results, const std::vector<at::Tensor>& targets) {
  const auto& returns = call.schema.returns();
  std::vector<at::Tensor> mutated;
  for (size_t j = 0; j < call.args.size(); ++j) {
    const c10::AliasInfo* ai = call.schema.arguments()[j].alias_info();
    if (IsUnannotatedMutation(call.schema, j) && call.args[j].isTensor()) {
      mutated.push_back(call.args[j].toTensor());
      continue;
    }
    if (ai == nullptr || !ai->isWrite() || !call.args[j].isTensor()) continue;
    bool returned = false;
    for (const auto& r : returns) {
      returned |= r.alias_info() != nullptr && r.alias_info()->beforeSets() == ai->beforeSets();
    }
    if (!returned) mutated.push_back(call.args[j].toTensor());
  }
  TORCH_CHECK(results.size() == returns.size() || results.size() == returns.size() + mutated.size(),
              "tpu: lowering of ", call.name, " returned ", results.size(), " values for ",
              returns.size(), " outputs");
  for (size_t k = returns.size(); k < results.size(); ++k) {
    b.Write(mutated[k - returns.size()], results[k]);
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i].defined()) continue;
    TORCH_CHECK(b.g.type(results[i]).dims == ctx.out[i].dims, "tpu: lowering of ", call.name,
                " produced shape mismatch for output ", i);
    b.Write(targets[i], results[i]);
  }
  if (!call.tensor_returns) {
    for (size_t i = 0; i < returns.size(); ++i)
      b.g.results.push_back(ir::Convert(b.g, results[i], ctx.out[i].dtype));
  }
}

// The op's tensor (and int) returns replace its arguments on the stack.
void PushReturns(const OpCall& call, const std::vector<TensorMeta>& metas,
                 const std::vector<at::Tensor>& targets, torch::jit::Stack* stack) {
  torch::jit::drop(*stack, call.args.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    if (metas[i].scalar) {
      stack->emplace_back(*metas[i].scalar);
    } else {
      stack->emplace_back(targets[i]);
    }
  }
}

// Step 7: the graph runs (or is recorded); the op's returns replace its arguments on the stack.
void Submit(const OpCall& call, GraphBuilder& b, const lowering::Ctx& ctx,
            const std::vector<TensorMeta>& metas, const std::vector<at::Tensor>& targets,
            torch::jit::Stack* stack) {
  std::vector<eager::LazyPtr> host = b.Run();
  if (call.tensor_returns) return PushReturns(call, metas, targets, stack);
  torch::jit::drop(*stack, call.args.size());
  for (size_t i = 0; i < host.size(); ++i) {
    rt::BufferPtr buf = eager::Materialize(host[i]);
    if (ctx.out[i].dtype == rt::DType::kPred) {
      bool v = false;
      buf->ToHost(&v, 1);
      stack->emplace_back(v);
    } else if (ctx.out[i].dtype == rt::DType::kS64) {
      int64_t v = 0;
      buf->ToHost(&v, 8);
      stack->emplace_back(v);
    } else {
      double v = 0;
      buf->ToHost(&v, 8);
      stack->emplace_back(v);
    }
  }
  if (!host.empty()) RaiseFailedChecks(call.device, false);  // a host read
}

struct OpNameAndRule {
  std::string base, overload;  // the schema's, to tell a schema from a later one at its address
  std::string name;            // "aten::add.Tensor"
  lowering::Rule rule;
  ArgumentCheck check;  // nullptr: none of its own
};

// The rule, argument check and full name of an operator, found once per schema and thread: the
// lookups build strings, and an op's host cost is a few microseconds.
const OpNameAndRule& RuleOf(const c10::FunctionSchema& schema) {
  thread_local std::unordered_map<const c10::FunctionSchema*, OpNameAndRule> seen;
  auto it = seen.find(&schema);
  if (it != seen.end() && it->second.base == schema.name() &&
      it->second.overload == schema.overload_name()) {
    return it->second;
  }
  const std::string& base = schema.name();
  const std::string& overload = schema.overload_name();
  OpNameAndRule e{base, overload, overload.empty() ? base : base + "." + overload,
                  lowering::FindRule(base, overload), FindArgumentCheck(base)};
  return seen.insert_or_assign(&schema, std::move(e)).first->second;
}

// A call the op cache has seen: its recorded graph runs on this call's buffers (steps 4 to 7
// without lowering).
void Replay(const OpCall& call, const OpRecipe& r, const CallTensors& tensors,
            torch::jit::Stack* stack) {
  std::vector<eager::LazyPtr> inputs = RecipeInputs(r, tensors, call.device);
  std::vector<at::Tensor> targets = PrepareOutputs(call, r.metas, nullptr);
  eager::GetMetrics().replayed_ops++;  // counted before a failed check raises (strict mode)
  std::vector<eager::LazyPtr> outs = eager::Submit(r.g, r.hash, inputs, call.device, call.name);
  if (r.checks) eager::AfterSubmit(outs.back(), r.checks, call.name);
  for (size_t k = 0; k < r.writes.size(); ++k) {
    int w = r.writes[k];
    Assign(w >= 0 ? tensors.tensors[w].storage() : targets[~w].storage(), outs[r.results + k]);
  }
  PushReturns(call, r.metas, targets, stack);
}

}  // namespace

// Every step has its own function above; torch.compile's graphs go through this same kernel
// (aten/graph_capture.h records them instead of running them).
void BoxedKernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  // Step 2: the rule, by schema name.
  const OpNameAndRule& found = RuleOf(schema);
  lowering::Rule rule = found.rule;
  OpCall call{op, schema, found.name, {}, 0, false};
  if (rule == nullptr) {
    // Quantized tensors have no tpu storage format (PyTorch's CUDA backend lacks most of them
    // too): say so instead of naming one op of many.
    TORCH_CHECK_NOT_IMPLEMENTED(
        schema.name().find("quantize") == std::string::npos &&
            schema.name().find("_affine_quantized") == std::string::npos,
        "tpu does not support quantized tensors ('", call.name,
        "'): dequantize them, or quantize on the CPU and move the dequantized result");
    if (CpuFallbackEnabled()) return CpuFallback(op, stack, call.name);
    TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", call.name,
                                "' is not currently implemented for the tpu device. Set ",
                                "TORCHTPU_CPU_FALLBACK=1 to run it on the CPU instead (slow).");
  }
  CheckNotForked();
  call.args.assign(stack->end() - schema.arguments().size(), stack->end());
  ExpandMaskIndices(schema, call.args);
  call.device = OpDevice(call.args);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, call.device));
  for (const auto& r : schema.returns()) {
    call.tensor_returns |= r.type()->kind() == c10::TypeKind::TensorType;
  }
  if (found.check != nullptr) found.check(schema, call.args);
  // Ops answering the host (torch.equal) read a result now: they are not worth a recipe.
  CallTensors tensors;
  std::optional<std::string> key;
  if (call.tensor_returns) key = OpCacheKey(op, call.args, call.device, tensors);
  if (key) {
    if (OpRecipePtr r = LookupRecipe(*key)) {
      try {
        return Replay(call, *r, tensors, stack);
      } catch (const c10::Error&) {
        throw;
      } catch (...) {
        RethrowAsTorchError(call.name);
      }
    }
  }
  std::vector<TensorMeta> metas = MetaShapes(call);
  CheckOutOverlap(call);

  GraphBuilder b(call.device, call.name);
  if (key) b.KeepGraph();
  lowering::Ctx ctx{b.g, {}, {}};
  try {
    ReadInputs(call, b, ctx);
    std::vector<at::Tensor> targets = PrepareOutputs(call, metas, &ctx);
    DrawRandomState(call, b, ctx);
    std::vector<Value> results = rule(ctx);  // step 5: lower
    b.Checks(ctx.checks);
    WriteBack(call, b, ctx, results, targets);
    Submit(call, b, ctx, metas, targets, stack);
    if (key) StoreRecipe(*key, b, std::move(metas), tensors, targets);
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowAsTorchError(call.name);
  }
}

}  // namespace tpu::aten
