// A typed SSA graph of StableHLO ops: what lowering rules build and the printer prints.
// One node type for every op: a name, operands, result types, attributes already written in
// MLIR syntax, and optional regions (bodies of reduce, sort, scatter, ...).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dtype.h"

namespace tpu::ir {

using rt::DType;

struct Type {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  std::string str() const;  // "tensor<4x8xf32>"
  bool operator==(const Type& o) const { return dtype == o.dtype && dims == o.dims; }
};

// A value is an index into its graph's value table.
using Value = int32_t;

struct Graph;

struct Node {
  std::string op;  // "stablehlo.add"
  std::vector<Value> operands;
  std::vector<Value> results;
  std::string attrs;  // "dimensions = array<i64: 1>" (without braces)
  std::vector<std::shared_ptr<Graph>> regions;
};

struct Graph {
  std::deque<Type> types;      // type of each value (a deque: references stay valid)
  std::vector<Value> params;   // block arguments, in order
  std::vector<Node> nodes;     // in program order
  std::vector<Value> results;  // returned values
  // Buffer donation: {param index, result index} pairs whose result may reuse the param's
  // memory (the caller gives the param's buffer up when it runs the program).
  std::vector<std::pair<int64_t, int64_t>> donations;

  const Type& type(Value v) const { return types.at(v); }
  Value Param(Type t);
  // Appends an op; returns its results.
  std::vector<Value> Op(std::string op, std::vector<Value> operands, std::vector<Type> result_types,
                        std::string attrs = {}, std::vector<std::shared_ptr<Graph>> regions = {});
  Value Op1(std::string op, std::vector<Value> operands, Type result_type, std::string attrs = {},
            std::vector<std::shared_ptr<Graph>> regions = {});
};

struct Hash128 {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
};
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 31)); }
};

// FNV-1a style mixing of 64-bit words into two independent lanes: the 128-bit keys of graphs,
// fused parts and size families.
struct Mixer128 {
  uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
  void Mix(uint64_t x) {
    // A multiply carries bits only upward: the shifts feed the high bits back into the low
    // ones, and the lanes multiply by different odd constants, so no difference cancels.
    a = (a ^ x) * 0x100000001b3ULL;
    a ^= a >> 29;
    b = (b ^ (x + 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL + 0x2545f4914f6cdd1dULL;
    b ^= b >> 32;
  }
  Hash128 Get() const { return {a, b}; }
};

// Appends a copy of `from`'s nodes to `into`, with from's params bound to `args` (values of
// `into`). Returns the values of from's results in `into`. Regions are shared, not copied.
std::vector<Value> Inline(Graph& into, const Graph& from, const std::vector<Value>& args);

// Structural hash of a whole graph (ops, attributes, types, wiring), computed without printing.
Hash128 StructuralHash(const Graph& g);

// The value of a 0-d stablehlo.constant when it is a whole number of moderate size (sizes,
// strides and counts that rules compute), else nothing.
std::optional<int64_t> WholeConstant(const Graph& g, const Node& n);

// The same without the sizes of g's own values (nor its whole constants, nor the sizes of its
// dynamic slices) (its regions are hashed whole): programs that
// differ only in sizes hash alike (see size_family.h).
Hash128 ShapelessHash(const Graph& g);

// The StableHLO module with @main(params) -> results, in MLIR's generic op syntax.
std::string PrintModule(const Graph& g);

}  // namespace tpu::ir
