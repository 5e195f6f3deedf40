// Runs one lowering rule on the CPU plugin, for rule unit tests:
//   RuleRun r("aten::add", "Tensor");
//   Value a = r.Tensor("self", {DType::kF32, {3}}, {1, 2, 3});
//   r.Int("dim", 0);  r.Out({DType::kF32, {3}});
//   std::vector<double> out = r.Run()[0];
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "eager/executor.h"
#include "lowering/rule.h"
#include "test_client.h"

namespace tpu::testing {

using lowering::Arg;
using lowering::Ctx;
using lowering::Value;

class RuleRun {
 public:
  RuleRun(std::string name, std::string overload)
      : name_(std::move(name)), overload_(std::move(overload)), ctx_{graph_, {}, {}} {}

  // A tensor (or Scalar) argument with the given values (converted to the type's dtype).
  Value Tensor(const std::string& arg, ir::Type t, const std::vector<double>& values) {
    Value v = graph_.Param(t);
    Arg a;
    a.kind = Arg::Kind::kValue;
    a.value = v;
    ctx_.args.emplace_back(arg, a);
    inputs_.push_back(Upload(t, values));
    return v;
  }
  void Int(const std::string& arg, int64_t i) {
    Add(arg, [&](Arg& a) {
      a.kind = Arg::Kind::kInt;
      a.i = i;
    });
  }
  void Ints(const std::string& arg, ir::Dims v) {
    Add(arg, [&](Arg& a) {
      a.kind = Arg::Kind::kInts;
      a.ints = v;
    });
  }
  void Double(const std::string& arg, double d) {
    Add(arg, [&](Arg& a) {
      a.kind = Arg::Kind::kDouble;
      a.d = d;
    });
  }
  void Bool(const std::string& arg, bool b) {
    Add(arg, [&](Arg& a) {
      a.kind = Arg::Kind::kBool;
      a.b = b;
    });
  }
  void Str(const std::string& arg, std::string s) {
    Add(arg, [&](Arg& a) {
      a.kind = Arg::Kind::kString;
      a.s = s;
    });
  }
  void None(const std::string& arg) {
    Add(arg, [](Arg&) {});
  }
  void Out(ir::Type t) { ctx_.out.push_back(std::move(t)); }
  void Common(rt::DType t) { ctx_.common = t; }
  Ctx& ctx() { return ctx_; }

  // Runs the rule; returns each result converted to doubles.
  std::vector<std::vector<double>> Run() {
    Client();
    lowering::Rule rule = lowering::FindRule(name_, overload_);
    EXPECT_NE(rule, nullptr) << "no rule for " << name_;
    if (ctx_.common == rt::DType::kInvalid && !ctx_.out.empty()) ctx_.common = ctx_.out[0].dtype;
    graph_.results = rule(ctx_);
    for (size_t i = 0; i < graph_.results.size(); ++i) {
      // Results come back as f64 for easy comparison.
      graph_.results[i] = ir::Convert(graph_, graph_.results[i], rt::DType::kF64);
    }
    auto outs = eager::Run(graph_, inputs_, 0);
    std::vector<std::vector<double>> res;
    for (auto& b : outs) {
      std::vector<double> v(b->numel());
      b->ToHost(v.data(), v.size() * sizeof(double));
      res.push_back(v);
    }
    return res;
  }

 private:
  static void Client() {
    if (!eager::Initialized()) {
      const char* path = std::getenv("TORCHTPU_PJRT_PLUGIN");
      rt::ClientOptions o;
      o.plugin_path = path ? path : "";
      o.platform = "cpu";
      o.cpu_device_count = 2;
      eager::Init(o);
    }
  }
  template <typename F>
  void Add(const std::string& arg, F f) {
    Arg a;
    f(a);
    ctx_.args.emplace_back(arg, a);
  }
  rt::BufferPtr Upload(const ir::Type& t, const std::vector<double>& values) {
    Client();
    std::vector<unsigned char> bytes(values.size() * rt::ItemSize(t.dtype));
    for (size_t i = 0; i < values.size(); ++i) {
      unsigned char* p = bytes.data() + i * rt::ItemSize(t.dtype);
      double v = values[i];
      switch (t.dtype) {
        case rt::DType::kF32: {
          float f = static_cast<float>(v);
          std::memcpy(p, &f, 4);
          break;
        }
        case rt::DType::kF64:
          std::memcpy(p, &v, 8);
          break;
        case rt::DType::kS32: {
          int32_t x = static_cast<int32_t>(v);
          std::memcpy(p, &x, 4);
          break;
        }
        case rt::DType::kS64: {
          int64_t x = static_cast<int64_t>(v);
          std::memcpy(p, &x, 8);
          break;
        }
        case rt::DType::kPred: {
          bool x = v != 0;
          std::memcpy(p, &x, 1);
          break;
        }
        case rt::DType::kU64: {
          uint64_t x = static_cast<uint64_t>(v);
          std::memcpy(p, &x, 8);
          break;
        }
        default:
          ADD_FAILURE() << "unsupported test dtype";
      }
    }
    return eager::Client().FromHost(bytes.data(), t.dtype, t.dims, 0);
  }

  std::string name_, overload_;
  ir::Graph graph_;
  Ctx ctx_;
  std::vector<rt::BufferPtr> inputs_;
};

}  // namespace tpu::testing
