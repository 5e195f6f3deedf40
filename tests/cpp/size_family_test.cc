// Programs that differ only in sizes: the formula through two members (or one and a hint), the
// bound for a size, which reshapes keep padding where XLA expects it, and a bounded program run
// on XLA:CPU with garbage (NaN) in its padding.
#include "ir/size_family.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ir/builder.h"
#include "test_client.h"

namespace tpu::ir {
namespace {

using tpu::testing::TestClient;

Graph Member(int64_t s, const std::vector<int64_t>& then);

TEST(FitSizes, EverySizeAsAMultipleOfTheOneThatChangesLeast) {
  std::optional<SizeFormula> f = FitSizes({2, 40, 5, 6, 8}, {2, 56, 7, 8, 8}, 5);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->symbol, 2u);  // s, not the flat 8 s before it
  EXPECT_EQ(f->dims, 5u);
  EXPECT_EQ(f->sizes[0].a, 0);
  EXPECT_EQ(f->sizes[1].At(9), 72);  // 8 s
  EXPECT_EQ(f->sizes[3].At(9), 10);  // s + 1
  EXPECT_EQ(SymbolOf(*f, {2, 72, 9, 10, 8}), 9);
  EXPECT_FALSE(SymbolOf(*f, {2, 72, 9, 11, 8}).has_value());  // not a member
  EXPECT_FALSE(FitSizes({4, 6}, {4, 6}, 2).has_value());      // the same program
  EXPECT_FALSE(FitSizes({4, 6}, {6, 9}, 2).has_value());      // 3/2 is not whole
  EXPECT_FALSE(FitSizes({4, 9}, {6, 7}, 2).has_value());      // a dim shrinks as s grows
  // A constant may: -s, an index check's lower bound.
  std::optional<SizeFormula> check = FitSizes({4, -4}, {6, -6}, 1);
  ASSERT_TRUE(check.has_value());
  EXPECT_EQ(check->sizes[1].At(9), -9);
}

TEST(FitSizes, BoundsArePowersOfTwoThatHoldEverySize) {
  SizeFormula f = *FitSizes({5, 6}, {7, 8}, 2);  // s and s + 1
  f.dims = 2;
  EXPECT_EQ(BoundFor(f, 5), MinBound());
  EXPECT_EQ(BoundFor(f, MinBound() - 1), MinBound());
  EXPECT_EQ(BoundFor(f, MinBound()), 2 * MinBound());  // s + 1 would not fit
  EXPECT_EQ(Capacity(f.sizes[1], 128), 128);
}

TEST(FitSizes, WideBoundsOnlyWhileTheyCostLittle) {
  Graph small = Member(3, {}), big = Member(5, {});
  SizeFormula f = *FitSizes(Sizes(small), Sizes(big), DimCount(small));
  f.dims = DimCount(small);
  EXPECT_EQ(BoundFor(small, f, 5), WideBound());  // a MiB of slack covers these few elements
  Graph wide;  // 2^18 elements per unit of s: the bound stays the smallest that holds s
  wide.Param({DType::kF32, {5, 1 << 18}});
  SizeFormula w{{{1, 0}, {0, 1 << 18}}, 0, 2};
  EXPECT_EQ(BoundFor(wide, w, 5), MinBound());
}

// x: [2, s, 4] and y: [2, 1, 4] -> (concat along 1, its sum over 1, `then` applied to it).
Graph Member(int64_t s, const std::vector<int64_t>& then) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, s, 4}});
  Value y = g.Param({DType::kF32, {2, 1, 4}});
  Value cat = Concat(g, {x, y}, 1);
  Value sum = Reduce(g, cat, Constant(g, 0, DType::kF32), {1}, "stablehlo.add");
  g.results = {cat, sum};
  if (!then.empty()) g.results.push_back(Reshape(g, cat, then));
  return g;
}

// x: [2, s, 4], y: [2, 1, 4] -> (their concat along 1, x flattened to [2, 4 s]).
Graph Guessable(int64_t s) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, s, 4}});
  Value y = g.Param({DType::kF32, {2, 1, 4}});
  g.results = {Concat(g, {x, y}, 1), Reshape(g, x, {2, 4 * s})};
  return g;
}

TEST(GuessSizes, OneMemberAndTheSizeThatVaries) {
  Graph a = Guessable(5), b = Guessable(7);
  std::optional<SizeFormula> guess = GuessSizes(a, 5);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->sizes, FitSizes(Sizes(a), Sizes(b), DimCount(a))->sizes);  // s, s + 1 and 4 s
  EXPECT_EQ(SymbolOf(*guess, Sizes(b)), 7);
  // A constant that equals the size is taken for it: the guess then fits no other member.
  std::optional<SizeFormula> wrong = GuessSizes(a, 4);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(SymbolOf(*wrong, Sizes(a)), 4);
  EXPECT_FALSE(SymbolOf(*wrong, Sizes(b)).has_value());
  EXPECT_FALSE(GuessSizes(a, 3).has_value());  // no dim of that size
}

// x: [2, s, 4], y: [t, 3] -> (x flattened to [2, 4 s], y flattened to [3 t]).
Graph TwoGuessable(int64_t s, int64_t t) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, s, 4}});
  Value y = g.Param({DType::kF32, {t, 3}});
  g.results = {Reshape(g, x, {2, 4 * s}), Reshape(g, y, {3 * t})};
  return g;
}

TEST(GuessSizes, TwoMarkedSizes) {
  Graph a = TwoGuessable(5, 7), b = TwoGuessable(9, 4);
  std::optional<SizeFormula> guess = GuessSizes(a, 5, 7);
  ASSERT_TRUE(guess.has_value());
  EXPECT_TRUE(guess->TwoSymbols());
  EXPECT_TRUE(SymbolOf(*guess, Sizes(b)) == Point(9, 4));
  EXPECT_FALSE(GuessSizes(a, 5, 6).has_value());  // no dim of the second size
}

// A [2, bound, 4] x whose entries past its first s rows hold NaN (any of it that reached a
// real entry would show), and the results of `exe` run on it and s.
std::vector<float> PaddedX(int64_t bound, int64_t s) {
  std::vector<float> x(2 * bound * 4, std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      for (int64_t k = 0; k < 4; ++k) x[(i * bound + j) * 4 + k] = float(i * 1000 + j * 10 + k);
    }
  }
  return x;
}

template <typename Exe>
std::vector<std::vector<float>> RunOnX(const Exe& exe, const std::vector<float>& x, int64_t bound,
                                       int64_t s) {
  const int32_t s32 = static_cast<int32_t>(s);
  std::vector<rt::BufferPtr> bufs{TestClient().FromHost(x.data(), DType::kF32, {2, bound, 4}, 0),
                                  TestClient().FromHost(&s32, DType::kS32, {}, 0)};
  std::vector<PJRT_Buffer*> raw;
  for (const auto& buf : bufs) raw.push_back(buf->raw());
  std::vector<std::vector<float>> out;
  for (const auto& r : TestClient().Execute(exe, raw, 0)) {
    out.emplace_back(r->numel());
    r->ToHost(out.back().data(), out.back().size() * sizeof(float));
  }
  return out;
}

// x: [2, s, 4] -> (x merged to [2s, 4] plus 1, that split back to [2, s, 4]): reshapes that move
// padding, whose rows the bounded program places itself.
Graph MergeAndSplit(int64_t s) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, s, 4}});
  Value merged = Reshape(g, x, {2 * s, 4});
  Value plus = Binary(g, "stablehlo.add", merged, Constant(g, 1, DType::kF32, {2 * s, 4}));
  g.results = {plus, Reshape(g, plus, {2, s, 4})};
  return g;
}

TEST(Bounded, ReshapesThatMovePaddingPlaceTheirRows) {
  Graph a = MergeAndSplit(3), b = MergeAndSplit(5);
  SizeFormula f = *FitSizes(Sizes(a), Sizes(b), DimCount(a));
  ASSERT_EQ(WhyNotBounded(a, f), "");
  const int64_t bound = BoundFor(f, 20).s;  // 32
  auto exe = TestClient().Compile(PrintModule(Bounded(b, f, bound)),
                                  {{DType::kF32, CapacityDims(b, f, b.results[0], bound)},
                                   {DType::kF32, CapacityDims(b, f, b.results[1], bound)}});
  for (int64_t s : {1, 7, 20}) {
    const std::vector<float> x = PaddedX(bound, s);
    const auto res = RunOnX(*exe, x, bound, s);
    ASSERT_EQ(res[0].size(), static_cast<size_t>(2 * bound * 4));
    const std::vector<float>&merged = res[0], &split = res[1];
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        for (int64_t k = 0; k < 4; ++k) {
          const float want = x[(i * bound + j) * 4 + k] + 1;
          // The merged rows are packed, real ones first; the split ones padded per dim.
          EXPECT_EQ(merged[((i * s) + j) * 4 + k], want) << "s = " << s;
          EXPECT_EQ(split[(i * bound + j) * 4 + k], want) << "s = " << s;
        }
      }
    }
  }
}

// x: [2, s, 4] written at row 1 of a [2, s + 1, 4] of -1 (F.pad's copy into the padded
// tensor): an update of a sized window.
Graph PadFront(int64_t s) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, s, 4}});
  Value base = Constant(g, -1, DType::kF32, {2, s + 1, 4});
  Value zero = Constant(g, 0, DType::kS64), one = Constant(g, 1, DType::kS64);
  g.results = {DynamicUpdateSlice(g, base, x, {zero, one, zero})};
  return g;
}

TEST(Bounded, AnUpdateOfASizedWindowKeepsItsBasePastTheWindow) {
  Graph a = PadFront(3), b = PadFront(5);
  SizeFormula f = *FitSizes(Sizes(a), Sizes(b), DimCount(a));
  ASSERT_EQ(WhyNotBounded(a, f), "");
  const int64_t bound = BoundFor(f, 20).s;  // 32: s + 1 fits
  auto exe = TestClient().Compile(PrintModule(Bounded(b, f, bound)),
                                  {{DType::kF32, CapacityDims(b, f, b.results[0], bound)}});
  const int64_t rows = CapacityDims(b, f, b.results[0], bound)[1];
  for (int64_t s : {1, 7, 20}) {
    const std::vector<float> x = PaddedX(bound, s);
    const std::vector<float> got = RunOnX(*exe, x, bound, s)[0];
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j <= s; ++j) {
        for (int64_t k = 0; k < 4; ++k) {
          const float want = j == 0 ? -1.0f : x[(i * bound + j - 1) * 4 + k];
          EXPECT_EQ(got[(i * rows + j) * 4 + k], want) << "s = " << s << " at " << i << ", " << j;
        }
      }
    }
  }
}

// x: [s, 4, 8] and m: [s + 2, 8] -> x m^T: [s, 4, s + 2], two sized dims; then that value
// contracted over its 4 with w: [4, 3], or scaled elementwise.
Graph TwoSized(int64_t s, bool contract) {
  Graph g;
  Value x = g.Param({DType::kF32, {s, 4, 8}});
  Value m = g.Param({DType::kF32, {s + 2, 8}});
  Value w = g.Param({DType::kF32, {4, 3}});
  Value y = DotGeneral(g, x, m, {}, {}, {2}, {1}, Type{DType::kF32, {s, 4, s + 2}});
  g.results = {contract ? DotGeneral(g, y, w, {}, {}, {1}, {0}, Type{DType::kF32, {s, s + 2, 3}})
                        : Binary(g, "stablehlo.multiply", y, y)};
  return g;
}

TEST(Bounded, TwoSizedDimsGoOnlyToOpsCheckedWithThem) {
  for (bool contract : {false, true}) {
    Graph a = TwoSized(3, contract), b = TwoSized(5, contract);
    SizeFormula f = *FitSizes(Sizes(a), Sizes(b), DimCount(a));
    f.dims = DimCount(a);
    // XLA merges a dot's free dims into one: two sized dims merged so gave wrong results.
    EXPECT_EQ(WhyNotBounded(a, f), contract ? "a dot over two sized free dims" : "");
  }
}

TEST(Bounded, OneProgramCountsOnlyRealEntries) {
  Graph a = Member(3, {}), b = Member(5, {});
  SizeFormula f = *FitSizes(Sizes(a), Sizes(b), DimCount(a));
  f.dims = DimCount(a);
  ASSERT_EQ(WhyNotBounded(a, f), "");
  const int64_t bound = BoundFor(f, 100).s;  // 128: it holds every s below
  Graph bounded = Bounded(b, f, bound);
  auto exe = TestClient().Compile(
      PrintModule(bounded),
      {{DType::kF32, CapacityDims(b, f, b.results[0], bound)}, {DType::kF32, {2, 4}}});
  for (int64_t s : {1, 7, 100}) {
    // The padding holds NaN: any of it that reached a real entry would show.
    std::vector<float> x(2 * bound * 4, std::numeric_limits<float>::quiet_NaN()), y(8);
    std::vector<float> sum(8, 0);
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        for (int64_t k = 0; k < 4; ++k) {
          x[(i * bound + j) * 4 + k] = static_cast<float>(i * 100 + j * 4 + k);
          sum[i * 4 + k] += x[(i * bound + j) * 4 + k];
        }
      }
    }
    for (int64_t k = 0; k < 8; ++k) {
      y[k] = static_cast<float>(-k);
      sum[k] += y[k];
    }
    const int32_t s32 = static_cast<int32_t>(s);
    std::vector<rt::BufferPtr> bufs{TestClient().FromHost(x.data(), DType::kF32, {2, bound, 4}, 0),
                                    TestClient().FromHost(y.data(), DType::kF32, {2, 1, 4}, 0),
                                    TestClient().FromHost(&s32, DType::kS32, {}, 0)};
    std::vector<PJRT_Buffer*> raw;
    for (const auto& buf : bufs) raw.push_back(buf->raw());
    auto res = TestClient().Execute(*exe, raw, 0);
    std::vector<float> cat(res[0]->numel()), got(8);
    res[0]->ToHost(cat.data(), cat.size() * sizeof(float));
    res[1]->ToHost(got.data(), got.size() * sizeof(float));
    EXPECT_EQ(got, sum) << "s = " << s;
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t k = 0; k < 4; ++k) {  // y lands right after the real rows, not the padding
        EXPECT_EQ(cat[(i * bound + s) * 4 + k], y[i * 4 + k]) << "s = " << s;
        EXPECT_EQ(cat[(i * bound + 0) * 4 + k], x[(i * bound) * 4 + k]) << "s = " << s;
      }
    }
  }
}

}  // namespace
}  // namespace tpu::ir

namespace tpu::ir {
namespace {

TEST(FitSizes, TwoSymbolsThroughThreeMembersThatOneDoesNotExplain) {
  // Dims s, t, s + t, 2s, then a constant s*8 - t (a flat index's offset, say).
  auto at = [](int64_t s, int64_t t) {
    return std::vector<int64_t>{s, t, s + t, 2 * s, 8 * s - t};
  };
  std::optional<SizeFormula> f = FitSizes(at(3, 10), at(4, 10), at(5, 20), 4);
  ASSERT_TRUE(f.has_value());
  ASSERT_TRUE(f->TwoSymbols());
  EXPECT_EQ(f->symbol, 0u);
  EXPECT_EQ(f->symbol2, 1u);
  EXPECT_EQ(f->sizes[2], (Affine{1, 0, 1}));
  EXPECT_EQ(f->sizes[3], (Affine{2, 0, 0}));
  EXPECT_EQ(f->sizes[4], (Affine{8, 0, -1}));
  EXPECT_EQ(SymbolOf(*f, at(100, 7)), (Point{100, 7}));
  EXPECT_FALSE(SymbolOf(*f, {100, 7, 108, 200, 793}).has_value());
  // Changes one symbol explains, and a dim that shrinks as t grows, give none.
  EXPECT_FALSE(FitSizes(at(3, 3), at(4, 4), at(6, 6), 4).has_value());
  EXPECT_FALSE(FitSizes({3, 10, 5}, {4, 10, 5}, {5, 20, 4}, 3).has_value());
  // Each symbol's bound holds its sizes: s + t fits in P + Q.
  EXPECT_EQ(BoundFor(*f, Point{20, 3}), (Point{32, MinBound()}));
}

// x: [s, 4], y: [t, 4] -> (the sum over t of x y^T: [s]; x and y concatenated: [s + t, 4]).
Graph TwoLengths(int64_t s, int64_t t) {
  Graph g;
  Value x = g.Param({DType::kF32, {s, 4}});
  Value y = g.Param({DType::kF32, {t, 4}});
  Value xy = DotGeneral(g, x, y, {}, {}, {1}, {1}, Type{DType::kF32, {s, t}});
  g.results = {Reduce(g, xy, Constant(g, 0, DType::kF32), {1}, "stablehlo.add"),
               Concat(g, {x, y}, 0)};
  return g;
}

TEST(Bounded, TwoSymbolsCountOnlyTheirRealEntries) {
  SizeFormula f = *FitSizes(Sizes(TwoLengths(3, 5)), Sizes(TwoLengths(4, 5)),
                            Sizes(TwoLengths(6, 9)), DimCount(TwoLengths(3, 5)));
  ASSERT_TRUE(f.TwoSymbols());
  const Graph g = TwoLengths(6, 9);
  ASSERT_EQ(WhyNotBounded(g, f), "");
  const Point bound = BoundFor(f, Point{10, 20});  // (16, 32)
  ASSERT_EQ(bound, (Point{16, 32}));
  auto exe = TestClient().Compile(PrintModule(Bounded(g, f, bound)),
                                  {{DType::kF32, CapacityDims(g, f, g.results[0], bound)},
                                   {DType::kF32, CapacityDims(g, f, g.results[1], bound)}});
  for (const auto& [s, t] : {std::pair<int64_t, int64_t>{10, 20}, {1, 32}, {16, 3}}) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> x(16 * 4, nan), y(32 * 4, nan);
    for (int64_t i = 0; i < s * 4; ++i) x[i] = float(i % 7) - 3;
    for (int64_t i = 0; i < t * 4; ++i) y[i] = float(i % 5) * 0.5f;
    const int32_t s32 = static_cast<int32_t>(s), t32 = static_cast<int32_t>(t);
    std::vector<rt::BufferPtr> bufs{TestClient().FromHost(x.data(), DType::kF32, {16, 4}, 0),
                                    TestClient().FromHost(y.data(), DType::kF32, {32, 4}, 0),
                                    TestClient().FromHost(&s32, DType::kS32, {}, 0),
                                    TestClient().FromHost(&t32, DType::kS32, {}, 0)};
    std::vector<PJRT_Buffer*> raw;
    for (const auto& buf : bufs) raw.push_back(buf->raw());
    std::vector<std::vector<float>> out;
    for (const auto& r : TestClient().Execute(*exe, raw, 0)) {
      out.emplace_back(r->numel());
      r->ToHost(out.back().data(), out.back().size() * sizeof(float));
    }
    for (int64_t i = 0; i < s; ++i) {
      float want = 0;
      for (int64_t j = 0; j < t; ++j) {
        for (int64_t k = 0; k < 4; ++k) want += x[i * 4 + k] * y[j * 4 + k];
      }
      EXPECT_FLOAT_EQ(out[0][i], want) << "s = " << s << ", t = " << t;
    }
    // The concatenation: x's real rows, then y's, packed.
    for (int64_t i = 0; i < (s + t) * 4; ++i) {
      EXPECT_EQ(out[1][i], i < s * 4 ? x[i] : y[i - s * 4]) << "s = " << s << ", t = " << t;
    }
  }
}

}  // namespace
}  // namespace tpu::ir
