#include "distributed/store_kv.h"

namespace tpu::dist {

std::string StoreKeyValueStore::Get(const std::string& key, int timeout_ms) {
  store_->wait({key}, std::chrono::milliseconds(timeout_ms));
  std::vector<uint8_t> v = store_->get(key);
  return {v.begin(), v.end()};
}

bool StoreKeyValueStore::TryGet(const std::string& key, std::string* value) {
  if (!store_->check({key})) return false;
  std::vector<uint8_t> v = store_->get(key);
  value->assign(v.begin(), v.end());
  return true;
}

void StoreKeyValueStore::Put(const std::string& key, const std::string& value) {
  store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

}  // namespace tpu::dist
