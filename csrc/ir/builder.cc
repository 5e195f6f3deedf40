#include "ir/builder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace tpu::ir {

namespace {
std::string Join(const Dims& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// Bit pattern of a non-finite float in the given float type, as MLIR hex.
std::string NonFiniteHex(double v, DType t) {
  bool neg = std::signbit(v);
  const char* s = nullptr;
  if (std::isnan(v)) {
    switch (t) {
      case DType::kF16:
        return "0x7E00";
      case DType::kBF16:
        return "0x7FC0";
      case DType::kF8E5M2:
        return "0x7E";
      case DType::kF8E4M3FN:
        return "0x7F";
      case DType::kF64:
        return "0x7FF8000000000000";
      default:
        return "0x7FC00000";
    }
  }
  switch (t) {
    case DType::kF16:
      s = neg ? "0xFC00" : "0x7C00";
      break;
    case DType::kBF16:
      s = neg ? "0xFF80" : "0x7F80";
      break;
    case DType::kF8E5M2:
      s = neg ? "0xFC" : "0x7C";
      break;
    case DType::kF8E4M3FN:  // no infinities: NaN, as PyTorch's casts give
      s = neg ? "0xFF" : "0x7F";
      break;
    case DType::kF64:
      s = neg ? "0xFFF0000000000000" : "0x7FF0000000000000";
      break;
    default:
      s = neg ? "0xFF800000" : "0x7F800000";
      break;
  }
  return s;
}
}  // namespace

std::string I64Array(const Dims& v) {
  return v.empty() ? "array<i64>" : "array<i64: " + Join(v) + ">";
}

std::string BoolArray(const std::vector<bool>& v) {
  if (v.empty()) return "array<i1>";
  std::string s = "array<i1: ";
  for (size_t i = 0; i < v.size(); ++i) s += std::string(i ? ", " : "") + (v[i] ? "true" : "false");
  return s + ">";
}

std::string DenseI64(const std::vector<Dims>& rows) {
  std::string s = "dense<[";
  for (size_t i = 0; i < rows.size(); ++i) s += (i ? ", [" : "[") + Join(rows[i]) + "]";
  size_t cols = rows.empty() ? 0 : rows[0].size();
  return s + "]> : tensor<" + std::to_string(rows.size()) + "x" + std::to_string(cols) + "xi64>";
}

std::string ScalarLiteral(double v, DType t) {
  if (t == DType::kPred) return v != 0 ? "true" : "false";
  if (rt::IsComplex(t)) return "(" + ScalarLiteral(v, rt::RealOf(t)) + ", 0.0)";
  if (rt::IsFloat(t)) {
    if (!std::isfinite(v)) return NonFiniteHex(v, t);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17e", v);
    return buf;
  }
  // Doubles at or beyond the int64 range would overflow the cast: print the bound itself.
  if (v >= 9223372036854775807.0)
    return rt::IsUnsigned(t) && v >= 18446744073709551615.0
               ? "18446744073709551615"
               : (rt::IsUnsigned(t) ? std::to_string(static_cast<uint64_t>(v))
                                    : "9223372036854775807");
  if (v <= -9223372036854775808.0) return "-9223372036854775808";
  return std::to_string(static_cast<int64_t>(v));
}

Type TypeOf(const Graph& g, Value v) { return g.type(v); }
Type WithDType(Type t, DType d) {
  t.dtype = d;
  return t;
}
Type WithDims(Type t, Dims d) {
  t.dims = std::move(d);
  return t;
}

Value Constant(Graph& g, double v, DType t, const Dims& dims) {
  Type scalar{t, {}};
  Value c = g.Op1("stablehlo.constant", {}, scalar,
                  "value = dense<" + ScalarLiteral(v, t) + "> : " + scalar.str());
  return dims.empty() ? c : BroadcastInDim(g, c, dims, {});
}

Value Unary(Graph& g, const std::string& op, Value x) { return g.Op1(op, {x}, g.type(x)); }

Value Binary(Graph& g, const std::string& op, Value a, Value b) {
  // StableHLO allows a complex remainder, but XLA:CPU's emitter crashes the process on one.
  if (op == "stablehlo.remainder" && rt::IsComplex(g.type(a).dtype)) {
    throw std::invalid_argument("remainder is not defined for complex numbers");
  }
  return g.Op1(op, {a, b}, g.type(a));
}

Value Compare(Graph& g, Value a, Value b, const std::string& direction) {
  DType dt = g.type(a).dtype;
  std::string kind =
      rt::IsFloat(dt) || rt::IsComplex(dt) ? "FLOAT" : (rt::IsSigned(dt) ? "SIGNED" : "UNSIGNED");
  return g.Op1("stablehlo.compare", {a, b}, WithDType(g.type(a), DType::kPred),
               "comparison_direction = #stablehlo<comparison_direction " + direction +
                   ">, compare_type = #stablehlo<comparison_type " + kind + ">");
}

Value Select(Graph& g, Value pred, Value a, Value b) {
  return g.Op1("stablehlo.select", {pred, a, b}, g.type(a));
}

Value Convert(Graph& g, Value x, DType t) {
  const Type& in = g.type(x);
  if (in.dtype == t) return x;
  if (t == DType::kPred) return Compare(g, x, Constant(g, 0, in.dtype, in.dims), "NE");
  // Complex to real keeps the real part (PyTorch's cast, without its warning).
  if (rt::IsComplex(in.dtype) && !rt::IsComplex(t)) return Convert(g, Real(g, x), t);
  if (rt::IsComplex(in.dtype) && rt::IsComplex(t))
    return Complex(g, Convert(g, Real(g, x), rt::RealOf(t)), Convert(g, Imag(g, x), rt::RealOf(t)));
  return g.Op1("stablehlo.convert", {x}, WithDType(in, t));
}

Value Real(Graph& g, Value x) {
  const Type& t = g.type(x);
  if (!rt::IsComplex(t.dtype)) return x;
  return g.Op1("stablehlo.real", {x}, WithDType(t, rt::RealOf(t.dtype)));
}
Value Imag(Graph& g, Value x) {
  const Type& t = g.type(x);
  if (!rt::IsComplex(t.dtype)) return Constant(g, 0, t.dtype, t.dims);
  return g.Op1("stablehlo.imag", {x}, WithDType(t, rt::RealOf(t.dtype)));
}
Value Abs(Graph& g, Value x) {
  const Type& t = g.type(x);
  return g.Op1("stablehlo.abs", {x},
               WithDType(t, rt::IsComplex(t.dtype) ? rt::RealOf(t.dtype) : t.dtype));
}
Value AbsSq(Graph& g, Value x) {
  if (!rt::IsComplex(g.type(x).dtype)) return Binary(g, "stablehlo.multiply", x, x);
  Value re = Real(g, x), im = Imag(g, x);
  return Binary(g, "stablehlo.add", Binary(g, "stablehlo.multiply", re, re),
                Binary(g, "stablehlo.multiply", im, im));
}
Value Conj(Graph& g, Value z) {
  if (!rt::IsComplex(g.type(z).dtype)) return z;
  return Complex(g, Real(g, z), Unary(g, "stablehlo.negate", Imag(g, z)));
}
Value Complex(Graph& g, Value re, Value im) {
  const Type& t = g.type(re);
  DType c = t.dtype == DType::kF64 ? DType::kC128 : DType::kC64;
  return g.Op1("stablehlo.complex", {re, im}, WithDType(t, c));
}

Value BitcastConvert(Graph& g, Value x, Type t) {
  // PyTorch's bool is a byte; StableHLO's i1 has no byte to reinterpret: go through ui8.
  if (g.type(x).dtype == DType::kPred && t.dtype != DType::kPred) x = Convert(g, x, DType::kU8);
  if (t.dtype == DType::kPred && g.type(x).dtype != DType::kPred) {
    Value bytes = g.Op1("stablehlo.bitcast_convert", {x}, WithDType(t, DType::kU8));
    return Convert(g, bytes, DType::kPred);
  }
  return g.Op1("stablehlo.bitcast_convert", {x}, std::move(t));
}

Value BroadcastInDim(Graph& g, Value x, const Dims& out, const Dims& mapping) {
  if (g.type(x).dims == out && mapping.size() == out.size()) {
    bool identity = true;
    for (size_t i = 0; i < mapping.size(); ++i) identity &= mapping[i] == static_cast<int64_t>(i);
    if (identity) return x;
  }
  return g.Op1("stablehlo.broadcast_in_dim", {x}, WithDims(g.type(x), out),
               "broadcast_dimensions = " + I64Array(mapping));
}

Value BroadcastTo(Graph& g, Value x, const Dims& out) {
  const Dims& in = g.type(x).dims;
  if (in == out) return x;
  if (in.size() > out.size()) throw std::invalid_argument("BroadcastTo: rank too large");
  // Size-1 dims that must grow are dropped first, then re-expanded by broadcast_in_dim.
  size_t off = out.size() - in.size();
  Dims kept, mapping;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == out[off + i]) {
      kept.push_back(in[i]);
      mapping.push_back(static_cast<int64_t>(off + i));
    } else if (in[i] != 1) {
      throw std::invalid_argument("BroadcastTo: incompatible shapes");
    }
  }
  if (kept.size() != in.size()) x = Reshape(g, x, kept);
  return BroadcastInDim(g, x, out, mapping);
}

Value Reshape(Graph& g, Value x, const Dims& dims) {
  if (g.type(x).dims == dims) return x;
  return g.Op1("stablehlo.reshape", {x}, WithDims(g.type(x), dims));
}

Value Transpose(Graph& g, Value x, const Dims& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  const Dims& in = g.type(x).dims;
  Dims out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[perm[i]];
  return g.Op1("stablehlo.transpose", {x}, WithDims(g.type(x), out),
               "permutation = " + I64Array(perm));
}

Value Slice(Graph& g, Value x, const Dims& start, const Dims& limit, const Dims& strides_in) {
  Dims strides = strides_in.empty() ? Dims(start.size(), 1) : strides_in;
  const Dims& in = g.type(x).dims;
  Dims out(start.size());
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    out[i] = std::max<int64_t>(0, (limit[i] - start[i] + strides[i] - 1) / strides[i]);
    identity &= start[i] == 0 && limit[i] == in[i] && strides[i] == 1;
  }
  if (identity) return x;
  return g.Op1("stablehlo.slice", {x}, WithDims(g.type(x), out),
               "start_indices = " + I64Array(start) + ", limit_indices = " + I64Array(limit) +
                   ", strides = " + I64Array(strides));
}

Value Pad(Graph& g, Value x, Value pad_value, const Dims& lo, const Dims& hi,
          const Dims& interior_in) {
  Dims interior = interior_in.empty() ? Dims(lo.size(), 0) : interior_in;
  const Dims& in = g.type(x).dims;
  Dims out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = lo[i] + hi[i] + in[i] + std::max<int64_t>(0, in[i] - 1) * interior[i];
  }
  return g.Op1("stablehlo.pad", {x, pad_value}, WithDims(g.type(x), out),
               "edge_padding_low = " + I64Array(lo) + ", edge_padding_high = " + I64Array(hi) +
                   ", interior_padding = " + I64Array(interior));
}

Value Concat(Graph& g, const std::vector<Value>& xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  Type t = g.type(xs[0]);
  t.dims[dim] = 0;
  for (Value v : xs) t.dims[dim] += g.type(v).dims[dim];
  return g.Op1("stablehlo.concatenate", xs, t, "dimension = " + std::to_string(dim) + " : i64");
}

Value Iota(Graph& g, Type t, int64_t dim) {
  return g.Op1("stablehlo.iota", {}, std::move(t),
               "iota_dimension = " + std::to_string(dim) + " : i64");
}

Value ElementCount(Graph& g, Value x, const Dims& dims, DType t) {
  Value n = Constant(g, 1, DType::kS64);
  for (int64_t d : dims) {
    Value size = g.Op1("stablehlo.get_dimension_size", {x}, Type{DType::kS32, {}},
                       "dimension = " + std::to_string(d) + " : i64");
    n = Binary(g, "stablehlo.multiply", n, Convert(g, size, DType::kS64));
  }
  return Convert(g, n, t);
}

Value Reverse(Graph& g, Value x, const Dims& dims) {
  if (dims.empty()) return x;
  return g.Op1("stablehlo.reverse", {x}, g.type(x), "dimensions = " + I64Array(dims));
}

Value Clamp(Graph& g, Value lo, Value x, Value hi) {
  return g.Op1("stablehlo.clamp", {lo, x, hi}, g.type(x));
}

std::shared_ptr<Graph> ScalarRegion(DType t, const std::string& op) {
  auto r = std::make_shared<Graph>();
  Value a = r->Param(Type{t, {}});
  Value b = r->Param(Type{t, {}});
  r->results = {r->Op1(op, {a, b}, Type{t, {}})};
  return r;
}

Value Reduce(Graph& g, Value x, Value init, const Dims& dims, const std::string& op) {
  const Type& in = g.type(x);
  Dims out;
  for (int64_t i = 0; i < in.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced |= d == i;
    if (!reduced) out.push_back(in.dims[i]);
  }
  return g.Op1("stablehlo.reduce", {x, init}, Type{in.dtype, out}, "dimensions = " + I64Array(dims),
               {ScalarRegion(in.dtype, op)});
}

Value DotGeneral(Graph& g, Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch,
                 const Dims& lhs_contract, const Dims& rhs_contract, Type out) {
  auto list = [](const Dims& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  };
  return g.Op1("stablehlo.dot_general", {a, b}, std::move(out),
               "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                   list(lhs_batch) + ", rhs_batching_dimensions = " + list(rhs_batch) +
                   ", lhs_contracting_dimensions = " + list(lhs_contract) +
                   ", rhs_contracting_dimensions = " + list(rhs_contract) + ">");
}

Value DynamicUpdateSlice(Graph& g, Value base, Value update, const std::vector<Value>& starts) {
  std::vector<Value> operands{base, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return g.Op1("stablehlo.dynamic_update_slice", operands, g.type(base));
}

Value DynamicSlice(Graph& g, Value x, const std::vector<Value>& starts, const Dims& sizes) {
  std::vector<Value> operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return g.Op1("stablehlo.dynamic_slice", operands, Type{g.type(x).dtype, sizes},
               "slice_sizes = " + I64Array(sizes));
}

int64_t WrapDim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  return dim < 0 ? dim + r : dim;
}

Dims ContiguousStrides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return s;
}

Value ConstantI64(Graph& g, const Dims& v) {
  Type t{DType::kS64, {static_cast<int64_t>(v.size())}};
  std::string body = v.empty() ? "dense<>" : "dense<[" + Join(v) + "]>";
  return g.Op1("stablehlo.constant", {}, t, "value = " + body + " : " + t.str());
}

Dims AttrList(const std::string& attrs, const std::string& key) {
  Dims out;
  size_t at = attrs.find(key);
  if (at == std::string::npos) return out;
  size_t open = attrs.find_first_of("[:", at + key.size());
  size_t close = attrs.find_first_of("]>", open);
  std::string body = attrs.substr(open + 1, close - open - 1);
  for (size_t i = 0; i < body.size();) {
    size_t j = body.find(',', i);
    std::string item = body.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (item.find_first_of("0123456789") != std::string::npos) out.push_back(std::stoll(item));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

namespace {
std::string List(const Dims& v) { return "[" + Join(v) + "]"; }

// Window dims of a gather result / scatter update: every position outside the batch range.
Dims WindowDims(int64_t rank, int64_t batch_at, int64_t batch_rank) {
  Dims w;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < batch_at || i >= batch_at + batch_rank) w.push_back(i);
  }
  return w;
}
}  // namespace

Value Gather(Graph& g, Value x, Value idx, const Dims& index_dims, int64_t batch_at) {
  const Type& xt = g.type(x);
  Dims batch = g.type(idx).dims;
  batch.pop_back();
  Dims sizes = xt.dims, out, collapsed = index_dims;
  std::sort(collapsed.begin(), collapsed.end());
  // A dim of size 0 has no slice of 1 (`empty(10, 0)[[], []]`); StableHLO allows 0 there.
  for (int64_t d : index_dims) sizes[d] = std::min<int64_t>(1, xt.dims[d]);
  for (int64_t i = 0; i < xt.rank(); ++i) {
    if (!std::binary_search(collapsed.begin(), collapsed.end(), i)) out.push_back(xt.dims[i]);
  }
  out.insert(out.begin() + batch_at, batch.begin(), batch.end());
  Dims offset = WindowDims(static_cast<int64_t>(out.size()), batch_at, batch.size());
  return g.Op1("stablehlo.gather", {x, idx}, Type{xt.dtype, out},
               "dimension_numbers = #stablehlo.gather<offset_dims = " + List(offset) +
                   ", collapsed_slice_dims = " + List(collapsed) + ", start_index_map = " +
                   List(index_dims) + ", index_vector_dim = " + std::to_string(batch.size()) +
                   ">, slice_sizes = " + I64Array(sizes) + ", indices_are_sorted = false");
}

Value Scatter(Graph& g, Value x, Value idx, Value updates, const Dims& index_dims, int64_t batch_at,
              std::shared_ptr<Graph> combiner) {
  int64_t batch_rank = g.type(idx).rank() - 1;
  Dims inserted = index_dims;
  std::sort(inserted.begin(), inserted.end());
  Dims window = WindowDims(g.type(updates).rank(), batch_at, batch_rank);
  return g.Op1("stablehlo.scatter", {x, idx, updates}, g.type(x),
               "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " +
                   List(window) + ", inserted_window_dims = " + List(inserted) +
                   ", scatter_dims_to_operand_dims = " + List(index_dims) +
                   ", index_vector_dim = " + std::to_string(batch_rank) +
                   ">, indices_are_sorted = false, unique_indices = false",
               {std::move(combiner)});
}

std::shared_ptr<Graph> OverwriteRegion(DType t) {
  auto r = std::make_shared<Graph>();
  r->Param(Type{t, {}});
  r->results = {r->Param(Type{t, {}})};
  return r;
}

Value DotGeneralHighest(Graph& g, Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch,
                        const Dims& lhs_contract, const Dims& rhs_contract, Type out) {
  Value r = DotGeneral(g, a, b, lhs_batch, rhs_batch, lhs_contract, rhs_contract, std::move(out));
  g.nodes.back().attrs +=
      ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
  return r;
}

Value IntConstant(Graph& g, uint64_t bits, DType t, const Dims& dims) {
  Type scalar{t, {}};
  std::string lit =
      rt::IsUnsigned(t) ? std::to_string(bits) : std::to_string(static_cast<int64_t>(bits));
  Value c = g.Op1("stablehlo.constant", {}, scalar, "value = dense<" + lit + "> : " + scalar.str());
  return dims.empty() ? c : BroadcastInDim(g, c, dims, {});
}

std::vector<Value> While(Graph& g, const std::vector<Value>& init, std::shared_ptr<Graph> cond,
                         std::shared_ptr<Graph> body) {
  std::vector<Type> types;
  for (Value v : init) types.push_back(g.type(v));
  return g.Op("stablehlo.while", init, std::move(types), {}, {std::move(cond), std::move(body)});
}

Value ConstantVector(Graph& g, const std::vector<double>& v, DType t) {
  Type type{t, {static_cast<int64_t>(v.size())}};
  std::string body = "dense<[";
  for (size_t i = 0; i < v.size(); ++i) body += (i ? ", " : "") + ScalarLiteral(v[i], t);
  body = v.empty() ? "dense<>" : body + "]>";
  return g.Op1("stablehlo.constant", {}, type, "value = " + body + " : " + type.str());
}

}  // namespace tpu::ir
