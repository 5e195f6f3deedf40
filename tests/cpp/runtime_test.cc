#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/inflight.h"
#include "test_client.h"

namespace tpu::rt {
namespace {

using tpu::testing::TestClient;

TEST(Runtime, ClientHasRequestedDevices) {
  EXPECT_EQ(TestClient().device_count(), 2);
  EXPECT_EQ(TestClient().platform_name(), "cpu");
  EXPECT_GE(TestClient().api_minor(), 81);
}

TEST(InflightLimit, WaitsForASlotOnEveryDevice) {
  InflightLimit limit(2, 2);
  limit.Acquire({0});
  limit.Acquire({0, 1});
  std::atomic<bool> taken{false};
  std::thread t([&] {
    limit.Acquire({0, 1});  // device 0 is full: waits, holding nothing of device 1
    taken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(taken);
  EXPECT_EQ(limit.used(1), 1);
  limit.Acquire({1});  // device 1 still has room
  EXPECT_EQ(limit.used(1), 2);
  limit.Release(1);
  limit.Release(0);
  t.join();
  EXPECT_TRUE(taken);
  EXPECT_EQ(limit.used(0), 2);
  EXPECT_EQ(limit.used(1), 2);
}

// Programs queued behind a slow one: the caller waits for a slot once a device has
// InflightSlots() programs queued or running, so XLA's own limit (32), which its pool threads wait
// on in replicated launches, is never reached (inflight.h); the slots free as programs complete.
TEST(Runtime, CallersWaitForAnInflightSlot) {
  Client& c = TestClient();
  const std::string t = "tensor<512x512xf32>";
  std::string dots = "module @m {\n  func.func public @main(%a0: " + t + ") -> (tensor<2xf32>) {\n";
  for (int i = 1; i <= 20; ++i) {
    dots += "    %a" + std::to_string(i) + " = stablehlo.dot_general %a" + std::to_string(i - 1) +
            ", %a0, contracting_dims = [1] x [0] : (" + t + ", " + t + ") -> " + t + "\n";
  }
  dots += "    %s = stablehlo.slice %a20 [0:1, 0:2] : (" + t + ") -> tensor<1x2xf32>\n";
  dots += "    %r = stablehlo.reshape %s : (tensor<1x2xf32>) -> tensor<2xf32>\n";
  dots += "    \"func.return\"(%r) : (tensor<2xf32>) -> ()\n  }\n}";
  ExecutablePtr slow = c.Compile(dots, {{DType::kF32, {2}}});
  ExecutablePtr plus_one = c.Compile(R"(module @m {
  func.func public @main(%a: tensor<2xf32>) -> (tensor<2xf32>) {
    %one = stablehlo.constant dense<1.0> : tensor<2xf32>
    %c = "stablehlo.add"(%a, %one) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%c) : (tensor<2xf32>) -> ()
  }
})",
                                     {{DType::kF32, {2}}});
  std::vector<float> eye(512 * 512, 0.0f);
  for (int i = 0; i < 512; ++i) eye[i * 512 + i] = 1.0f;
  BufferPtr m = c.FromHost(eye.data(), DType::kF32, {512, 512}, 1);
  BufferPtr chain = c.Execute(*slow, {m->raw()}, 1)[0];  // {1, 0}, after a while
  int most = c.inflight(1);
  for (int i = 0; i < 40; ++i) {
    chain = c.Execute(*plus_one, {chain->raw()}, 1)[0];
    most = std::max(most, c.inflight(1));
  }
  EXPECT_EQ(most, Client::InflightSlots());
  EXPECT_EQ(c.inflight(0), 0);
  std::vector<float> out(2);
  chain->ToHost(out.data(), sizeof(float) * 2);
  EXPECT_EQ(out, (std::vector<float>{41, 40}));
  // The completion callbacks run on the plugin's threads, right after the results are ready.
  for (int i = 0; i < 200 && c.inflight(1) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(c.inflight(1), 0);
}

TEST(Runtime, HostRoundTrip) {
  std::vector<float> in{1, 2, 3, 4, 5, 6};
  BufferPtr b = TestClient().FromHost(in.data(), DType::kF32, {2, 3}, 1);
  EXPECT_EQ(b->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->device(), 1);
  std::vector<float> out(6);
  b->ToHost(out.data(), out.size() * sizeof(float));
  EXPECT_EQ(in, out);
}

TEST(Runtime, CompileAndExecuteOnEachDevice) {
  const char* text = R"(module @m {
  func.func public @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>) {
    %c = "stablehlo.add"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%c) : (tensor<3xf32>) -> ()
  }
})";
  ExecutablePtr exe = TestClient().Compile(text, {{DType::kF32, {3}}});
  for (int dev = 0; dev < 2; ++dev) {
    std::vector<float> x{1, 2, 3}, y{10, 20, 30}, out(3);
    BufferPtr a = TestClient().FromHost(x.data(), DType::kF32, {3}, dev);
    BufferPtr b = TestClient().FromHost(y.data(), DType::kF32, {3}, dev);
    auto outs = TestClient().Execute(*exe, {a->raw(), b->raw()}, dev);
    ASSERT_EQ(outs.size(), 1u);
    outs[0]->ToHost(out.data(), sizeof(float) * 3);
    EXPECT_EQ(out, (std::vector<float>{11, 22, 33}));
  }
}

TEST(Runtime, ExecutableWithOtherOutputsIsRefused) {
  const char* text = R"(module @m {
  func.func public @main(%a: tensor<3xf32>) -> (tensor<3xf32>) {
    "func.return"(%a) : (tensor<3xf32>) -> ()
  }
})";
  ExecutablePtr exe = TestClient().Compile(text, {{DType::kF32, {3}}});
  std::string bytes = TestClient().Serialize(*exe);
  EXPECT_NE(TestClient().Deserialize(bytes, {{DType::kF32, {3}}}), nullptr);
  // Running it with room for two outputs would let PJRT write past the output list.
  EXPECT_THROW(TestClient().Deserialize(bytes, {{DType::kF32, {3}}, {DType::kF32, {3}}}), Error);
  EXPECT_THROW(TestClient().Compile(text, {}), Error);
}

TEST(Runtime, CompileErrorBecomesException) {
  try {
    TestClient().Compile("module { this is not mlir }", {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_Compile"), std::string::npos);
    EXPECT_NE(e.code(), 0);
  }
}

TEST(Runtime, MemoryAccountingFollowsBuffers) {
  int64_t before = TestClient().memory_stats(0).in_use;
  {
    std::vector<int32_t> data(1000, 7);
    BufferPtr b = TestClient().FromHost(data.data(), DType::kS32, {1000}, 0);
    EXPECT_EQ(TestClient().memory_stats(0).in_use, before + 4000);
    EXPECT_EQ(TestClient().live_buffers(0)["i32[1000]"], 1);
  }
  EXPECT_EQ(TestClient().memory_stats(0).in_use, before);
  EXPECT_EQ(TestClient().live_buffers(0).count("i32[1000]"), 0u);
  EXPECT_GT(TestClient().memory_stats(0).limit, 0);
}

}  // namespace
}  // namespace tpu::rt
