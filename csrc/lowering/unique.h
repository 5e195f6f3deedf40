// The programs behind torch.unique and unique_consecutive, over the rows of an [M, R] value (R = 1
// for the flat forms): the host reads the group count from one program, then sizes the next.
#pragma once

#include "lowering/rule.h"

namespace tpu::lowering {

struct UniqueGroups {
  Value rows;   // [M, R], in the order unique returns them (sorted rows, or as given)
  Value perm;   // [M] s64: the input row each of `rows` came from
  Value first;  // [M] pred: the row starts a group of equal rows
};

// Rows grouped as unique (sort: stable lexicographic order, NaN last) or unique_consecutive does.
UniqueGroups GroupRows(Graph& g, Value x, bool sort);
// The number of groups, an s64 scalar.
Value GroupCount(Graph& g, const UniqueGroups& u);
// For k groups: the distinct rows [k, R], each input row's group [M] and each group's size [k].
std::vector<Value> GroupResults(Graph& g, const UniqueGroups& u, int64_t k);

}  // namespace tpu::lowering
