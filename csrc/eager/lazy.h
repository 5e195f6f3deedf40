// A device value that may not be computed yet. In strict and debug modes it is born holding its
// buffer; in fused mode it is a result of an op recorded in its device's pending trace, and gets
// its buffer when that trace is flushed. Storage slots and programs refer to values through it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "runtime/client.h"

namespace tpu::eager {

struct Lazy {
  Lazy(ir::Type t, int dev) : type(std::move(t)), device(dev) {}
  static std::shared_ptr<Lazy> Of(rt::BufferPtr b, int device) {
    auto l = std::make_shared<Lazy>(ir::Type{b->dtype(), b->dims()}, device);
    l->buf = std::move(b);
    l->ready.store(true, std::memory_order_release);
    return l;
  }

  const ir::Type type;
  const int device;
  // Set once `buf` holds the value; until then the fields below are guarded by the trace's lock.
  std::atomic<bool> ready{false};
  rt::BufferPtr buf;
  uint32_t value = 0;  // while pending: its index among the trace's values
  // Set when the program that computes this value failed: reading it raises this message.
  std::shared_ptr<const std::string> error;
};

using LazyPtr = std::shared_ptr<Lazy>;

}  // namespace tpu::eager
