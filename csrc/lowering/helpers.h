// Helpers shared by the rule families: operand preparation and elementwise templates.
#pragma once

#include <memory>
#include <vector>

#include "ir/builder.h"
#include "lowering/rule.h"

namespace tpu::lowering {

// Elementwise arithmetic on values of one type (the rules' shorthand).
Value Add(Ctx& c, Value a, Value b);
Value Sub(Ctx& c, Value a, Value b);
Value Mul(Ctx& c, Value a, Value b);
Value Div(Ctx& c, Value a, Value b);

// x converted to dtype `t` and broadcast (numpy rules) to `dims`.
Value Cast(Ctx& c, Value x, DType t, const Dims& dims);
Value Cast(Ctx& c, Value x, DType t);
// log(exp(x) + exp(y)) of complex x, y as CPU computes it (ATen's _log_add_exp_helper).
Value ComplexLogAddExp(Graph& h, Value x, Value y);
// Named input converted/broadcast to the first output's type.
Value InAsOut(Ctx& c, const std::string& name);
// |x| in x's real dtype for a complex x; x itself otherwise.
Value Magnitude(Ctx& c, Value x);
// A scalar constant shaped like `like`.
Value Splat(Ctx& c, double v, Value like);
Value Splat(Ctx& c, double v, const Type& t);
// Normalized reduction dims from the "dim" argument (all dims when absent or empty).
Dims ReduceDims(Ctx& c, int64_t rank, const std::string& name = "dim");
// Reshapes a reduced value back to keepdim form when keepdim is set.
Value KeepDims(Ctx& c, Value reduced, const Dims& in_dims, const Dims& dims, bool keepdim);
// a / b rounded toward -inf (Python's //), for ints and floats.
Value FloorDivide(Ctx& c, Value a, Value b);
// The type half-precision floats compute in (float32, as ATen's CPU kernels); others unchanged.
DType AccOf(DType t);
// Sum of x over one dim.
Value SumDim(Ctx& c, Value x, int64_t dim);
// The float type used to compute a transcendental function of an integer input.
DType FloatFor(DType t);
// Identity values of reductions.
double LowestOf(DType t);
double HighestOf(DType t);

// The comparator region of a stablehlo.sort of (values of dtype t, s64 indices): NaN sorts as the
// largest value (PyTorch), -0 == +0.
std::shared_ptr<ir::Graph> SortComparator(DType t, bool descending);

// Arguments built by a rule, for CallRule.
Arg ValueArg(Value v);
Arg IntArg(int64_t i);
Arg BoolArg(bool b);
Arg IntsArg(Dims v);
// Runs another op's rule on this graph (reuse without copying its lowering).
std::vector<Value> CallRule(Ctx& c, const char* name, const char* overload,
                            std::vector<std::pair<std::string, Arg>> args, std::vector<Type> out);

// 0, 1, ..., rank - 1: every dim, for a full reduction.
Dims AllDims(int64_t rank);
// An integer index as s64, its negative entries wrapped against `size`.
Value Wrap(Ctx& c, Value index, int64_t size);
// i with a trailing size-1 dim appended: the index vector of a one-dim gather or scatter.
Value AsVector(Ctx& c, Value i);

// Shorthand for elementwise arithmetic on values of one type (dtype t, dims d) in graph g, for
// rules that build long formulas (special functions, loop bodies).
struct Elementwise {
  Graph& g;
  DType t;
  Dims d;
  Value K(double v) const { return ir::Constant(g, v, t, d); }
  Value B(const char* op, Value a, Value b) const { return ir::Binary(g, op, a, b); }
  Value U(const char* op, Value a) const { return ir::Unary(g, op, a); }
  Value Add(Value a, Value b) const { return B("stablehlo.add", a, b); }
  Value Sub(Value a, Value b) const { return B("stablehlo.subtract", a, b); }
  Value Mul(Value a, Value b) const { return B("stablehlo.multiply", a, b); }
  Value Div(Value a, Value b) const { return B("stablehlo.divide", a, b); }
  Value Abs(Value a) const { return U("stablehlo.abs", a); }
  Value Sel(Value p, Value a, Value b) const { return ir::Select(g, p, a, b); }
  Value Lt(Value a, Value b) const { return ir::Compare(g, a, b, "LT"); }
  Value Cmp(Value a, double b, const char* dir) const { return ir::Compare(g, a, K(b), dir); }
};

// Value checks (see Check in rule.h). Expect: every element of pred `ok` holds; `quoted` (shaped
// like ok, or -1) gives the value the message quotes, taken at the first element that fails.
void Expect(Ctx& c, Value ok, Value quoted, const std::string& type, const std::string& message);
// Every element of integer `index` is a valid index into a dim of `size`: in [0, size), or in
// [-size, size) when negative indices wrap.
void ExpectIndex(Ctx& c, Value index, int64_t size, bool wraps, const std::string& type,
                 const std::string& message);
// PyTorch's usual message for an index out of range: "index {} is out of bounds for dimension
// `dim` with size `size`" (with `prefix` in front).
std::string OutOfBounds(int64_t dim, int64_t size, const std::string& prefix = "");
// The op's checks as one s64[2] value: [0, 0] when all hold, else [k + 1, quoted] for the first
// check k that fails.
Value CheckResult(Graph& g, const std::vector<Check>& checks);

namespace detail {
// A stablehlo.while whose first state value counts j = from, from + step, ...; `cond(region, j,
// carried)` says whether to run `body(region, j, carried)`, which returns the next carried values.
template <typename Cond, typename Body>
std::vector<Value> Counted(Graph& g, int64_t from, int64_t step, const std::vector<Value>& init,
                           Cond cond_of, Body body) {
  std::vector<Value> state{ir::Constant(g, static_cast<double>(from), DType::kS64)};
  state.insert(state.end(), init.begin(), init.end());
  auto region = [&](std::vector<Value>& args) {
    auto r = std::make_shared<Graph>();
    for (Value v : state) args.push_back(r->Param(g.type(v)));
    return r;
  };
  std::vector<Value> ca, ba;
  auto cond = region(ca);
  cond->results = {cond_of(*cond, ca[0], std::vector<Value>(ca.begin() + 1, ca.end()))};
  auto b = region(ba);
  std::vector<Value> carried(ba.begin() + 1, ba.end());
  std::vector<Value> next = body(*b, ba[0], carried);
  next.insert(next.begin(), ir::Binary(*b, "stablehlo.add", ba[0],
                                       ir::Constant(*b, static_cast<double>(step), DType::kS64)));
  b->results = next;
  std::vector<Value> out = ir::While(g, state, cond, b);
  return std::vector<Value>(out.begin() + 1, out.end());
}
}  // namespace detail

// A counted loop (stablehlo.while): `body(region, j, carried)` returns the next carried values for
// j = from, ... while j < to (step +1) or j > to (step -1, counting down from `from`).
template <typename Body>
std::vector<Value> For(Graph& g, int64_t from, int64_t to, int64_t step,
                       const std::vector<Value>& init, Body body) {
  auto cond = [&](Graph& h, Value j, const std::vector<Value>&) {
    return ir::Compare(h, j, ir::Constant(h, static_cast<double>(to), DType::kS64),
                       step > 0 ? "LT" : "GT");
  };
  return detail::Counted(g, from, step, init, cond, body);
}

// As For, counting up while j < `to`, an s64 scalar of g known only at run time (it rides along
// as the first state value).
template <typename Body>
std::vector<Value> ForUpTo(Graph& g, int64_t from, Value to, const std::vector<Value>& init,
                           Body body) {
  std::vector<Value> state{to};
  state.insert(state.end(), init.begin(), init.end());
  auto cond = [](Graph& h, Value j, const std::vector<Value>& s) {
    return ir::Compare(h, j, s[0], "LT");
  };
  auto step = [&](Graph& h, Value j, std::vector<Value>& s) {
    std::vector<Value> rest(s.begin() + 1, s.end());
    std::vector<Value> next = body(h, j, rest);
    next.insert(next.begin(), s[0]);
    return next;
  };
  std::vector<Value> out = detail::Counted(g, from, 1, state, cond, step);
  return std::vector<Value>(out.begin() + 1, out.end());
}

}  // namespace tpu::lowering
