#include <gtest/gtest.h>

#include <vector>

#include "test_client.h"

namespace tpu::rt {
namespace {

using tpu::testing::TestClient;

TEST(Runtime, ClientHasRequestedDevices) {
  EXPECT_EQ(TestClient().device_count(), 2);
  EXPECT_EQ(TestClient().platform_name(), "cpu");
  EXPECT_GE(TestClient().api_minor(), 81);
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
  }
  EXPECT_EQ(TestClient().memory_stats(0).in_use, before);
  EXPECT_GT(TestClient().memory_stats(0).limit, 0);
}

}  // namespace
}  // namespace tpu::rt
