// Small helpers that append one StableHLO op each. Lowering rules are written with these.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace tpu::ir {

using Dims = std::vector<int64_t>;

std::string I64Array(const Dims& v);                  // "array<i64: 1, 2>"
std::string BoolArray(const std::vector<bool>& v);    // "array<i1: true, false>"
std::string DenseI64(const std::vector<Dims>& rows);  // "dense<[[0, 1]]> : tensor<1x2xi64>"
std::string ScalarLiteral(double v, DType t);         // MLIR literal for a splat constant
// The integers of the list that follows `key` in an op's attributes ("array<i64: 0, 1>" or
// "[0, 1]"); empty when the key is missing.
Dims AttrList(const std::string& attrs, const std::string& key);

Type TypeOf(const Graph& g, Value v);
Type WithDType(Type t, DType d);
Type WithDims(Type t, Dims d);

Value Constant(Graph& g, double v, DType t, const Dims& dims = {});
Value Unary(Graph& g, const std::string& op, Value x);
Value Binary(Graph& g, const std::string& op, Value a, Value b);  // a, b of equal type
// direction: EQ NE LT LE GT GE
Value Compare(Graph& g, Value a, Value b, const std::string& direction);
Value Select(Graph& g, Value pred, Value a, Value b);
Value Convert(Graph& g, Value x, DType t);
Value BitcastConvert(Graph& g, Value x, Type t);
// Parts of a complex value (real: x itself, imaginary: zeros, for a real x), and a complex value
// from f32 or f64 parts.
Value Real(Graph& g, Value x);
Value Imag(Graph& g, Value x);
Value Complex(Graph& g, Value re, Value im);
// |x|: stablehlo.abs, whose result is real for a complex x.
Value Abs(Graph& g, Value x);
// |x|^2 (real for a complex x, re^2 + im^2).
Value AbsSq(Graph& g, Value x);
// The complex conjugate (x itself for a real x).
Value Conj(Graph& g, Value z);
Value BroadcastInDim(Graph& g, Value x, const Dims& out, const Dims& mapping);
// Numpy-style broadcast (trailing alignment) of x to `out` dims.
Value BroadcastTo(Graph& g, Value x, const Dims& out);
Value Reshape(Graph& g, Value x, const Dims& dims);
Value Transpose(Graph& g, Value x, const Dims& perm);
Value Slice(Graph& g, Value x, const Dims& start, const Dims& limit, const Dims& strides = {});
Value Pad(Graph& g, Value x, Value pad_value, const Dims& lo, const Dims& hi,
          const Dims& interior = {});
Value Concat(Graph& g, const std::vector<Value>& xs, int64_t dim);
Value Iota(Graph& g, Type t, int64_t dim);
Value Reverse(Graph& g, Value x, const Dims& dims);
// The number of elements of x over `dims`, as a 0-d value of dtype t: the product of
// get_dimension_size, so that a dim made dynamic by set_dimension_size counts its real size
// (static sizes fold to constants).
Value ElementCount(Graph& g, Value x, const Dims& dims, DType t);
Value Clamp(Graph& g, Value lo, Value x, Value hi);
// A region computing `op` on two scalars of dtype t (reduction bodies).
std::shared_ptr<Graph> ScalarRegion(DType t, const std::string& op);
// Reduces x over dims with `op` ("stablehlo.add", ...), starting from init (a 0-d value).
Value Reduce(Graph& g, Value x, Value init, const Dims& dims, const std::string& op);
Value DotGeneral(Graph& g, Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch,
                 const Dims& lhs_contract, const Dims& rhs_contract, Type out);
Value DynamicUpdateSlice(Graph& g, Value base, Value update, const std::vector<Value>& starts);
// The `sizes` window of x at `starts` (0-d integer values; clamped into range by XLA).
Value DynamicSlice(Graph& g, Value x, const std::vector<Value>& starts, const Dims& sizes);

// Normalizes a possibly negative dim against rank.
int64_t WrapDim(int64_t dim, int64_t rank);
Dims ContiguousStrides(const Dims& dims);

// A 1-D s64 constant holding `v` (small index tables only; large data goes in parameters).
Value ConstantI64(Graph& g, const Dims& v);
// Gathers slices of x at `idx` (s64, shape B + [k]): coordinate j of each index vector indexes
// x's dim index_dims[j]; the other dims of x are taken whole. The result is x's other dims, in
// order, with B inserted at position batch_at.
Value Gather(Graph& g, Value x, Value idx, const Dims& index_dims, int64_t batch_at);
// The inverse of Gather: combines `updates` (shaped like Gather's result) into x with the
// scalar `combiner` region; out-of-bounds index vectors are skipped.
Value Scatter(Graph& g, Value x, Value idx, Value updates, const Dims& index_dims, int64_t batch_at,
              std::shared_ptr<Graph> combiner);
// A combiner region that keeps the update (overwrite semantics).
std::shared_ptr<Graph> OverwriteRegion(DType t);

// dot_general at HIGHEST precision, so f32 matmuls keep full f32 accuracy on TPU/GPU.
Value DotGeneralHighest(Graph& g, Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch,
                        const Dims& lhs_contract, const Dims& rhs_contract, Type out);

// An integer constant given by its bits (a double would lose those above 2^53): printed signed
// or unsigned as `t` says.
Value IntConstant(Graph& g, uint64_t bits, DType t, const Dims& dims = {});

// stablehlo.while over `init`: `cond` and `body` are closed regions (they may not use outer
// values) whose params mirror `init`; cond returns a tensor<i1>, body the next values.
std::vector<Value> While(Graph& g, const std::vector<Value>& init, std::shared_ptr<Graph> cond,
                         std::shared_ptr<Graph> body);

// A 1-D constant of dtype t holding `v` (small weight tables only).
Value ConstantVector(Graph& g, const std::vector<double>& v, DType t);

}  // namespace tpu::ir
