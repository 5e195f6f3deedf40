// Fused mode's trace, without PyTorch: recording, liveness, the structural key, loop detection
// and failure attribution.
#include "eager/trace.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "eager/executor.h"
#include "ir/builder.h"

namespace tpu::eager {
namespace {

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Initialized()) {
      rt::ClientOptions o;
      o.plugin_path = std::getenv("TORCHTPU_PJRT_PLUGIN");
      o.platform = "cpu";
      Init(o);
    }
    SetMode(Mode::kFused);
    Trace::SetMaxOps(0);
  }
  void TearDown() override { SetMode(Mode::kStrict); }

  static LazyPtr Upload(float v, int64_t n = 4) {
    std::vector<float> host(n, v);
    return Lazy::Of(Client().FromHost(host.data(), rt::DType::kF32, {n}, 0), 0);
  }
  // x * a + b as one recorded op (`op` != "" emits an op XLA does not know).
  static LazyPtr Affine(const LazyPtr& x, float a, float b, const char* bogus = nullptr) {
    ir::Graph g;
    const std::vector<int64_t>& dims = x->type.dims;
    ir::Value p = g.Param(x->type);
    ir::Value y = ir::Binary(g, "stablehlo.multiply", p, ir::Constant(g, a, rt::DType::kF32, dims));
    y = ir::Binary(g, bogus ? bogus : "stablehlo.add", y,
                   ir::Constant(g, b, rt::DType::kF32, dims));
    g.results = {y};
    return Submit(std::move(g), {x}, 0, "test::affine")[0];
  }
  static float Read(const LazyPtr& v) {
    std::vector<float> host(v->type.numel());
    Materialize(v)->ToHost(host.data(), host.size() * sizeof(float));
    return host.back();
  }
};

TEST_F(TraceTest, RecordsThenRunsOneProgram) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1);
  int64_t runs = m.executions, flushes = m.flushes;
  LazyPtr y = x;
  for (int i = 0; i < 5; ++i) y = Affine(y, 2, 1);
  EXPECT_FALSE(y->ready.load());
  EXPECT_EQ(m.executions, runs);
  EXPECT_EQ(TraceOf(0).pending_ops(), 5u);
  EXPECT_EQ(Read(y), 63.0f);
  EXPECT_EQ(m.executions, runs + 1);
  EXPECT_EQ(m.flushes, flushes + 1);
  EXPECT_EQ(TraceOf(0).pending_ops(), 0u);
}

TEST_F(TraceTest, AReadRunsWhatItNeedsFirstAndTheRestAfter) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1);
  LazyPtr a = Affine(x, 2, 0);
  LazyPtr b = Affine(Affine(x, 3, 0), 1, 1);  // independent of a
  LazyPtr c = Affine(a, 1, 5);                // reads a, recorded after the read's cone
  int64_t runs = m.executions;
  EXPECT_EQ(Read(a), 2.0f);
  EXPECT_EQ(m.executions, runs + 2);  // a's cone, then the rest
  EXPECT_TRUE(b->ready.load());
  EXPECT_EQ(Read(b), 4.0f);
  EXPECT_EQ(Read(c), 7.0f);
  EXPECT_EQ(m.executions, runs + 2);
}

TEST_F(TraceTest, AnotherRecordingThreadStartsWhatIsRecorded) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1);
  LazyPtr a = Affine(x, 2, 0);  // recorded here
  int64_t runs = m.executions;
  LazyPtr b;
  std::thread([&] { b = Affine(a, 1, 1); }).join();  // as autograd's device thread would
  EXPECT_EQ(m.executions, runs + 1);                 // `a` is running already
  EXPECT_TRUE(a->ready.load());
  EXPECT_FALSE(b->ready.load());
  EXPECT_EQ(Read(b), 3.0f);
}

TEST_F(TraceTest, ValuesNobodyHoldsAreNotComputed) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1);
  Affine(Affine(x, 3, 0), 2, 0);  // both results dropped at once
  int64_t runs = m.executions;
  Flush(0);
  EXPECT_EQ(m.executions, runs);
}

TEST_F(TraceTest, TheSameTraceCompilesOnce) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(2);
  EXPECT_EQ(Read(Affine(Affine(x, 5, 1), 1, 7)), 18.0f);
  int64_t compiles = m.compiles;
  LazyPtr z = Upload(3);  // other buffers and values, same program
  EXPECT_EQ(Read(Affine(Affine(z, 5, 1), 1, 7)), 23.0f);
  EXPECT_EQ(m.compiles, compiles);
}

TEST_F(TraceTest, ALoopWithoutReadsMapsOntoTheSameExecutables) {
  Metrics& m = GetMetrics();
  // A 13-op loop body and a 10-op size limit: cutting every 10 ops would make 13 different
  // programs; cutting on the detected loop makes two (ops 0-9 and 10-12 of each iteration).
  Trace::SetMaxOps(10);
  LazyPtr x = Upload(0);
  int64_t start = m.compiles, at_5 = 0;
  for (int i = 0; i < 30; ++i) {
    for (int k = 0; k < 13; ++k) x = Affine(x, 1, static_cast<float>(k));
    if (i == 5) at_5 = m.compiles;
  }
  EXPECT_EQ(m.compiles, at_5);
  EXPECT_LE(m.compiles - start, 6);
  EXPECT_EQ(Read(x), 30.0f * 78);
}

TEST_F(TraceTest, AFailureNamesTheOpAndSparesIndependentValues) {
  LazyPtr x = Upload(1);
  LazyPtr bad = Affine(x, 1, 1, "stablehlo.not_an_op");
  LazyPtr after_bad = Affine(bad, 1, 1);
  LazyPtr good = Affine(x, 4, 0);
  try {
    Read(good);
    FAIL() << "the failure was not reported";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("tpu failed to compile test::affine"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(Read(good), 4.0f);
  EXPECT_THROW(Read(after_bad), OpError);  // depends on the failed op: its value is lost
}

constexpr int64_t kDonatable = 1 << 18;  // floats: 1 MiB, the smallest buffer donated

TEST_F(TraceTest, ABufferNobodyElseHoldsIsDonatedToTheProgram) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1, kDonatable);
  rt::BufferPtr old = x->buf;
  std::weak_ptr<rt::Buffer> gone = old;
  old.reset();
  int64_t donated = m.donated_buffers;
  x = Affine(x, 2, 1);  // an in-place update: x's old value is held by the trace only
  EXPECT_EQ(Read(x), 3.0f);
  EXPECT_EQ(m.donated_buffers, donated + 1);
  EXPECT_TRUE(gone.expired());
}

TEST_F(TraceTest, ABufferSomeoneHoldsIsNotDonated) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1, kDonatable);
  int64_t donated = m.donated_buffers;
  LazyPtr y = Affine(x, 2, 1);
  EXPECT_EQ(Read(y), 3.0f);
  EXPECT_EQ(m.donated_buffers, donated);
  EXPECT_FALSE(x->buf->Donated());
  EXPECT_EQ(Read(x), 1.0f);
  // Small buffers stay: 0-d values are shared through the scalar cache.
  LazyPtr s = Upload(1, 4);
  s = Affine(s, 2, 1);
  EXPECT_EQ(Read(s), 3.0f);
  EXPECT_EQ(m.donated_buffers, donated);
}

TEST_F(TraceTest, ABufferTheOtherPartReadsIsNotDonated) {
  Metrics& m = GetMetrics();
  LazyPtr x = Upload(1, kDonatable);
  LazyPtr a = Affine(x, 2, 0);  // read first: its own program, then the rest
  LazyPtr b = Affine(x, 3, 0);
  x.reset();
  int64_t donated = m.donated_buffers;
  EXPECT_EQ(Read(a), 2.0f);
  EXPECT_EQ(Read(b), 3.0f);
  EXPECT_EQ(m.donated_buffers, donated);
}

}  // namespace
}  // namespace tpu::eager
