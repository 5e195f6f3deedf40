// View programs: how a strided view (offset, sizes, strides) reads from and writes into the
// dense buffer of its storage. Pure IR; the ATen layer supplies the layouts.
//
// The offset can be a run-time value of the program: a view is then read and written with
// dynamic_slice / dynamic_update_slice, so views that differ only in where they start (row i of
// a matrix, position i of a KV cache) share one program.
#pragma once

#include <optional>

#include "lowering/rule.h"

namespace tpu::lowering {

struct Strided {
  DType dtype = DType::kF32;
  int64_t offset = 0;  // in elements of dtype
  Dims sizes;
  Dims strides;
  // When set, an s64 scalar of the graph holding `offset` at run time: the program then does not
  // depend on the offset's value, except for the rare views that wrap around an axis of the
  // storage (those take `offset` as a constant).
  std::optional<Value> offset_value = std::nullopt;
};

// The storage value as a flat 1-D array of `t` (reshape, then bitcast when dtypes differ).
Value AsFlat(Graph& g, Value base, DType t);
// The elements of view `v` of a flat storage value.
Value ReadView(Graph& g, Value flat, const Strided& v);
// When the view is every element of `base` (a storage's buffer, any shape) in some order of its
// dims (a permuted tensor), the buffer reshaped to that order and transposed, without the flat
// copy, whose size a bounded program cannot have when two of its dims vary (T5's [t, t]
// position bias, read permuted in its backward).
std::optional<Value> ReadPermuted(Graph& g, Value base, const Strided& v);
// The other way: when view `v` is every element of a storage of `storage_elems` in some order
// of its dims, the storage's buffer holding `update` (dims in memory order).
std::optional<Value> WritePermuted(Graph& g, const Strided& v, Value update, int64_t storage_elems);
// The flat storage value after writing `update` (shaped like v.sizes) into view `v`.
Value WriteView(Graph& g, Value flat, const Strided& v, Value update);
// True when the view is the storage's elements in row-major order, all of them.
bool IsWholeContiguous(const Strided& v, int64_t storage_elems);

}  // namespace tpu::lowering
