// Where an op was recorded (the user's Python line), captured cheaply at record time and put
// into words only when a fused program fails. The Python layer installs the capturer; without
// one (C++ tests), ops have no origin.
#pragma once

#include <memory>
#include <string>

namespace tpu::eager {

struct Origin {
  virtual ~Origin() = default;
  virtual std::string Describe() const = 0;  // "train.py:42 in step"
};
using OriginPtr = std::shared_ptr<const Origin>;
using OriginCapturer = OriginPtr (*)();

void SetOriginCapturer(OriginCapturer capture);
OriginPtr CaptureOrigin();  // null without a capturer

}  // namespace tpu::eager
