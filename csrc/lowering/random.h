// Random bits from the call's "generator" argument (a tensor<2xui64> [seed, offset]), shared by
// the random factories and by ops that drop out (attention).
#pragma once

#include "lowering/rule.h"

namespace tpu::lowering {

// Random u32 or u64 values shaped dims (no more values than their count: the state's offset
// advances by it); stream k > 0 is an independent stream over the same offsets.
Value RandomBits(Ctx& c, const Dims& dims, DType bits, uint64_t stream);
// The dtype random values of dtype t are computed in (f32, or f64 for f64).
DType ComputeType(DType t);
// Uniform samples in [0, 1) (in (0, 1) when `open`), of dtype ComputeType(t), shaped dims.
Value Uniform01(Ctx& c, const Dims& dims, DType t, uint64_t stream = 0, bool open = false);

}  // namespace tpu::lowering
