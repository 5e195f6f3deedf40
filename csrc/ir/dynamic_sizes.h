// Printing programs that mark sizes dynamic (stablehlo.set_dimension_size; bounded dynamic
// shapes under torch.compile). Their types stay static (the rules know only the bound), so the
// printed program differs from the graph in two ways:
// - get_dimension_size, which MLIR would fold to the bound of the static type, becomes a count:
//   a reduce over an always-true mask of the operand, which XLA's dynamic padder cuts to the real
//   size;
// - each result dim that may be dynamic (a dims analysis over the graph) is gathered whole
//   (indices 0..n-1). A gather's result has static sizes, so the program returns plain padded
//   buffers rather than buffers with XLA's dynamic-size metadata appended, which no program
//   takes in. (Updates, slices, pads and selects keep the dynamic size, and MLIR folds an
//   identity update away.)
#pragma once

#include "ir/graph.h"

namespace tpu::ir {

// Whether the graph marks any size dynamic.
bool HasDynamicSizes(const Graph& g);
// The graph to print in its place.
Graph ForDynamicSizes(const Graph& g);

}  // namespace tpu::ir
