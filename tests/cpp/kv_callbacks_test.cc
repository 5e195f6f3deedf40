// The PJRT key-value callbacks a multi-process client is created with, over an in-memory store.
#include "runtime/kv_callbacks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

namespace tpu::rt {
namespace {

class MapStore : public KeyValueStore {
 public:
  std::string Get(const std::string& key, int timeout_ms) override {
    auto it = values.find(key);
    if (it == values.end()) {
      throw std::runtime_error("no " + key + " after " + std::to_string(timeout_ms) + " ms");
    }
    return it->second;
  }
  bool TryGet(const std::string& key, std::string* value) override {
    auto it = values.find(key);
    if (it == values.end()) return false;
    *value = it->second;
    return true;
  }
  void Put(const std::string& key, const std::string& value) override { values[key] = value; }
  std::map<std::string, std::string> values;
};

PJRT_Error_Code g_code;
std::string g_message;
int g_error_token;
PJRT_Error* RecordError(PJRT_Error_Code code, const char* msg, size_t size) {
  g_code = code;
  g_message.assign(msg, size);
  return reinterpret_cast<PJRT_Error*>(&g_error_token);
}
PJRT_CallbackError g_callback = &RecordError;

template <typename A>
A Args(MapStore* store, const std::string& key) {
  A a{};
  a.struct_size = sizeof(A);
  a.key = key.data();
  a.key_size = key.size();
  a.callback_error = &g_callback;
  a.user_arg = store;
  return a;
}

TEST(KvCallbacks, PutThenGetRoundTripsBinaryValues) {
  MapStore store;
  const std::string key = "pjrt:topology", value("a\0b", 3);
  auto put = Args<PJRT_KeyValuePutCallback_Args>(&store, key);
  put.value = value.data();
  put.value_size = value.size();
  ASSERT_EQ(KvPut(&put), nullptr);
  auto get = Args<PJRT_KeyValueGetCallback_Args>(&store, key);
  get.timeout_in_ms = 1000;
  ASSERT_EQ(KvGet(&get), nullptr);
  EXPECT_EQ(std::string(get.value, get.value_size), value);
  get.value_deleter_callback(get.value);
}

TEST(KvCallbacks, MissingKeysBecomePjrtErrors) {
  MapStore store;
  const std::string absent = "absent";  // outlives the argument structs that point into it
  auto try_get = Args<PJRT_KeyValueTryGetCallback_Args>(&store, absent);
  EXPECT_NE(KvTryGet(&try_get), nullptr);
  EXPECT_EQ(g_code, PJRT_Error_Code_NOT_FOUND);
  auto get = Args<PJRT_KeyValueGetCallback_Args>(&store, absent);
  get.timeout_in_ms = 5;
  EXPECT_NE(KvGet(&get), nullptr);
  EXPECT_EQ(g_code, PJRT_Error_Code_DEADLINE_EXCEEDED);
  EXPECT_EQ(g_message, "no absent after 5 ms");
}

TEST(KvCallbacks, CreateOptionsSpanProcessesOnGpuOnly) {
  ClientOptions o;
  o.platform = "cuda";
  o.node_id = 1;
  o.num_nodes = 2;
  o.visible_devices = {1};
  auto opts = CreateOptions(o);
  ASSERT_EQ(opts.size(), 5u);
  EXPECT_EQ(opts[0].name, "node_id");
  EXPECT_EQ(opts[1].name, "num_nodes");
  EXPECT_EQ(opts[1].values, std::vector<int64_t>{2});
  EXPECT_EQ(opts[2].kind, CreateOption::Kind::kInt64List);
  o.platform = "cpu";
  ASSERT_EQ(CreateOptions(o).size(), 1u);
  EXPECT_EQ(CreateOptions(o)[0].name, "cpu_device_count");
}

TEST(KvCallbacks, GpuMemoryGrowsOnDemandUnlessTheEnvironmentSaysOtherwise) {
  ClientOptions o;
  o.platform = "cuda";
  auto opts = CreateOptions(o);
  ASSERT_EQ(opts.size(), 2u);
  EXPECT_EQ(opts[0].name, "preallocate");
  EXPECT_EQ(opts[0].kind, CreateOption::Kind::kBool);
  EXPECT_EQ(opts[0].values, std::vector<int64_t>{0});
  EXPECT_EQ(opts[1].name, "memory_fraction");
  EXPECT_EQ(opts[1].kind, CreateOption::Kind::kFloat);
  EXPECT_FLOAT_EQ(opts[1].real, 0.9f);

  setenv("TORCHTPU_GPU_PREALLOCATE", "1", 1);
  setenv("TORCHTPU_GPU_MEMORY_FRACTION", "0.5", 1);
  opts = CreateOptions(GpuMemoryFromEnv(o));
  EXPECT_EQ(opts[0].values, std::vector<int64_t>{1});
  EXPECT_FLOAT_EQ(opts[1].real, 0.5f);
  setenv("TORCHTPU_GPU_MEMORY_FRACTION", "1.5", 1);
  EXPECT_THROW(GpuMemoryFromEnv(o), Error);
  setenv("TORCHTPU_GPU_MEMORY_FRACTION", "half", 1);
  EXPECT_THROW(GpuMemoryFromEnv(o), Error);
  unsetenv("TORCHTPU_GPU_MEMORY_FRACTION");
  setenv("TORCHTPU_GPU_PREALLOCATE", "yes", 1);
  EXPECT_THROW(GpuMemoryFromEnv(o), Error);
  unsetenv("TORCHTPU_GPU_PREALLOCATE");
}

}  // namespace
}  // namespace tpu::rt
