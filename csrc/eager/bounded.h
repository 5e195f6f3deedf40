// Fused mode's bounded programs: flushes that differ only in sizes (a decoding step whose KV
// cache grows by a row, a batch with a new length) share one program per bound instead of
// compiling one per size (ir/size_family.h).
//
// A family is the set of a part's programs with one ShapelessHash. Its first two members with
// different sizes give the formula of every size in one integer s; from the second on, a member
// whose sizes fit the formula runs the family's program for its bound, on inputs padded to
// their capacity there, and its outputs stay padded: a value whose buffer is larger than its
// type holds its entries in the leading corner. The next step of the loop takes them as they
// are. Anything else that reads such a value gets the corner (Unpadded).
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "runtime/client.h"

namespace tpu::eager {

// On or off for the process (on unless TORCHTPU_BOUNDED=0); either way it forgets the
// families seen so far.
void SetBounded(bool on);
bool BoundedOn();

// A size that varies, from a dim marked dynamic (torchtpu.mark_dynamic), up to `max` when
// positive. While the hint lives, a family seen once with a dim of that size runs bounded from
// its first member (ir::GuessSizes), so the sizes that come next compile nothing; `max` is then
// the least bound. Returns the hint's id for DropSizeHint.
int64_t AddSizeHint(int64_t size, int64_t max);
void DropSizeHint(int64_t id);
// The sizes of the hints alive now.
std::vector<int64_t> SizeHints();

// (parameter, result) pairs: a result written into its parameter's buffer.
using Donations = std::vector<std::pair<int64_t, int64_t>>;

// A flushed part with exact key `key`. `logical` builds it with each parameter typed as the value
// it holds; `params` are the buffers, maybe padded. When the part is a member of a family with a
// formula, runs the family's program for its bound and returns the outputs (padded); else
// returns nothing and the caller runs the exact program. Either answer is remembered by key, so
// a part seen before builds no graph.
// `donations` (parameter, result) are the exact program's; a bounded run leaves there the ones
// its program keeps (a parameter and a result of one capacity).
std::optional<std::vector<rt::BufferPtr>> RunBounded(
    const ir::Hash128& key, const std::function<const ir::Graph&()>& logical,
    const std::vector<rt::BufferPtr>& params, Donations* donations, int device, int64_t ops);

// `buf` holds a value of `dims`; when a bounded program left it padded, a buffer of those dims
// with its entries (cut through the host, as host reads and other consumers want exact buffers).
rt::BufferPtr Unpadded(rt::BufferPtr buf, const std::vector<int64_t>& dims);
// The entries of `buf` in its leading corner `real`, in a buffer of dims `to` (zeros elsewhere).
rt::BufferPtr Repadded(const rt::Buffer& buf, const std::vector<int64_t>& real,
                       const std::vector<int64_t>& to, int device);

}  // namespace tpu::eager
