// StableHLO collectives across the replicas of one program, and the whole programs a c10d
// collective becomes. Replica r of a program is rank r of the process group that runs it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lowering/rule.h"

namespace tpu::lowering {

// c10d's reductions. kAvg and kPremulSum are a sum with a division or a factor around it.
enum class Reduction { kSum, kAvg, kProduct, kMin, kMax, kBand, kBor, kBxor, kPremulSum };

// The scalar op ("stablehlo.add", ...) that combines two values of dtype t; throws
// std::invalid_argument for a reduction the dtype does not have (bitwise ops on floats).
std::string CombinerOp(Reduction r, DType t);

// Replica groups over `size` replicas: one group holding all of them.
std::vector<Dims> WholeGroup(int64_t size);

Value AllReduce(Graph& g, Value x, const std::string& combiner, const std::vector<Dims>& groups);
Value AllGather(Graph& g, Value x, int64_t dim, const std::vector<Dims>& groups);
Value ReduceScatter(Graph& g, Value x, int64_t dim, const std::string& combiner,
                    const std::vector<Dims>& groups);
Value AllToAll(Graph& g, Value x, int64_t split_dim, int64_t concat_dim,
               const std::vector<Dims>& groups);
Value CollectivePermute(Graph& g, Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs);
// This replica's index as a 0-d u32.
Value ReplicaId(Graph& g);

// What one c10d collective computes, for every operand alike.
enum class Collective {
  kAllReduce,      // x -> reduce(x)
  kBroadcast,      // x -> x of replica `root`
  kAllGather,      // x[d...] -> [size, d...]
  kReduceScatter,  // x[size, d...] -> reduce over replicas of row `rank`
  kAllToAll,       // x[size, d...] -> row j comes from replica j's row `rank`
  kPermute,        // x -> x of the replica whose pair names this one (zeros elsewhere)
};

struct CollectiveSpec {
  Collective kind = Collective::kAllReduce;
  Reduction reduction = Reduction::kSum;
  double factor = 1.0;                             // kPremulSum
  int64_t root = 0;                                // kBroadcast
  int64_t size = 1;                                // replicas (the group's size)
  std::vector<std::pair<int64_t, int64_t>> pairs;  // kPermute: (source, target) replicas
  std::vector<Type> operands;
};

// The program of `spec`: one parameter and one result per operand.
Graph CollectiveProgram(const CollectiveSpec& spec);
// A readable, complete description of `spec` (also its cache key): "all_reduce(sum) f32[4,8]".
std::string Describe(const CollectiveSpec& spec);

}  // namespace tpu::lowering
