#include "aten/generator.h"

#include <ATen/ATen.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <random>

#include "eager/executor.h"

namespace tpu::aten {

TpuGenerator::TpuGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  uint64_t s = std::random_device{}();
  s = (s << 32) ^ std::random_device{}();
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.numel() == 16 && state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "RNG state must be a torch.ByteTensor of 16 bytes");
  const auto* p = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(t.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<uint8_t*>(t.data_ptr()) + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> TpuGenerator::Take(uint64_t n) {
  std::pair<uint64_t, uint64_t> state{seed_, offset_};
  offset_ += (n + 3) / 4 * 4;  // multiples of 4, as DTensor's RNG tracker expects
  return state;
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& DefaultGenerator(c10::DeviceIndex device) {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    int n = eager::Client().device_count();
    for (int i = 0; i < n; ++i) v.push_back(at::make_generator<TpuGenerator>(i));
    return v;
  }();
  if (device < 0) {
    device = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  }
  TORCH_CHECK(device < static_cast<int>(gens.size()), "invalid tpu device index ", device);
  return gens[device];
}

std::shared_ptr<eager::Lazy> DrawState(at::Generator gen, uint64_t count, int device) {
  std::pair<uint64_t, uint64_t> state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get<TpuGenerator>()->Take(count);
  }
  uint64_t host[2] = {state.first, state.second};
  return eager::Lazy::Of(eager::Client().FromHost(host, rt::DType::kU64, {2}, device), device);
}

}  // namespace tpu::aten
