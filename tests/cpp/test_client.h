// The CPU plugin client shared by the C++ tests (path from TORCHTPU_PJRT_PLUGIN).
#pragma once

#include <cstdlib>
#include <stdexcept>

#include "runtime/client.h"

namespace tpu::testing {

inline rt::Client& TestClient() {
  static rt::Client* client = [] {
    const char* path = std::getenv("TORCHTPU_PJRT_PLUGIN");
    if (path == nullptr) throw std::runtime_error("set TORCHTPU_PJRT_PLUGIN to the CPU plugin");
    rt::ClientOptions options;
    options.plugin_path = path;
    options.platform = "cpu";
    options.cpu_device_count = 2;
    return new rt::Client(options);
  }();
  return *client;
}

}  // namespace tpu::testing
