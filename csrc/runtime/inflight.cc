#include "runtime/inflight.h"

namespace tpu::rt {

InflightLimit::InflightLimit(int devices, int slots) : used_(devices, 0), slots_(slots) {}

void InflightLimit::Acquire(const std::vector<int>& devices) {
  std::unique_lock<std::mutex> lock(mu_);
  freed_.wait(lock, [&] {
    for (int d : devices) {
      if (used_.at(d) >= slots_) return false;
    }
    return true;
  });
  for (int d : devices) ++used_[d];
}

void InflightLimit::Release(int device) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --used_.at(device);
  }
  freed_.notify_all();
}

int InflightLimit::used(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_.at(device);
}

}  // namespace tpu::rt
