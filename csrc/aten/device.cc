// Device guard, events and hooks: how PyTorch asks which tpu devices exist and which is current.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "aten/generator.h"
#include "aten/storage.h"
#include "eager/executor.h"

namespace tpu::aten {

namespace {

thread_local c10::DeviceIndex g_current = 0;

int Count() {
  if (!eager::Configured()) return 0;
  try {
    return eager::Client().device_count();
  } catch (const std::exception&) {
    return 0;  // a plugin that fails to load means no devices, not a crash
  }
}

// An event marks the last program issued on its device; waiting on it waits for that program.
// Its completion time is stamped by the runtime when that program finishes (for elapsed_time).
struct EventState {
  std::weak_ptr<rt::Buffer> last;
  int device = 0;
  std::shared_ptr<std::atomic<int64_t>> done_ns = std::make_shared<std::atomic<int64_t>>(0);
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {c10::DeviceType::PrivateUse1, g_current}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() < Count(), "Invalid device index ", static_cast<int>(d.index()),
                ": tpu has ", Count(), " device(s)");
    if (d.index() >= 0) g_current = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) g_current = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(Count());
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<EventState*>(event);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (*event == nullptr) *event = new EventState();
    auto* e = static_cast<EventState*>(*event);
    e->device = stream.device_index();
    eager::Flush(e->device);  // an event marks all work so far, including recorded ops
    e->last = eager::LastOutput(e->device);
    e->done_ns = std::make_shared<std::atomic<int64_t>>(0);
    auto last = e->last.lock();
    if (!last) {
      e->done_ns->store(NowNs());
    } else {
      auto done = e->done_ns;
      last->OnReady([done] { done->store(NowNs()); });
    }
  }
  void block(void*, const c10::Stream&) const override {}  // one in-order queue per device
  bool queryEvent(void* event) const override {
    auto* e = static_cast<EventState*>(event);
    if (e == nullptr) return true;
    auto last = e->last.lock();
    return !last || last->IsReady();
  }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<EventState*>(event);
    if (e == nullptr) return;
    if (auto last = e->last.lock()) last->Await();
    while (e->done_ns->load() == 0) std::this_thread::yield();  // the callback is imminent
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    synchronizeEvent(start);
    synchronizeEvent(end);
    auto* a = static_cast<EventState*>(start);
    auto* b = static_cast<EventState*>(end);
    return static_cast<double>(b->done_ns->load() - a->done_ns->load()) * 1e-6;
  }
  bool queryStream(const c10::Stream& s) const override {
    eager::Flush(s.device_index());
    auto last = eager::LastOutput(s.device_index()).lock();
    return !last || last->IsReady();
  }
  void synchronizeStream(const c10::Stream& s) const override {
    eager::Synchronize(s.device_index());
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override { eager::Synchronize(d); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

// Pinned host memory. Page-locking buys nothing for PJRT's host copies, but PyTorch asks for it
// (DDP with find_unused_parameters copies its map through it, DataLoader(pin_memory=True)) and
// asserts is_pinned() afterwards: host memory from CPU's allocator, recorded while it lives.
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr cpu = at::getCPUAllocator()->allocate(n);
    void* p = cpu.get();
    if (p == nullptr) return cpu;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[p] = n;
    }
    return {p, new Held{std::move(cpu), this}, &Free, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool Holds(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(p);
    if (it == live_.begin()) return false;
    --it;
    return p == it->first || p < static_cast<const char*>(it->first) + it->second;
  }

 private:
  struct Held {
    c10::DataPtr cpu;
    PinnedAllocator* owner;
  };
  static void Free(void* ctx) {
    auto* held = static_cast<Held*>(ctx);
    {
      std::lock_guard<std::mutex> lock(held->owner->mu_);
      held->owner->live_.erase(held->cpu.get());
    }
    delete held;
  }
  mutable std::mutex mu_;
  std::map<const void*, size_t> live_;
};

PinnedAllocator& Pinned() {
  static auto* a = new PinnedAllocator();
  return *a;
}

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return Count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(Count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { g_current = d; }
  c10::DeviceIndex getCurrentDevice() const override { return g_current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = g_current;
    g_current = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return DefaultGenerator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? g_current : d);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    (void)data;  // pointers are slot addresses; the current device is the best answer
    return {c10::DeviceType::PrivateUse1, g_current};
  }
  bool isPinnedPtr(const void* data) const override { return Pinned().Holds(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &Pinned(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    ResizeStorageBytes(storage, newsize);
  }
};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new Hooks()); }
} g_register_hooks;

}  // namespace

}  // namespace tpu::aten
