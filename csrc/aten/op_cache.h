// Op cache: a call that looks exactly like an earlier one (the same op, tensor layouts, storage
// states and aliasing, the same scalar and other argument values, the same mode) lowers to the
// same graph. Its graph, hash and Meta result are kept with a recipe saying where each input and
// written buffer comes from, so such a call replays them: no Meta kernel, no lowering, no hashing.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten/graph_builder.h"
#include "aten/meta_cache.h"

namespace tpu::aten {

struct OpRecipe {
  std::vector<TensorMeta> metas;
  std::shared_ptr<const ir::Graph> g;
  ir::Hash128 hash;
  // Per graph input: the current buffer of the call's tensor `tensor` (tensors of the arguments
  // in order, lists flattened), or when `tensor` < 0 the scalar `bits` of `dtype`.
  struct Input {
    int tensor = -1;
    uint64_t bits = 0;
    rt::DType dtype = rt::DType::kInvalid;
  };
  std::vector<Input> inputs;
  // Per written storage, in the order of the graph's results after its own `results`: the
  // call's tensor k (>= 0), or the op's new return ~k.
  std::vector<int> writes;
  size_t results = 0;
  eager::CheckTexts checks;  // null: the graph computes no check flag
};
using OpRecipePtr = std::shared_ptr<const OpRecipe>;

// A call's tensors in the order recipes index them, with the buffer each storage held when the
// key was made (null: none, or not a tpu tensor): a replay reads exactly what the key described.
struct CallTensors {
  std::vector<at::Tensor> tensors;
  std::vector<eager::LazyPtr> buffers;
};

// The key of a call on `device`, filling `call`; nullopt when the call cannot be keyed (CPU
// tensors, generators, a torch.compile capture, ...).
std::optional<std::string> OpCacheKey(const c10::OperatorHandle& op,
                                      const std::vector<c10::IValue>& args, int device,
                                      CallTensors& call);

OpRecipePtr LookupRecipe(const std::string& key);
// Keeps what `b` (run) built for a call, if it can be replayed. `targets`: the op's returns.
void StoreRecipe(const std::string& key, const GraphBuilder& b, std::vector<TensorMeta> metas,
                 const CallTensors& call, const std::vector<at::Tensor>& targets);

// The graph inputs the recipe names, for the call `call` (keyed like the recipe's).
std::vector<eager::LazyPtr> RecipeInputs(const OpRecipe& r, const CallTensors& call, int device);

// Whether the op cache is used (TORCHTPU_OP_CACHE=0 turns it off, for benchmarks and bisecting).
bool OpCacheEnabled();
void SetOpCacheEnabled(bool on);

}  // namespace tpu::aten
