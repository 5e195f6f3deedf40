#include "runtime/dtype.h"

namespace tpu::rt {

int64_t ItemSize(DType t) {
  switch (t) {
    case DType::kPred:
    case DType::kS8:
    case DType::kU8:
    case DType::kF8E5M2:
    case DType::kF8E4M3FN:
      return 1;
    case DType::kS16:
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kS32:
    case DType::kU32:
    case DType::kF32:
      return 4;
    case DType::kS64:
    case DType::kU64:
    case DType::kF64:
    case DType::kC64:
      return 8;
    case DType::kC128:
      return 16;
    default:
      return 0;
  }
}

std::string_view MlirName(DType t) {
  switch (t) {
    case DType::kPred:
      return "i1";
    case DType::kS8:
      return "i8";
    case DType::kS16:
      return "i16";
    case DType::kS32:
      return "i32";
    case DType::kS64:
      return "i64";
    case DType::kU8:
      return "ui8";
    case DType::kU16:
      return "ui16";
    case DType::kU32:
      return "ui32";
    case DType::kU64:
      return "ui64";
    case DType::kF16:
      return "f16";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kBF16:
      return "bf16";
    case DType::kF8E5M2:
      return "f8E5M2";
    case DType::kF8E4M3FN:
      return "f8E4M3FN";
    case DType::kC64:
      return "complex<f32>";
    case DType::kC128:
      return "complex<f64>";
    default:
      return "invalid";
  }
}

bool IsFloat(DType t) {
  return t == DType::kF16 || t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 ||
         t == DType::kF8E5M2 || t == DType::kF8E4M3FN;
}
bool IsSigned(DType t) {
  return t == DType::kS8 || t == DType::kS16 || t == DType::kS32 || t == DType::kS64;
}
bool IsUnsigned(DType t) {
  return t == DType::kU8 || t == DType::kU16 || t == DType::kU32 || t == DType::kU64;
}

bool IsComplex(DType t) { return t == DType::kC64 || t == DType::kC128; }
DType RealOf(DType t) {
  if (t == DType::kC64) return DType::kF32;
  if (t == DType::kC128) return DType::kF64;
  return t;
}

}  // namespace tpu::rt
