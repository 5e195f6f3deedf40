// The per-device random generator: a (seed, offset) state like CUDA's Philox state. Each
// random op takes [seed, offset] as a program parameter and advances the offset.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <memory>

#include "eager/lazy.h"

namespace tpu::aten {

class TpuGenerator : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device, uint64_t seed = 67280421310721ULL);
  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // Returns the state for one op producing `n` values, then advances past them.
  std::pair<uint64_t, uint64_t> Take(uint64_t n);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& DefaultGenerator(c10::DeviceIndex device);

// Takes the state for `count` values from `gen` and puts it on `device` as [seed, offset] (u64):
// the parameter a random op's program reads.
std::shared_ptr<eager::Lazy> DrawState(at::Generator gen, uint64_t count, int device);

}  // namespace tpu::aten
