// The c10d Store as the key-value store a multi-process PJRT client meets through.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/client.h"

namespace tpu::dist {

class StoreKeyValueStore : public rt::KeyValueStore {
 public:
  explicit StoreKeyValueStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  std::string Get(const std::string& key, int timeout_ms) override;
  bool TryGet(const std::string& key, std::string* value) override;
  void Put(const std::string& key, const std::string& value) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace tpu::dist
