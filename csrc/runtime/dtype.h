// Element types shared by the runtime and the IR. Values follow PJRT_Buffer_Type.
#pragma once

#include <cstdint>
#include <string_view>

namespace tpu::rt {

enum class DType : uint8_t {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kC64 = 14,  // complex: real and imaginary parts interleaved, as PyTorch stores them
  kC128 = 15,
  kF8E5M2 = 16,  // storage and casts only (as in PyTorch)
  kF8E4M3FN = 17,
};

int64_t ItemSize(DType t);
// The MLIR element type name ("f32", "i1", "ui8", ...).
std::string_view MlirName(DType t);
bool IsFloat(DType t);
bool IsSigned(DType t);  // signed integers only
bool IsUnsigned(DType t);
bool IsComplex(DType t);
// The real dtype of a complex one's parts (complex64 -> f32); other dtypes map to themselves.
DType RealOf(DType t);

}  // namespace tpu::rt
