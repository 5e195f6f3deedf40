#include "aten/storage.h"

#include "aten/graph_builder.h"
#include "eager/executor.h"
#include "lowering/view.h"

namespace tpu::aten {

namespace {

void DeleteSlot(void* ctx) { delete static_cast<Slot*>(ctx); }

std::string Gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

void CheckNotForked() {
  TORCH_CHECK(!rt::InForkedChild(),
              "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, "
              "you must use the 'spawn' start method (a DataLoader: multiprocessing_context="
              "'spawn'), or create tpu tensors in the main process");
}

namespace {

class Allocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    CheckNotForked();
    int device = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
    rt::MemoryStats stats = eager::Client().memory_stats(device);
    // Storage is lazy, so check the request against the device now, like CUDA would.
    if (stats.limit > 0 && static_cast<int64_t>(nbytes) > stats.limit - stats.in_use) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory. Tried to allocate ",
                       Gib(nbytes), ". Device tpu:", device, " has a total capacity of ",
                       Gib(stats.limit), " of which ", Gib(stats.in_use), " is in use.");
    }
    auto* slot = new Slot();
    slot->device = device;
    return {slot, slot, &DeleteSlot, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &DeleteSlot; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied through host pointers (", dest, ", ", src,
                ", ", count, ")");
  }
  bool initialized() override { return eager::Initialized(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    c10::CachingDeviceAllocator::DeviceStats s;
    rt::MemoryStats m = eager::Client().memory_stats(device);
    size_t agg = static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE);
    s.allocated_bytes[agg].current = m.in_use;
    s.allocated_bytes[agg].peak = m.peak;
    s.reserved_bytes[agg].current = m.in_use;
    s.reserved_bytes[agg].peak = m.peak;
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex) override {}
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    rt::MemoryStats m = eager::Client().memory_stats(device);
    return {static_cast<size_t>(m.limit - m.in_use), static_cast<size_t>(m.limit)};
  }
};

Allocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace

Slot* SlotOf(const c10::Storage& storage) {
  return static_cast<Slot*>(storage.data_ptr().get_context());
}

eager::LazyPtr Current(const c10::Storage& storage) {
  Slot* s = SlotOf(storage);
  std::lock_guard<std::mutex> lock(s->mu);
  return s->value;
}

void Assign(const c10::Storage& storage, eager::LazyPtr value) {
  Slot* s = SlotOf(storage);
  std::lock_guard<std::mutex> lock(s->mu);
  s->value = std::move(value);
}

c10::Allocator* TpuAllocator() { return &g_allocator; }

void ResizeStorageBytes(const c10::Storage& storage, size_t nbytes) {
  size_t old = storage.nbytes();
  if (nbytes == old) return;
  eager::LazyPtr cur = Current(storage);
  if (nbytes == 0 || !cur) {
    Assign(storage, nullptr);
  } else {
    // Keep the first min(old, new) bytes; the rest reads as zeros.
    GraphBuilder b(SlotOf(storage)->device, "aten::resize_");
    Value flat = lowering::AsFlat(b.g, b.Input(cur), rt::DType::kU8);
    int64_t keep = static_cast<int64_t>(std::min(old, nbytes));
    flat = ir::Slice(b.g, flat, {0}, {keep});
    if (static_cast<int64_t>(nbytes) > keep) {
      flat = ir::Pad(b.g, flat, ir::Constant(b.g, 0, rt::DType::kU8), {0},
                     {static_cast<int64_t>(nbytes) - keep});
    }
    b.g.results = {flat};
    Assign(storage, b.Run()[0]);
  }
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

rt::DType ToDType(at::ScalarType t) {
  switch (t) {
    case at::kBool:
      return rt::DType::kPred;
    case at::kChar:
      return rt::DType::kS8;
    case at::kShort:
      return rt::DType::kS16;
    case at::kInt:
      return rt::DType::kS32;
    case at::kLong:
      return rt::DType::kS64;
    case at::kByte:
      return rt::DType::kU8;
    case at::kUInt16:
      return rt::DType::kU16;
    case at::kUInt32:
      return rt::DType::kU32;
    case at::kUInt64:
      return rt::DType::kU64;
    case at::kHalf:
      return rt::DType::kF16;
    case at::kFloat:
      return rt::DType::kF32;
    case at::kDouble:
      return rt::DType::kF64;
    case at::kBFloat16:
      return rt::DType::kBF16;
    case at::kFloat8_e5m2:
      return rt::DType::kF8E5M2;
    case at::kFloat8_e4m3fn:
      return rt::DType::kF8E4M3FN;
    case at::kComplexFloat:
      return rt::DType::kC64;
    case at::kComplexDouble:
      return rt::DType::kC128;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t);
  }
}

at::ScalarType ToScalarType(rt::DType t) {
  switch (t) {
    case rt::DType::kPred:
      return at::kBool;
    case rt::DType::kS8:
      return at::kChar;
    case rt::DType::kS16:
      return at::kShort;
    case rt::DType::kS32:
      return at::kInt;
    case rt::DType::kS64:
      return at::kLong;
    case rt::DType::kU8:
      return at::kByte;
    case rt::DType::kU16:
      return at::kUInt16;
    case rt::DType::kU32:
      return at::kUInt32;
    case rt::DType::kU64:
      return at::kUInt64;
    case rt::DType::kF16:
      return at::kHalf;
    case rt::DType::kF32:
      return at::kFloat;
    case rt::DType::kF64:
      return at::kDouble;
    case rt::DType::kBF16:
      return at::kBFloat16;
    case rt::DType::kF8E5M2:
      return at::kFloat8_e5m2;
    case rt::DType::kF8E4M3FN:
      return at::kFloat8_e4m3fn;
    case rt::DType::kC64:
      return at::kComplexFloat;
    case rt::DType::kC128:
      return at::kComplexDouble;
    default:
      TORCH_CHECK(false, "unknown dtype");
  }
}

}  // namespace tpu::aten
