// View programs with the offset as a run-time parameter: the same program reads and writes a
// view at every offset where it fits as a box, and gives the strided elements a host loop gives.
#include "lowering/view.h"

#include <gtest/gtest.h>

#include <cctype>
#include <numeric>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "test_client.h"

namespace tpu::lowering {
namespace {

using tpu::testing::TestClient;

// Flat storage indices of every element of the view, in row-major view order.
std::vector<int64_t> HostIndices(const Strided& v) {
  int64_t numel = std::accumulate(v.sizes.begin(), v.sizes.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> out;
  for (int64_t k = 0; k < numel; ++k) {
    int64_t rest = k, at = v.offset;
    for (int64_t d = static_cast<int64_t>(v.sizes.size()) - 1; d >= 0; --d) {
      at += (rest % v.sizes[d]) * v.strides[d];
      rest /= v.sizes[d];
    }
    out.push_back(at);
  }
  return out;
}

struct Built {
  ir::Graph g;
  ir::Hash128 hash;
};

// A program of (storage, offset[, update]) that reads the view, or writes `update` into it.
Built Build(int64_t n, Strided v, bool write) {
  Built b;
  Value flat = b.g.Param({DType::kF32, {n}});
  v.offset_value = b.g.Param({DType::kS64, {}});
  if (write) {
    Value update = b.g.Param({DType::kF32, v.sizes});
    b.g.results = {WriteView(b.g, flat, v, update)};
  } else {
    b.g.results = {ReadView(b.g, flat, v)};
  }
  b.hash = ir::StructuralHash(b.g);
  return b;
}

std::vector<float> RunView(const ir::Graph& g, const std::vector<float>& storage, int64_t offset,
                           const std::vector<float>* update) {
  auto exe = TestClient().Compile(ir::PrintModule(g), {{DType::kF32, g.type(g.results[0]).dims}});
  std::vector<rt::BufferPtr> bufs{
      TestClient().FromHost(storage.data(), DType::kF32, {static_cast<int64_t>(storage.size())}, 0),
      TestClient().FromHost(&offset, DType::kS64, {}, 0)};
  if (update)
    bufs.push_back(TestClient().FromHost(update->data(), DType::kF32, g.type(g.params[2]).dims, 0));
  std::vector<PJRT_Buffer*> raw;
  for (const auto& b : bufs) raw.push_back(b->raw());
  auto res = TestClient().Execute(*exe, raw, 0);
  std::vector<float> out(res[0]->numel());
  res[0]->ToHost(out.data(), out.size() * sizeof(float));
  return out;
}

struct Case {
  const char* name;
  Strided view;                  // offset unset: each of `offsets` is used
  std::vector<int64_t> offsets;  // all fit as a box: one program serves them
};

class ViewOffsets : public ::testing::TestWithParam<Case> {};

TEST_P(ViewOffsets, OneProgramReadsAndWritesEveryOffset) {
  const Case& c = GetParam();
  constexpr int64_t n = 48;  // a 6x8 storage
  std::vector<float> storage(n);
  std::iota(storage.begin(), storage.end(), 0.0f);
  Strided first = c.view;
  first.offset = c.offsets[0];
  Built read = Build(n, first, false), write = Build(n, first, true);
  for (int64_t offset : c.offsets) {
    Strided v = c.view;
    v.offset = offset;
    EXPECT_EQ(Build(n, v, false).hash, read.hash) << c.name << " at " << offset;
    EXPECT_EQ(Build(n, v, true).hash, write.hash) << c.name << " at " << offset;
    std::vector<int64_t> at = HostIndices(v);
    std::vector<float> expected, update;
    for (size_t k = 0; k < at.size(); ++k) {
      expected.push_back(storage[at[k]]);
      update.push_back(-1.0f - static_cast<float>(k));
    }
    EXPECT_EQ(RunView(read.g, storage, offset, nullptr), expected) << c.name << " at " << offset;
    std::vector<float> written = storage;
    for (size_t k = 0; k < at.size(); ++k) written[at[k]] = update[k];
    EXPECT_EQ(RunView(write.g, storage, offset, &update), written) << c.name << " at " << offset;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ViewOffsets,
    ::testing::Values(
        Case{"row", {DType::kF32, 0, {8}, {1}}, {0, 8, 40}},
        Case{"column", {DType::kF32, 0, {6}, {8}}, {0, 3, 7}},
        Case{"block", {DType::kF32, 0, {2, 3}, {8, 1}}, {0, 9, 37}},
        Case{"transposed", {DType::kF32, 0, {3, 2}, {1, 8}}, {0, 12, 29}},
        Case{"every other", {DType::kF32, 0, {4}, {2}}, {0, 16, 41}},
        Case{"with a size-1 dim", {DType::kF32, 0, {2, 1, 4}, {16, 8, 1}}, {0, 4, 28}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string s = info.param.name;
      for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return s;
    });

// A view that wraps around a row at its offset is no box: it takes the offset as a constant and
// still gives the right elements.
TEST(ViewOffsets, WrappingViewKeepsItsValues) {
  constexpr int64_t n = 48;
  std::vector<float> storage(n);
  std::iota(storage.begin(), storage.end(), 0.0f);
  Strided v{DType::kF32, 6, {2, 3}, {8, 1}};
  Built read = Build(n, v, false);
  std::vector<float> expected;
  for (int64_t at : HostIndices(v)) expected.push_back(storage[at]);
  EXPECT_EQ(RunView(read.g, storage, v.offset, nullptr), expected);
}

// An expanded view (stride 0 dims, as GQA's repeated keys) is read as a slice and a broadcast,
// not a gather of every element, with one program for every offset where it fits as a box; a
// wrapping one still reads the right elements.
TEST(ViewOffsets, BroadcastViewIsReadWithoutAGather) {
  constexpr int64_t n = 48;
  std::vector<float> storage(n);
  std::iota(storage.begin(), storage.end(), 0.0f);
  Strided shape{DType::kF32, 0, {2, 3, 4}, {8, 0, 1}};
  Built first = Build(n, shape, false);
  EXPECT_EQ(ir::PrintModule(first.g).find("stablehlo.gather"), std::string::npos);
  for (int64_t offset : {0, 9, 36, 6}) {
    Strided v = shape;
    v.offset = offset;
    Built read = Build(n, v, false);
    if (offset != 6) {  // 6 wraps around a row
      EXPECT_EQ(read.hash, first.hash) << offset;
    }
    std::vector<float> expected;
    for (int64_t at : HostIndices(v)) expected.push_back(storage[at]);
    EXPECT_EQ(RunView(read.g, storage, offset, nullptr), expected) << offset;
  }
}

}  // namespace
}  // namespace tpu::lowering
