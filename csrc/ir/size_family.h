// Programs that differ only in sizes: a decoding step whose KV cache grows by one row, a batch
// with a new sequence length. When every size of such programs is a*s + b in one integer s
// (or a*s + c*t + b in two: an encoder's and a decoder's lengths, a loop over i that also draws
// n values), one program compiled for a bound P (and Q) serves every s (and t) it holds: its
// inputs are padded to the bound, `stablehlo.set_dimension_size` tells XLA the real sizes (s
// and t are parameters), and XLA's dynamic padder makes reductions, contractions and
// concatenations count only real entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tpu::ir {

// The dims of every value of g (its params, its nodes' results; not its regions), in order,
// then the value of each whole 0-d constant (WholeConstant: the sizes and strides rules compute).
std::vector<int64_t> Sizes(const Graph& g);
// How many of Sizes(g) are dims.
size_t DimCount(const Graph& g);
// Which value holds size i of Sizes(g), for messages: "dim 1 of stablehlo.reshape's result".
std::string SizeSource(const Graph& g, size_t i);

// Values of a family's symbols s and t (t is 0 in a formula of one symbol).
struct Point {
  int64_t s = 0, t = 0;
  Point(int64_t s_ = 0, int64_t t_ = 0) : s(s_), t(t_) {}  // NOLINT: one symbol is an int
  auto operator<=>(const Point&) const = default;
};

struct Affine {
  int64_t a = 0, b = 0;  // a * s + b
  int64_t c = 0;         // + c * t
  int64_t At(const Point& x) const { return a * x.s + c * x.t + b; }
  bool Sized() const { return a != 0 || c != 0; }
  bool operator==(const Affine&) const = default;
};

constexpr size_t kNoSymbol = static_cast<size_t>(-1);

// Each size of a family of programs as a*s + c*t + b, where s is the size at `symbol` and t
// the size at `symbol2` (none: one symbol, every c is 0).
struct SizeFormula {
  std::vector<Affine> sizes;
  size_t symbol = 0;
  size_t dims = 0;  // sizes[0, dims) are dims, the rest constants
  size_t symbol2 = kNoSymbol;
  bool TwoSymbols() const { return symbol2 != kNoSymbol; }
};

// The formula through two programs' sizes (equal counts), when every size that differs is an
// integer multiple of the one that differs least, plus a constant, and no dim (the first `dims`
// sizes) shrinks as s grows. A constant may: -s is an index check's lower bound.
std::optional<SizeFormula> FitSizes(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                    size_t dims);
// The formula in two symbols through three programs' sizes that one symbol does not explain:
// s is the dim that changes least from x to y, t a dim whose changes are not a multiple of s's;
// every size is then an integer combination a*s + c*t + b, and no dim shrinks as s or t grows.
// `misfit`, when given, gets the first size that is not (a flattened [s, t] is s*t).
std::optional<SizeFormula> FitSizes(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                    const std::vector<int64_t>& z, size_t dims,
                                    size_t* misfit = nullptr);
// The formula of a family seen once, given that `size` is a size that varies (a dim marked
// dynamic): each size equal to it is s; a dim that an op makes may be k*s or s+1 or s-1 (merged
// rows, one more row, a shift) and a constant k*s (a stride, -s); other sizes are constants. One
// size cannot tell a constant that happens to equal one of these from a size, so this is a guess
// that the family's next size checks (SymbolOf). Nothing when no dim is `size`. With `size2`
// (another dim marked dynamic, of another size), the same in two symbols: sizes from `size2` are t
// (an encoder's and a decoder's lengths); nothing unless a dim is each.
std::optional<SizeFormula> GuessSizes(const Graph& g, int64_t size, int64_t size2 = 0);
// s (and t) for a program whose sizes are exactly the formula's there, else nothing.
std::optional<Point> SymbolOf(const SizeFormula& f, const std::vector<int64_t>& sizes);

// The bound for s (and t): the smallest power of two, at least MinBound() (16, or
// TORCHTPU_MIN_BOUND), whose capacity holds every size at s (see Capacity); for t the same.
int64_t MinBound();
Point BoundFor(const SizeFormula& f, const Point& x);
// The same, doubled up to WideBound() (128, or TORCHTPU_WIDE_BOUND) while g's values at the bound
// hold at most four times the elements they hold at s (plus a MiB): small loops, whose weights
// dominate, share one wide bound; programs dominated by sized values stay close to their size.
int64_t WideBound();
Point BoundFor(const Graph& g, const SizeFormula& f, const Point& x);
// Whether g's values at `bound` hold at most four times the elements they hold at x (plus a MiB).
bool CheapBound(const Graph& g, const SizeFormula& f, const Point& x, const Point& bound);
// The room a size gets under bound (P, Q): a*P + c*Q, less the constant when it is negative.
// Inputs and outputs of the bounded program have this size, so the outputs of one step of a
// growing loop (a*s + 1) are the next step's inputs at the same bound.
int64_t Capacity(const Affine& f, const Point& bound);

// A constant that is a size (a != 0) is computed from the real s in the bounded program, as the
// exact program would have it.

// Whether g can be bounded: ops whose results depend on where padding sits (reversals, sorts,
// random draws, collectives, custom calls, loops) or that would write padding over real data
// (a scatter of a sized update that does not add it), and values with two sized dims
// that reach an op not checked with two are refused. Returns the reason, or "" when it can.
std::string WhyNotBounded(const Graph& g, const SizeFormula& f);

// g (one member of the family) compiled for `bound`: each param with sized dims takes its
// Capacity there and is marked with its real size; every sized result of every op is marked
// too (broadcasts and iotas create sizes XLA cannot trace to an input); outputs are cut to
// their Capacity. One s32 parameter, s, follows g's params (then t, with two symbols).
Graph Bounded(const Graph& g, const SizeFormula& f, const Point& bound);

// The dims of value v of g under the formula at bound P (its Capacity for params and outputs).
std::vector<int64_t> CapacityDims(const Graph& g, const SizeFormula& f, Value v,
                                  const Point& bound);
// The same for each of `vs`.
std::vector<std::vector<int64_t>> CapacityDims(const Graph& g, const SizeFormula& f,
                                               const std::vector<Value>& vs, const Point& bound);

}  // namespace tpu::ir
