// Storage slots: a tpu storage's data pointer is a heap Slot holding the storage's current
// device value (a buffer, or in fused mode a pending result). data_ptr() is stable, unique among
// live storages (a freed storage's may come back for a new one) and never dereferenced; a
// mutation computes a new value and swaps it into the slot, so every alias sees it.
#pragma once

#include <ATen/ATen.h>

#include <mutex>

#include "eager/lazy.h"

namespace tpu::aten {

struct Slot {
  std::mutex mu;
  eager::LazyPtr value;  // null until first written (empty is lazy)
  int device = 0;
};

Slot* SlotOf(const c10::Storage& storage);
inline Slot* SlotOf(const at::Tensor& t) { return SlotOf(t.storage()); }

// Snapshot of the slot's value (may be null).
eager::LazyPtr Current(const c10::Storage& storage);
void Assign(const c10::Storage& storage, eager::LazyPtr value);

c10::Allocator* TpuAllocator();

// Raises CUDA's error for a forked subprocess when this process was forked from one that had
// started the device (the PJRT client's threads do not survive fork).
void CheckNotForked();

// Grows or shrinks a storage in place (keeping its slot): used by resize_ and FSDP2.
void ResizeStorageBytes(const c10::Storage& storage, size_t nbytes);

rt::DType ToDType(at::ScalarType t);
at::ScalarType ToScalarType(rt::DType t);

}  // namespace tpu::aten
