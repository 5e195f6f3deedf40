// Dense decompositions (Cholesky, LU, QR, Bunch-Kaufman LDL^T, Jacobi eigh and SVD) and what is
// built on them (solves, lstsq, matrix_exp), for batched float matrices. Cholesky and
// triangular solves are StableHLO ops; LU, Householder QR and LDL^T are stablehlo.while loops
// over columns that follow LAPACK's getf2/geqr2/org2r/sytf2 step by step (same pivot choices,
// same reflector signs) so results match PyTorch CPU closely.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {

namespace {

using V = std::vector<Value>;
using ir::BroadcastInDim;
using ir::Compare;
using ir::Constant;
using ir::Select;

Dims Cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Dims Batch(const Type& t) { return Dims(t.dims.begin(), t.dims.end() - 2); }
int64_t Rows(const Type& t) { return t.dims[t.rank() - 2]; }
int64_t Cols(const Type& t) { return t.dims[t.rank() - 1]; }

Value Zeros(Graph& g, const Type& t) { return Constant(g, 0, t.dtype, t.dims); }
Value Full(Graph& g, double v, DType t, const Dims& dims) { return Constant(g, v, t, dims); }
Value Add(Graph& g, Value a, Value b) { return ir::Binary(g, "stablehlo.add", a, b); }
Value Sub(Graph& g, Value a, Value b) { return ir::Binary(g, "stablehlo.subtract", a, b); }
Value Mul(Graph& g, Value a, Value b) { return ir::Binary(g, "stablehlo.multiply", a, b); }
Value Div(Graph& g, Value a, Value b) { return ir::Binary(g, "stablehlo.divide", a, b); }
Value And(Graph& g, Value a, Value b) { return ir::Binary(g, "stablehlo.and", a, b); }
Value Idx(Graph& g, const Dims& dims, int64_t dim) {
  return ir::Iota(g, Type{DType::kS64, dims}, dim);
}
// x broadcast to `out`, whose rank is x's plus one: the new dim is at position `at`.
Value Insert(Graph& g, Value x, const Dims& out, int64_t at) {
  Dims map;
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    if (i != at) map.push_back(i);
  }
  return BroadcastInDim(g, x, out, map);
}
// x's leading dims broadcast into `out` (the extra dims are trailing).
Value Lead(Graph& g, Value x, const Dims& out) {
  Dims map(g.type(x).rank());
  std::iota(map.begin(), map.end(), 0);
  return BroadcastInDim(g, x, out, map);
}
// Sum over `dim` of x where mask holds: picks one entry exactly when the mask is one-hot.
Value Pick(Graph& g, Value x, Value mask, int64_t dim) {
  DType t = g.type(x).dtype;
  Value z = Zeros(g, g.type(x));
  return ir::Reduce(g, Select(g, mask, x, z), Constant(g, 0, t), {dim}, "stablehlo.add");
}
Value Mt(Graph& g, Value x) {
  Dims perm(g.type(x).rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return ir::Transpose(g, x, perm);
}
// The conjugate transpose (the transpose of real matrices).
Value Mh(Graph& g, Value x) {
  x = Mt(g, x);
  return rt::IsComplex(g.type(x).dtype) ? ir::Conj(g, x) : x;
}
Value MatMul(Graph& g, Value a, Value b) {
  const Type& ta = g.type(a);
  Dims batch(ta.rank() - 2);
  std::iota(batch.begin(), batch.end(), 0);
  int64_t r = ta.rank();
  Type out{ta.dtype, Cat(Batch(ta), {Rows(ta), Cols(g.type(b))})};
  return ir::DotGeneralHighest(g, a, b, batch, batch, {r - 1}, {r - 2}, out);
}
// Keeps x[i][j] where j - i <= k (lower) or j - i >= k (upper); zeros elsewhere.
Value Tri(Graph& g, Value x, bool lower, int64_t k = 0) {
  const Type& t = g.type(x);
  Value d = Sub(g, Idx(g, t.dims, t.rank() - 1), Idx(g, t.dims, t.rank() - 2));
  Value kk = Full(g, static_cast<double>(k), DType::kS64, t.dims);
  return Select(g, Compare(g, d, kk, lower ? "LE" : "GE"), x, Zeros(g, t));
}
Value EyeMask(Graph& g, const Dims& dims) {
  int64_t r = static_cast<int64_t>(dims.size());
  return Compare(g, Idx(g, dims, r - 2), Idx(g, dims, r - 1), "EQ");
}
Value Eye(Graph& g, DType t, const Dims& dims) {
  return Select(g, EyeMask(g, dims), Full(g, 1, t, dims), Full(g, 0, t, dims));
}
// The main diagonal of a square batch of matrices: [..., n].
Value Diag(Graph& g, Value x) {
  const Type& t = g.type(x);
  return Pick(g, x, EyeMask(g, t.dims), t.rank() - 1);
}
// Solves with a (or a^T; a^H for complex a, which is what every caller's transpose means).
Value TriSolve(Graph& g, Value a, Value b, bool left, bool lower, bool unit, bool transpose) {
  auto flag = [](bool v) { return v ? std::string("true") : std::string("false"); };
  const char* op = !transpose                       ? "NO_TRANSPOSE"
                   : rt::IsComplex(g.type(a).dtype) ? "ADJOINT"
                                                    : "TRANSPOSE";
  return g.Op1("stablehlo.triangular_solve", {a, b}, g.type(b),
               "left_side = " + flag(left) + ", lower = " + flag(lower) + ", unit_diagonal = " +
                   flag(unit) + ", transpose_a = #stablehlo<transpose " + op + ">");
}
// x (a batch of matrices) broadcast to `batch` leading dims.
Value ToBatch(Graph& g, Value x, const Dims& batch) {
  const Type& t = g.type(x);
  return ir::BroadcastTo(g, x, Cat(batch, {Rows(t), Cols(t)}));
}
std::vector<Value> AllZeros(Ctx& c) {
  std::vector<Value> r;
  for (const Type& t : c.out) r.push_back(Zeros(c.g, t));
  return r;
}
bool AnyEmpty(const std::vector<Type>& ts) {
  return std::any_of(ts.begin(), ts.end(), [](const Type& t) { return t.numel() == 0; });
}

// ---- Cholesky --------------------------------------------------------------------------------

// LAPACK's potrf info for lower-triangle input x: the 1-based order of the first leading minor
// that is not positive definite, else 0. XLA NaN-fills a failed factor, so this reruns an
// unblocked Cholesky, for `limit` (0 or n) steps: nothing is done when every matrix succeeded.
Value CholeskyInfo(Graph& g, Value x, Value limit) {
  const Type t = g.type(x);
  const int64_t r = t.rank();
  const Dims batch = Batch(t), cdims = Cat(batch, {Rows(t)});
  Value low = Tri(g, x, true);
  Value sym = Add(g, low, Mt(g, Tri(g, x, true, -1)));
  V init{sym, Full(g, 0, DType::kS64, batch)};
  return ForUpTo(g, 0, limit, init, [&](Graph& h, Value j, V& st) {
    Value a = st[0], info = st[1];
    auto at = [&](const Dims& d) { return BroadcastInDim(h, j, d, {}); };
    Value rows = Idx(h, t.dims, r - 2), cols = Idx(h, t.dims, r - 1), ri = Idx(h, cdims, r - 2);
    Value col = Pick(h, a, Compare(h, cols, at(t.dims), "EQ"), r - 1);
    Value d = Pick(h, col, Compare(h, ri, at(cdims), "EQ"), r - 2);
    Value zero = Full(h, 0, DType::kS64, batch);
    Value ok =
        And(h, Compare(h, d, Full(h, 0, t.dtype, batch), "GT"), Compare(h, info, zero, "EQ"));
    Value fail = And(h, ir::Unary(h, "stablehlo.not", ok), Compare(h, info, zero, "EQ"));
    info = Select(h, fail, Add(h, at(batch), Full(h, 1, DType::kS64, batch)), info);
    Value l = Div(h, col, Insert(h, ir::Unary(h, "stablehlo.sqrt", d), cdims, r - 2));
    l = Select(h, Compare(h, ri, at(cdims), "GT"), l, Full(h, 0, t.dtype, cdims));
    Value upd = Mul(h, Insert(h, l, t.dims, r - 1), Insert(h, l, t.dims, r - 2));
    Value trailing = And(h, Compare(h, rows, at(t.dims), "GT"), Compare(h, cols, at(t.dims), "GT"));
    a = Select(h, And(h, trailing, Lead(h, ok, t.dims)), Sub(h, a, upd), a);
    return V{a, info};
  })[1];
}

// L (or U = L^T) of a batch of SPD matrices, and LAPACK's info.
std::pair<Value, Value> Cholesky(Graph& g, Value a, bool upper, const Type& info_t) {
  const Type& t = g.type(a);
  if (t.numel() == 0) return {a, Zeros(g, info_t)};
  // potrf with uplo 'U' reads the upper triangle, i.e. the lower triangle of A^T.
  Value x = upper ? Mt(g, a) : a;
  Value l = Tri(g, g.Op1("stablehlo.cholesky", {x}, t, "lower = true"), true);
  // Any diagonal entry not > 0 (NaN included) means some factorization failed.
  Value d = Diag(g, l);
  const Dims& dd = g.type(d).dims;
  Value ok = Compare(g, d, Full(g, 0, t.dtype, dd), "GT");
  Dims all(dd.size());
  std::iota(all.begin(), all.end(), 0);
  Value all_ok = ir::Reduce(g, ok, Constant(g, 1, DType::kPred), all, "stablehlo.and");
  Value limit = Select(g, all_ok, Constant(g, 0, DType::kS64),
                       Constant(g, static_cast<double>(Rows(t)), DType::kS64));
  Value info = CholeskyInfo(g, x, limit);
  return {upper ? Mt(g, l) : l, ir::Convert(g, info, info_t.dtype)};
}

// Solves (L L^T) X = B, or (U^T U) X = B when upper; f and b share batch dims.
Value CholeskySolve(Graph& g, Value f, Value b, bool upper) {
  Value y = TriSolve(g, f, b, true, !upper, false, upper);
  return TriSolve(g, f, y, true, !upper, false, !upper);
}

std::vector<Value> CholeskyEx(Ctx& c) {
  auto [l, info] =
      Cholesky(c.g, Cast(c, c.In("self"), c.out[0].dtype), c.Bool("upper", false), c.out[1]);
  return {l, info};
}

std::vector<Value> CholeskyLegacy(Ctx& c) {
  Type info{DType::kS32, Batch(c.out[0])};
  return {Cholesky(c.g, Cast(c, c.In("self"), c.out[0].dtype), c.Bool("upper", false), info).first};
}

std::vector<Value> CholeskySolveHelper(Ctx& c) {
  if (AnyEmpty(c.out)) return AllZeros(c);
  Dims batch = Batch(c.out[0]);
  Value b = Cast(c, c.In("self"), c.out[0].dtype, c.out[0].dims);
  Value f = ToBatch(c.g, Cast(c, c.In("A"), c.out[0].dtype), batch);
  return {CholeskySolve(c.g, f, b, c.Bool("upper", false))};
}

std::vector<Value> CholeskyInverse(Ctx& c) {
  if (AnyEmpty(c.out)) return AllZeros(c);
  Value f = Cast(c, c.In("self"), c.out[0].dtype, c.out[0].dims);
  return {CholeskySolve(c.g, f, Eye(c.g, c.out[0].dtype, c.out[0].dims), c.Bool("upper", false))};
}

// ---- Triangular solves -----------------------------------------------------------------------

std::vector<Value> TriangularSolve(Ctx& c) {
  // Solves A X = B (or A^T X = B); also returns A broadcast to the batch ("cloned_coefficient").
  Value a = Cast(c, c.In("A"), c.out[1].dtype, c.out[1].dims);
  if (AnyEmpty(c.out)) return {Zeros(c.g, c.out[0]), a};
  Value b = Cast(c, c.In("self"), c.out[0].dtype, c.out[0].dims);
  // Its transpose is a plain one (LAPACK's 'T') for complex A too: A^T = conj(A)^H.
  const bool transpose = c.Bool("transpose", false);
  return {TriSolve(c.g, transpose ? ir::Conj(c.g, a) : a, b, true, !c.Bool("upper", true),
                   c.Bool("unitriangular", false), transpose),
          a};
}

std::vector<Value> SolveTriangular(Ctx& c) {
  if (AnyEmpty(c.out)) return AllZeros(c);
  Value b = Cast(c, c.In("B"), c.out[0].dtype, c.out[0].dims);
  Value a = ToBatch(c.g, Cast(c, c.In("self"), c.out[0].dtype), Batch(c.out[0]));
  return {TriSolve(c.g, a, b, c.Bool("left", true), !c.Bool("upper", false),
                   c.Bool("unitriangular", false), false)};
}

// ---- LU --------------------------------------------------------------------------------------

struct LuResult {
  Value lu, piv, info;  // piv and info are s32 like LAPACK's ipiv/info (pivots 1-based)
};

// One getf2 column step j on the carried (a, piv, info).
std::vector<Value> LuStep(Graph& g, Value j, const std::vector<Value>& s, bool pivot) {
  Value a = s[0], piv = s[1], info = s[2];
  const Type t = g.type(a);
  const int64_t r = t.rank(), m = Rows(t), k = g.type(piv).dims.back();
  const Dims& dims = t.dims;
  const Dims batch = Batch(t), cdims = Cat(batch, {m}), rdims = Cat(batch, {Cols(t)});
  const Dims kdims = Cat(batch, {k});
  auto at = [&](const Dims& d) { return BroadcastInDim(g, j, d, {}); };
  Value rows = Idx(g, dims, r - 2), cols = Idx(g, dims, r - 1);
  Value ri = Idx(g, cdims, r - 2), ci = Idx(g, rdims, r - 2);
  Value is_col = Compare(g, cols, at(dims), "EQ");
  Value col = Pick(g, a, is_col, r - 1);
  Value p = at(batch);
  if (pivot) {
    // The first row of largest |a[i][j]|, i >= j (LAPACK's i?amax, which takes |re| + |im| of
    // complex entries).
    Value mag = rt::IsComplex(t.dtype) ? Add(g, ir::Unary(g, "stablehlo.abs", ir::Real(g, col)),
                                             ir::Unary(g, "stablehlo.abs", ir::Imag(g, col)))
                                       : ir::Unary(g, "stablehlo.abs", col);
    const DType real = g.type(mag).dtype;
    Value cand = Select(g, Compare(g, ri, at(cdims), "GE"), mag, Full(g, -1, real, cdims));
    Value mx = ir::Reduce(g, cand, Constant(g, -1, real), {r - 2}, "stablehlo.maximum");
    Value hit = Compare(g, cand, Insert(g, mx, cdims, r - 2), "EQ");
    Value first = ir::Reduce(g, Select(g, hit, ri, Full(g, m, DType::kS64, cdims)),
                             Constant(g, m, DType::kS64), {r - 2}, "stablehlo.minimum");
    p = Select(g, Compare(g, first, Full(g, m, DType::kS64, batch), "EQ"), p, first);  // NaNs
  }
  Value pm = Lead(g, p, dims);
  Value is_j = Compare(g, rows, at(dims), "EQ"), is_p = Compare(g, rows, pm, "EQ");
  Value row_j = Pick(g, a, is_j, r - 2), row_p = Pick(g, a, is_p, r - 2);
  a = Select(g, is_j, Insert(g, row_p, dims, r - 2),
             Select(g, is_p, Insert(g, row_j, dims, r - 2), a));
  Value p1 = ir::Convert(g, Add(g, p, Full(g, 1, DType::kS64, batch)), DType::kS32);
  piv = Select(g, Compare(g, Idx(g, kdims, r - 2), at(kdims), "EQ"), Lead(g, p1, kdims), piv);
  Value d = Pick(g, row_p, Compare(g, ci, at(rdims), "EQ"), r - 2);
  Value dz = Compare(g, d, Full(g, 0, t.dtype, batch), "EQ");
  Value j1 = ir::Convert(g, Add(g, j, Constant(g, 1, DType::kS64)), DType::kS32);
  info = Select(g, And(g, dz, Compare(g, info, Full(g, 0, DType::kS32, batch), "EQ")),
                BroadcastInDim(g, j1, batch, {}), info);
  // getf2 scales by the reciprocal of the pivot, then does the rank-1 trailing update.
  Value one = Full(g, 1, t.dtype, batch);
  Value scale = Select(g, dz, one, Div(g, one, d));
  col = Pick(g, a, is_col, r - 1);
  Value below = Compare(g, ri, at(cdims), "GT");
  Value l = Select(g, below, Mul(g, col, Insert(g, scale, cdims, r - 2)), Zeros(g, g.type(col)));
  Value u = Select(g, Compare(g, ci, at(rdims), "GT"), row_p, Zeros(g, g.type(row_p)));
  Value lb = Insert(g, l, dims, r - 1);
  Value upd = Mul(g, lb, Insert(g, u, dims, r - 2));
  a = Select(g, And(g, Compare(g, rows, at(dims), "GT"), is_col), lb, Sub(g, a, upd));
  return {a, piv, info};
}

LuResult Lu(Graph& g, Value a, bool pivot) {
  const Type t = g.type(a);
  const Dims batch = Batch(t);
  int64_t k = std::min(Rows(t), Cols(t));
  Value piv = Full(g, 0, DType::kS32, Cat(batch, {k}));
  Value info = Full(g, 0, DType::kS32, batch);
  if (t.numel() == 0) return {a, piv, info};
  auto out = For(g, 0, k, 1, {a, piv, info},
                 [&](Graph& r, Value j, std::vector<Value>& s) { return LuStep(r, j, s, pivot); });
  return {out[0], out[1], out[2]};
}

// perm (s64 [..., m]) with (P^T A)[i] = A[perm[i]], from LAPACK's sequential row swaps.
Value PermFromPivots(Graph& g, Value piv, int64_t m) {
  const Type& pt = g.type(piv);
  const Dims batch(pt.dims.begin(), pt.dims.end() - 1);
  const int64_t k = pt.dims.back(), r = pt.rank();
  const Dims mdims = Cat(batch, {m});
  Value perm = Idx(g, mdims, r - 1);
  if (k == 0 || pt.numel() == 0) return perm;
  return For(g, 0, k, 1, {perm, piv}, [&](Graph& h, Value i, std::vector<Value>& s) {
    Value perm = s[0], piv = s[1];
    auto at = [&](const Dims& d) { return BroadcastInDim(h, i, d, {}); };
    const Dims& kd = h.type(piv).dims;
    Value p = Pick(h, ir::Convert(h, piv, DType::kS64), Compare(h, Idx(h, kd, r - 1), at(kd), "EQ"),
                   r - 1);
    p = Sub(h, p, Full(h, 1, DType::kS64, batch));
    Value mi = Idx(h, mdims, r - 1);
    Value is_i = Compare(h, mi, at(mdims), "EQ"), is_p = Compare(h, mi, Lead(h, p, mdims), "EQ");
    Value vi = Pick(h, perm, is_i, r - 1), vp = Pick(h, perm, is_p, r - 1);
    perm = Select(h, is_i, Lead(h, vp, mdims), Select(h, is_p, Lead(h, vi, mdims), perm));
    return std::vector<Value>{perm, piv};
  })[0];
}

// P with A = P L U: P[perm[c]][c] = 1.
Value PermMatrix(Graph& g, Value perm, DType t) {
  Dims dims = g.type(perm).dims;
  dims.push_back(dims.back());
  int64_t r = static_cast<int64_t>(dims.size());
  Value hit = Compare(g, Idx(g, dims, r - 2), Insert(g, perm, dims, r - 2), "EQ");
  return Select(g, hit, Full(g, 1, t, dims), Full(g, 0, t, dims));
}

// Solves A X = B (or A^T X = B) from A's LU factors; lu, p and b share batch dims.
Value LuSolve(Graph& g, Value lu, Value p, Value b, bool adjoint) {
  if (!adjoint) {
    Value y = MatMul(g, Mt(g, p), b);
    y = TriSolve(g, lu, y, true, true, true, false);
    return TriSolve(g, lu, y, true, false, false, false);
  }
  Value y = TriSolve(g, lu, b, true, false, false, true);
  y = TriSolve(g, lu, y, true, true, true, true);
  return MatMul(g, p, y);
}

// X with A X = B (left) or X A = B (right, solved as A^H X^H = B^H); B already has X's dims.
Value LuSolveSide(Graph& g, Value lu, Value piv, Value b, bool left, bool adjoint) {
  const Dims batch = Batch(g.type(b));
  Value p = PermMatrix(g, PermFromPivots(g, piv, Rows(g.type(lu))), g.type(lu).dtype);
  lu = ToBatch(g, lu, batch);
  p = ToBatch(g, p, batch);
  if (left) return LuSolve(g, lu, p, b, adjoint);
  return Mh(g, LuSolve(g, lu, p, Mh(g, b), !adjoint));
}

std::vector<Value> LuFactorEx(Ctx& c) {
  LuResult f = Lu(c.g, Cast(c, c.In("A"), c.out[0].dtype), c.Bool("pivot", true));
  return {f.lu, ir::Convert(c.g, f.piv, c.out[1].dtype), ir::Convert(c.g, f.info, c.out[2].dtype)};
}

// P, L, U from packed LU factors (LU is [..., m, n]; L is m x k, U is k x n).
std::vector<Value> Unpack(Ctx& c, Value lu, Value piv, bool data, bool pivots) {
  Graph& g = c.g;
  const Type& t = g.type(lu);
  const int64_t m = Rows(t), n = Cols(t), k = std::min(m, n);
  const Dims batch = Batch(t);
  std::vector<Value> res = AllZeros(c);
  if (pivots && c.out[0].numel() > 0) {
    res[0] = PermMatrix(g, PermFromPivots(g, piv, m), c.out[0].dtype);
  }
  if (data && c.out[1].numel() > 0) {
    Value lk = ir::Slice(g, lu, Cat(Dims(batch.size(), 0), {0, 0}), Cat(batch, {m, k}));
    res[1] = Add(g, Tri(g, lk, true, -1), Eye(g, t.dtype, g.type(lk).dims));
  }
  if (data && c.out[2].numel() > 0) {
    res[2] =
        Tri(g, ir::Slice(g, lu, Cat(Dims(batch.size(), 0), {0, 0}), Cat(batch, {k, n})), false);
  }
  return res;
}

std::vector<Value> LinalgLu(Ctx& c) {
  bool pivot = c.Bool("pivot", true);
  LuResult f = Lu(c.g, Cast(c, c.In("A"), c.out[1].dtype), pivot);
  return Unpack(c, f.lu, f.piv, true, pivot);
}

std::vector<Value> LuUnpack(Ctx& c) {
  Value lu = c.In("LU_data");
  Value piv = ir::Convert(c.g, c.In("LU_pivots"), DType::kS32);
  return Unpack(c, lu, piv, c.Bool("unpack_data", true), c.Bool("unpack_pivots", true));
}

std::vector<Value> LinalgLuSolve(Ctx& c) {
  if (AnyEmpty(c.out)) return AllZeros(c);
  Value lu = Cast(c, c.In("LU"), c.out[0].dtype);
  Value b = Cast(c, c.In("B"), c.out[0].dtype, c.out[0].dims);
  return {LuSolveSide(c.g, lu, c.In("pivots"), b, c.Bool("left", true), c.Bool("adjoint", false))};
}

std::vector<Value> SolveEx(Ctx& c) {
  Graph& g = c.g;
  Value a = Cast(c, c.In("A"), c.out[1].dtype);
  Value b = c.In("B");
  LuResult f = Lu(g, a, true);
  std::vector<Value> res{Zeros(g, c.out[0]), f.lu, ir::Convert(g, f.piv, c.out[2].dtype),
                         ir::Convert(g, f.info, c.out[3].dtype)};
  if (c.out[0].numel() == 0) return res;
  // PyTorch's vector case: B is [..., n] when it is 1-D or A's shape minus the last dim.
  const Type& at = g.type(a);
  const Dims& bd = g.type(b).dims;
  bool left = c.Bool("left", true);
  bool vec = bd.size() == 1 ||
             (bd.size() + 1 == at.dims.size() && std::equal(bd.begin(), bd.end(), at.dims.begin()));
  Dims xd = c.out[0].dims;
  b = Cast(c, b, c.out[0].dtype);
  if (vec) {
    // Solved as a one-column (left) or one-row (right) matrix.
    Dims bb = bd;
    bb.insert(bb.end() - (left ? 0 : 1), 1);
    xd.insert(xd.end() - (left ? 0 : 1), 1);
    b = ir::Reshape(g, b, bb);
  }
  b = ir::BroadcastTo(g, b, xd);
  res[0] = ir::Reshape(g, LuSolveSide(g, f.lu, f.piv, b, left, false), c.out[0].dims);
  return res;
}

std::vector<Value> InvEx(Ctx& c) {
  Value a = Cast(c, c.In("A"), c.out[0].dtype);
  LuResult f = Lu(c.g, a, true);
  Value info = ir::Convert(c.g, f.info, c.out[1].dtype);
  if (c.out[0].numel() == 0) return {Zeros(c.g, c.out[0]), info};
  Value eye = Eye(c.g, c.out[0].dtype, c.out[0].dims);
  return {LuSolveSide(c.g, f.lu, f.piv, eye, true, false), info};
}

// (-1)^(number of actual row swaps) for each matrix of the batch.
Value PermSign(Graph& g, Value piv, DType t) {
  const Type& pt = g.type(piv);
  Value pos = ir::Convert(
      g, Add(g, Idx(g, pt.dims, pt.rank() - 1), Full(g, 1, DType::kS64, pt.dims)), DType::kS32);
  Value swapped = Compare(g, piv, pos, "NE");
  Value f = Select(g, swapped, Full(g, -1, t, pt.dims), Full(g, 1, t, pt.dims));
  return ir::Reduce(g, f, Constant(g, 1, t), {pt.rank() - 1}, "stablehlo.multiply");
}

// The unit phase x / |x| of complex x (1 where x is 0), and |x| itself.
std::pair<Value, Value> Phase(Graph& g, Value x) {
  const Type t = g.type(x);
  Value mag = ir::Abs(g, x);
  Value zero = Compare(g, mag, Zeros(g, g.type(mag)), "EQ");
  Value unit = Div(g, x, ir::Complex(g, mag, Zeros(g, g.type(mag))));
  return {Select(g, zero, Full(g, 1, t.dtype, t.dims), unit), mag};
}

// x with its line i (a row for dim = rank - 2, a column for rank - 1) multiplied by f [batch].
Value ScaleLine(Graph& g, Value x, Value i, Value f, int64_t dim) {
  const Dims& d = g.type(x).dims;
  Value hit = Compare(g, Idx(g, d, dim), Lead(g, i, d), "EQ");
  return Select(g, hit, Mul(g, x, Lead(g, f, d)), x);
}

// PyTorch factors A^T when A is real and contiguous (det(A^T) = det(A)), else A, and its backward
// solves with that LU; rules see no strides, so a contiguous A is assumed.
LuResult LuForDet(Ctx& c, DType t) {
  Value a = Cast(c, c.In("A"), t);
  return Lu(c.g, rt::IsComplex(t) ? a : Mt(c.g, a), true);
}

std::vector<Value> Det(Ctx& c) {
  Graph& g = c.g;
  LuResult f = LuForDet(c, c.out[0].dtype);
  DType t = c.out[0].dtype;
  Value d = Diag(g, f.lu);
  Value prod = ir::Reduce(g, d, Constant(g, 1, t), {g.type(d).rank() - 1}, "stablehlo.multiply");
  return {Mul(g, prod, PermSign(g, f.piv, t)), f.lu, ir::Convert(g, f.piv, c.out[2].dtype)};
}

// Of complex A, the sign is the product of the pivots' phases: sign(det A) = det A / |det A|.
std::vector<Value> Slogdet(Ctx& c) {
  Graph& g = c.g;
  DType t = c.out[0].dtype, real = c.out[1].dtype;
  LuResult f = LuForDet(c, t);
  Value d = Diag(g, f.lu);
  int64_t last = g.type(d).rank() - 1;
  // stablehlo.sign of a complex pivot is its phase, d / |d| (0 for 0).
  Value sgn = ir::Reduce(g, ir::Unary(g, "stablehlo.sign", d), Constant(g, 1, t), {last},
                         "stablehlo.multiply");
  Value logabs = ir::Reduce(g, ir::Unary(g, "stablehlo.log", ir::Abs(g, d)), Constant(g, 0, real),
                            {last}, "stablehlo.add");
  return {Mul(g, sgn, PermSign(g, f.piv, t)), logabs, f.lu, ir::Convert(g, f.piv, c.out[3].dtype)};
}

// ---- Householder QR --------------------------------------------------------------------------

// geqr2: reflectors below the diagonal, R on and above it, and tau ([..., min(m, n)]).
std::pair<Value, Value> Geqrf(Graph& g, Value a) {
  const Type t = g.type(a);
  const Dims batch = Batch(t);
  const int64_t m = Rows(t), k = std::min(m, Cols(t));
  Value tau = Full(g, 0, t.dtype, Cat(batch, {k}));
  if (t.numel() == 0) return {a, tau};
  auto out = For(g, 0, k, 1, {a, tau}, [&](Graph& h, Value j, std::vector<Value>& s) {
    Value a = s[0], tau = s[1];
    const int64_t r = t.rank();
    const Dims &dims = t.dims, cdims = Cat(batch, {m}), rdims = Cat(batch, {Cols(t)});
    auto at = [&](const Dims& d) { return BroadcastInDim(h, j, d, {}); };
    auto zeros = [&](const Dims& d) { return Full(h, 0, t.dtype, d); };
    Value rows = Idx(h, dims, r - 2), cols = Idx(h, dims, r - 1), ri = Idx(h, cdims, r - 2);
    Value is_col = Compare(h, cols, at(dims), "EQ");
    Value x = Pick(h, a, is_col, r - 1);
    Value alpha = Pick(h, x, Compare(h, ri, at(cdims), "EQ"), r - 2);
    Value below = Compare(h, ri, at(cdims), "GT");
    Value tail = Select(h, below, x, zeros(cdims));
    const bool complex = rt::IsComplex(t.dtype);
    const DType real = complex ? rt::RealOf(t.dtype) : t.dtype;
    Value xnorm2 =
        ir::Reduce(h, ir::AbsSq(h, tail), Constant(h, 0, real), {r - 2}, "stablehlo.add");
    // dlarfg (zlarfg): beta = -sign(re alpha) * ||(alpha, x)||, tau = (beta - alpha) / beta,
    // v = x / (alpha - beta); no reflection when x's tail is zero (and alpha real).
    Value re = ir::Real(h, alpha), zr = Full(h, 0, real, batch);
    Value none = Compare(h, xnorm2, zr, "EQ");
    if (complex) none = And(h, none, Compare(h, ir::Imag(h, alpha), zr, "EQ"));
    Value norm = ir::Unary(h, "stablehlo.sqrt", Add(h, ir::AbsSq(h, alpha), xnorm2));
    Value beta = Select(h, Compare(h, re, zr, "GE"), ir::Unary(h, "stablehlo.negate", norm), norm);
    beta = ir::Convert(h, Select(h, none, re, beta), t.dtype);
    Value tj = Select(h, none, zeros(batch), Div(h, Sub(h, beta, alpha), beta));
    Value one = Full(h, 1, t.dtype, batch);
    Value scal = Select(h, none, one, Div(h, one, Sub(h, alpha, beta)));
    Value v = Mul(h, tail, Insert(h, scal, cdims, r - 2));
    Value v1 = Select(h, Compare(h, ri, at(cdims), "EQ"), Full(h, 1, t.dtype, cdims), v);
    // Apply H^H = I - conj(tau) v v^H to the columns right of j: A -= conj(tau) v (v^H A).
    Value vb = Insert(h, v1, dims, r - 1);
    Value w = ir::Reduce(h, Mul(h, ir::Conj(h, vb), a), Constant(h, 0, t.dtype), {r - 2},
                         "stablehlo.add");
    w = Select(h, Compare(h, Idx(h, rdims, r - 2), at(rdims), "GT"),
               Mul(h, w, Insert(h, ir::Conj(h, tj), rdims, r - 2)), zeros(rdims));
    a = Sub(h, a, Mul(h, vb, Insert(h, w, dims, r - 2)));
    Value is_jj = And(h, is_col, Compare(h, rows, at(dims), "EQ"));
    a = Select(h, is_jj, Lead(h, beta, dims),
               Select(h, And(h, is_col, Compare(h, rows, at(dims), "GT")), vb, a));
    const Dims kd = Cat(batch, {k});
    tau = Select(h, Compare(h, Idx(h, kd, r - 2), at(kd), "EQ"), Lead(h, tj, kd), tau);
    return std::vector<Value>{a, tau};
  });
  return {out[0], out[1]};
}

// org2r (ung2r): the first `ncols` columns of H_1 ... H_k (v_i below the diagonal of column i of
// v).
Value HouseholderProduct(Graph& g, Value v, Value tau, int64_t ncols) {
  const Type t = g.type(v);
  const Dims batch = Batch(t);
  const int64_t m = Rows(t), k = g.type(tau).dims.back(), r = t.rank();
  const Dims qdims = Cat(batch, {m, ncols});
  Value q = Eye(g, t.dtype, qdims);
  if (k == 0 || t.numel() == 0 || g.type(q).numel() == 0) return q;
  return For(g, k - 1, -1, -1, {q, v, tau}, [&](Graph& h, Value i, std::vector<Value>& s) {
    Value q = s[0], v = s[1], tau = s[2];
    const Dims cdims = Cat(batch, {m}), kd = Cat(batch, {k});
    auto at = [&](const Dims& d) { return BroadcastInDim(h, i, d, {}); };
    Value col = Pick(h, v, Compare(h, Idx(h, t.dims, r - 1), at(t.dims), "EQ"), r - 1);
    Value ri = Idx(h, cdims, r - 2);
    Value vi = Select(h, Compare(h, ri, at(cdims), "GT"), col, Full(h, 0, t.dtype, cdims));
    vi = Select(h, Compare(h, ri, at(cdims), "EQ"), Full(h, 1, t.dtype, cdims), vi);
    Value ti = Pick(h, tau, Compare(h, Idx(h, kd, r - 2), at(kd), "EQ"), r - 2);
    Value vb = Insert(h, vi, qdims, r - 1);
    // q -= tau v (v^H q)
    Value w = ir::Reduce(h, Mul(h, ir::Conj(h, vb), q), Constant(h, 0, t.dtype), {r - 2},
                         "stablehlo.add");
    const Dims wd = Cat(batch, {ncols});
    w = Mul(h, w, Insert(h, ti, wd, r - 2));
    q = Sub(h, q, Mul(h, vb, Insert(h, w, qdims, r - 2)));
    return std::vector<Value>{q, v, tau};
  })[0];
}

std::vector<Value> GeqrfRule(Ctx& c) {
  auto [a, tau] = Geqrf(c.g, Cast(c, c.In("self"), c.out[0].dtype));
  return {a, tau};
}

std::vector<Value> LinalgQr(Ctx& c) {
  Graph& g = c.g;
  auto [a, tau] = Geqrf(g, Cast(c, c.In("A"), c.out[1].dtype));
  const Type& t = g.type(a);
  const Dims batch = Batch(t);
  std::vector<Value> res = AllZeros(c);
  if (c.out[1].numel() > 0) {
    int64_t rr = Rows(c.out[1]);
    if (rr <= Rows(t)) {
      res[1] = Tri(g, ir::Slice(g, a, Dims(t.rank(), 0), Cat(batch, {rr, Cols(t)})), false);
    }
  }
  if (c.out[0].numel() > 0) res[0] = HouseholderProduct(g, a, tau, Cols(c.out[0]));
  return res;
}

std::vector<Value> LinalgHouseholderProduct(Ctx& c) {
  if (AnyEmpty(c.out)) return AllZeros(c);
  Value v = Cast(c, c.In("input"), c.out[0].dtype);
  Value tau = Cast(c, c.In("tau"), c.out[0].dtype);
  return {HouseholderProduct(c.g, v, tau, Cols(c.out[0]))};
}

std::vector<Value> Ormqr(Ctx& c) {
  // Q C, Q^H C, C Q or C Q^H with the full square Q of the reflectors in `self`.
  if (AnyEmpty(c.out)) return AllZeros(c);
  Graph& g = c.g;
  DType dt = c.out[0].dtype;
  Value v = Cast(c, c.In("self"), dt);
  Value q = HouseholderProduct(g, v, Cast(c, c.In("input2"), dt), Rows(g.type(v)));
  q = ToBatch(g, q, Batch(c.out[0]));
  if (c.Bool("transpose", false)) q = Mh(g, q);
  Value other = Cast(c, c.In("input3"), dt, c.out[0].dims);
  return {c.Bool("left", true) ? MatMul(g, q, other) : MatMul(g, other, q)};
}

// ---- Symmetric eigendecomposition -----------------------------------------------------------

// Ascending sort of w ([..., n]) along its last dim, with the s64 permutation.
std::pair<Value, Value> SortLast(Graph& g, Value w, bool descending) {
  const Type& t = g.type(w);
  Value iota = Idx(g, t.dims, t.rank() - 1);
  auto cmp = std::make_shared<Graph>();
  Value a = cmp->Param(Type{t.dtype, {}}), b = cmp->Param(Type{t.dtype, {}});
  cmp->Param(Type{DType::kS64, {}});
  cmp->Param(Type{DType::kS64, {}});
  cmp->results = {Compare(*cmp, a, b, descending ? "GT" : "LT")};
  auto r = g.Op("stablehlo.sort", {w, iota}, {t, g.type(iota)},
                "dimension = " + std::to_string(t.rank() - 1) + " : i64, is_stable = true", {cmp});
  return {r[0], r[1]};
}

// (c, s) of the Jacobi rotation J = [[c, s], [-s, c]] that zeroes apq in J^T [[app, apq],
// [apq, aqq]] J (Numerical Recipes' jacobi); c = 1, s = 0 when apq is already 0.
std::pair<Value, Value> JacobiCs(Graph& h, Value app, Value aqq, Value apq) {
  const Type t = h.type(app);
  auto full = [&](double x) { return Full(h, x, t.dtype, t.dims); };
  Value theta = Div(h, Sub(h, aqq, app), Mul(h, full(2), apq));
  Value sgn = Select(h, Compare(h, theta, full(0), "GE"), full(1), full(-1));
  Value root = ir::Unary(h, "stablehlo.sqrt", Add(h, Mul(h, theta, theta), full(1)));
  Value tn = Div(h, sgn, Add(h, ir::Unary(h, "stablehlo.abs", theta), root));
  tn = Select(h, Compare(h, apq, full(0), "EQ"), full(0), tn);
  Value cs = Div(h, full(1), ir::Unary(h, "stablehlo.sqrt", Add(h, Mul(h, tn, tn), full(1))));
  return {cs, Mul(h, tn, cs)};
}

// Row (dim = rank - 2) or column (dim = rank - 1) i of x, as [..., len].
Value Line(Graph& h, Value x, Value i, int64_t dim) {
  const Type& t = h.type(x);
  return Pick(h, x, Compare(h, Idx(h, t.dims, dim), Lead(h, i, t.dims), "EQ"), dim);
}

// x with its lines p, q (rows: x <- J^T x, columns: x <- x J) rotated by (c, s).
Value RotateLines(Graph& h, Value x, Value p, Value q, Value c, Value s, int64_t dim) {
  const Type t = h.type(x);
  Value xp = Line(h, x, p, dim), xq = Line(h, x, q, dim);
  const Dims& ld = h.type(xp).dims;
  Value cb = Lead(h, c, ld), sb = Lead(h, s, ld);
  Value np = Sub(h, Mul(h, cb, xp), Mul(h, sb, xq)), nq = Add(h, Mul(h, sb, xp), Mul(h, cb, xq));
  Value idx = Idx(h, t.dims, dim);
  return Select(
      h, Compare(h, idx, Lead(h, p, t.dims), "EQ"), Insert(h, np, t.dims, dim),
      Select(h, Compare(h, idx, Lead(h, q, t.dims), "EQ"), Insert(h, nq, t.dims, dim), x));
}

// Runs step(h, a, v, p, q) -> {a, v} over the cyclic pairs p < q < n while more(h, a) holds, for
// at most 30 sweeps.
template <typename More, typename Step>
std::pair<Value, Value> Sweeps(Graph& g, Value a, Value v, int64_t n, More more, Step step) {
  Dims ps, qs;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t q = p + 1; q < n; ++q) {
      ps.push_back(p);
      qs.push_back(q);
    }
  }
  const int64_t pairs = static_cast<int64_t>(ps.size());
  if (pairs == 0 || g.type(a).numel() == 0) return {a, v};
  const Dims batch = Batch(g.type(a));
  auto cond = [&](Graph& h, Value j, const V& st) {
    Value left = Compare(h, j, Constant(h, 30.0 * pairs, DType::kS64), "LT");
    return And(h, more(h, st[0]), left);
  };
  auto body = [&](Graph& h, Value j, V& st) {
    Value k = ir::Binary(h, "stablehlo.remainder", j, Constant(h, pairs, DType::kS64));
    Value hit = Compare(h, Idx(h, {pairs}, 0), BroadcastInDim(h, k, {pairs}, {}), "EQ");
    Value p = Lead(h, Pick(h, ir::ConstantI64(h, ps), hit, 0), batch);
    Value q = Lead(h, Pick(h, ir::ConstantI64(h, qs), hit, 0), batch);
    auto [a2, v2] = step(h, st[0], st[1], p, q);
    return V{a2, v2};
  };
  V out = detail::Counted(g, 0, 1, {a, v}, cond, body);
  return {out[0], out[1]};
}

double Eps(DType t) { return t == DType::kF64 || t == DType::kC128 ? 2.2e-16 : 1.2e-7; }

// Eigenvalues (ascending) and eigenvectors of symmetric (Hermitian) matrices by cyclic Jacobi
// sweeps, until the off-diagonal mass is below eps of the total.
std::pair<Value, Value> Eigh(Graph& g, Value x, bool lower) {
  const Type t = g.type(x);
  const int64_t r = t.rank();
  const bool complex = rt::IsComplex(t.dtype);
  const DType real = complex ? rt::RealOf(t.dtype) : t.dtype;
  Value sym = lower ? Add(g, Tri(g, x, true), Mh(g, Tri(g, x, true, -1)))
                    : Add(g, Tri(g, x, false), Mh(g, Tri(g, x, false, 1)));
  if (complex) {  // LAPACK reads only the real part of a Hermitian diagonal
    Value re = ir::Complex(g, ir::Real(g, sym), Constant(g, 0, real, t.dims));
    sym = Select(g, EyeMask(g, t.dims), re, sym);
  }
  auto more = [&](Graph& h, Value a) {
    Value sq = ir::AbsSq(h, a);
    Value total = ir::Reduce(h, sq, Constant(h, 0, real), AllDims(r), "stablehlo.add");
    Value off = ir::Reduce(h, Select(h, EyeMask(h, t.dims), Constant(h, 0, real, t.dims), sq),
                           Constant(h, 0, real), AllDims(r), "stablehlo.add");
    double e = Eps(t.dtype);
    return Compare(h, off, Mul(h, total, Constant(h, e * e, real)), "GT");
  };
  auto step = [&](Graph& h, Value a, Value v, Value p, Value q) {
    Value row_p = Line(h, a, p, r - 2), row_q = Line(h, a, q, r - 2);
    const Dims& ld = h.type(row_p).dims;
    Value ri = Idx(h, ld, r - 2);
    Value app = Pick(h, row_p, Compare(h, ri, Lead(h, p, ld), "EQ"), r - 2);
    Value aqq = Pick(h, row_q, Compare(h, ri, Lead(h, q, ld), "EQ"), r - 2);
    Value apq = Pick(h, row_p, Compare(h, ri, Lead(h, q, ld), "EQ"), r - 2);
    if (complex) {
      // The unitary diag(1, conj(u)), u the phase of a_pq, makes the (p, q) coupling real: the
      // real rotation then finishes the step.
      auto [u, mag] = Phase(h, apq);
      a = ScaleLine(h, ScaleLine(h, a, q, u, r - 2), q, ir::Conj(h, u), r - 1);
      v = ScaleLine(h, v, q, ir::Conj(h, u), r - 1);
      app = ir::Real(h, app), aqq = ir::Real(h, aqq), apq = mag;
    }
    auto [cs, sn] = JacobiCs(h, app, aqq, apq);
    cs = ir::Convert(h, cs, t.dtype), sn = ir::Convert(h, sn, t.dtype);
    a = RotateLines(h, RotateLines(h, a, p, q, cs, sn, r - 2), p, q, cs, sn, r - 1);
    // The rotated (p, q) entries are zero by construction.
    Value rows = Idx(h, t.dims, r - 2), cols = Idx(h, t.dims, r - 1);
    Value pp = Lead(h, p, t.dims), qq = Lead(h, q, t.dims);
    Value off = ir::Binary(h, "stablehlo.or",
                           And(h, Compare(h, rows, pp, "EQ"), Compare(h, cols, qq, "EQ")),
                           And(h, Compare(h, rows, qq, "EQ"), Compare(h, cols, pp, "EQ")));
    a = Select(h, off, Zeros(h, t), a);
    return std::pair{a, RotateLines(h, v, p, q, cs, sn, r - 1)};
  };
  auto [d, v] = Sweeps(g, sym, Eye(g, t.dtype, t.dims), Rows(t), more, step);
  auto [w, idx] = SortLast(g, ir::Real(g, Diag(g, d)), false);
  return {w, MatMul(g, v, PermMatrix(g, idx, t.dtype))};
}

// Thin SVD of tall matrices (m >= n) by one-sided (Hestenes) Jacobi: columns of a are rotated
// until pairwise orthogonal; returns U (m x n), S (descending, real), V (n x n).
std::tuple<Value, Value, Value> SvdTall(Graph& g, Value x) {
  const Type t = g.type(x);
  const int64_t r = t.rank(), n = Cols(t);
  const bool complex = rt::IsComplex(t.dtype);
  const DType real = complex ? rt::RealOf(t.dtype) : t.dtype;
  const Dims batch = Batch(t);
  Dims bi(batch.size());
  std::iota(bi.begin(), bi.end(), 0);
  const Type gram{t.dtype, Cat(batch, {n, n})};
  auto more = [&](Graph& h, Value a) {
    // Any pair with |a_p^H a_q| > eps ||a_p|| ||a_q|| is not yet orthogonal.
    Value gm = ir::DotGeneralHighest(h, ir::Conj(h, a), a, bi, bi, {r - 2}, {r - 2}, gram);
    Value d = ir::Real(h, Diag(h, gm));
    const Dims& gd = gram.dims;
    Value den = Mul(h, Insert(h, d, gd, r - 1), Insert(h, d, gd, r - 2));
    double e = Eps(t.dtype);
    Value bad = Compare(h, ir::AbsSq(h, gm), Mul(h, den, Full(h, e * e, real, gd)), "GT");
    bad = And(h, bad, ir::Unary(h, "stablehlo.not", EyeMask(h, gd)));
    return ir::Reduce(h, bad, Constant(h, 0, DType::kPred), AllDims(r), "stablehlo.or");
  };
  auto step = [&](Graph& h, Value a, Value v, Value p, Value q) {
    Value ap = Line(h, a, p, r - 1), aq = Line(h, a, q, r - 1);
    auto sum = [&](Value u) {
      DType dt = h.type(u).dtype;
      return ir::Reduce(h, u, Constant(h, 0, dt), {r - 2}, "stablehlo.add");
    };
    Value apq = sum(Mul(h, ir::Conj(h, ap), aq));
    if (complex) {  // column q times conj(u) makes a_p^H a_q real, as in Eigh
      auto [u, mag] = Phase(h, apq);
      a = ScaleLine(h, a, q, ir::Conj(h, u), r - 1);
      v = ScaleLine(h, v, q, ir::Conj(h, u), r - 1);
      apq = mag;
    }
    auto [cs, sn] = JacobiCs(h, sum(ir::AbsSq(h, ap)), sum(ir::AbsSq(h, aq)), apq);
    cs = ir::Convert(h, cs, t.dtype), sn = ir::Convert(h, sn, t.dtype);
    return std::pair{RotateLines(h, a, p, q, cs, sn, r - 1),
                     RotateLines(h, v, p, q, cs, sn, r - 1)};
  };
  auto [a, v] = Sweeps(g, x, Eye(g, t.dtype, gram.dims), n, more, step);
  Value norms =
      ir::Unary(g, "stablehlo.sqrt",
                ir::Reduce(g, ir::AbsSq(g, a), Constant(g, 0, real), {r - 2}, "stablehlo.add"));
  auto [s, idx] = SortLast(g, norms, true);
  Value perm = PermMatrix(g, idx, t.dtype);
  a = MatMul(g, a, perm);
  Value sb = ir::Convert(g, Insert(g, s, t.dims, r - 2), t.dtype);
  // A zero singular value leaves a zero column of U rather than NaN.
  Value u = Select(g, Compare(g, sb, Zeros(g, g.type(sb)), "EQ"), Zeros(g, t), Div(g, a, sb));
  return {u, s, MatMul(g, v, perm)};
}

// u (m x k, orthonormal columns) extended to an m x m orthogonal matrix with QR's complement.
Value Complete(Graph& g, Value u) {
  const Type t = g.type(u);
  const int64_t m = Rows(t), k = Cols(t);
  if (m == k) return u;
  auto [a, tau] = Geqrf(g, u);
  Value q = HouseholderProduct(g, a, tau, m);
  Dims lo(t.rank(), 0), hi = g.type(q).dims;
  lo.back() = k;
  return ir::Concat(g, {u, ir::Slice(g, q, lo, hi)}, t.rank() - 1);
}

std::vector<Value> LinalgSvd(Ctx& c) {
  Graph& g = c.g;
  if (c.out[1].numel() == 0) {
    // No singular values: full_matrices still asks for square identity factors.
    std::vector<Value> res = AllZeros(c);
    for (int i : {0, 2}) {
      if (c.out[i].numel() > 0) res[i] = Eye(g, c.out[i].dtype, c.out[i].dims);
    }
    return res;
  }
  Value a = Cast(c, c.In("A"), c.out[0].dtype);  // U has A's dtype, complex or real
  const Type& t = g.type(a);
  const bool wide = Rows(t) < Cols(t), full = c.Bool("full_matrices", true);
  auto [u, s, v] = SvdTall(g, wide ? Mh(g, a) : a);
  if (full) u = Complete(g, u);
  std::vector<Value> res = AllZeros(c);
  res[1] = s;
  if (c.out[0].numel() > 0) res[0] = wide ? v : u;
  if (c.out[2].numel() > 0) res[2] = Mh(g, wide ? u : v);
  return res;
}

std::vector<Value> LinalgEigh(Ctx& c) {
  if (c.out[0].numel() == 0) return AllZeros(c);
  Value a = Cast(c, c.In("A"), c.out[1].dtype);  // the eigenvectors have A's dtype
  auto [w, v] = Eigh(c.g, a, c.Str("UPLO", "L") != "U");
  return {w, c.out[1].numel() == 0 ? Zeros(c.g, c.out[1]) : v};
}

// ---- Symmetric indefinite (Bunch-Kaufman) factorization --------------------------------------

// Whether any matrix's own column k (s64 [batch]) compares `dir` to bound: a loop that moves
// each matrix on by its own step runs until none is left.
Value AnyColumnLeft(Graph& h, Value k, int64_t bound, const char* dir) {
  const Dims& batch = h.type(k).dims;
  Value open = Compare(h, k, Full(h, static_cast<double>(bound), DType::kS64, batch), dir);
  return ir::Reduce(h, open, Constant(h, 0, DType::kPred), AllDims(batch.size()), "stablehlo.or");
}

// One step of LAPACK's sytf2 (lower) at each matrix's own column k (s64 [batch]): the pivot
// choice with alpha = (1 + sqrt(17)) / 8, the interchange within the trailing block, and the
// rank-1 (1x1 pivot) or rank-2 (2x2 pivot) update, exactly as LAPACK orders them.
std::vector<Value> LdlStep(Graph& h, const std::vector<Value>& s) {
  Value k = s[0], a = s[1], piv = s[2], info = s[3];
  const Type t = h.type(a);
  const int64_t r = t.rank(), n = Rows(t);
  const Dims batch = Batch(t), vd = Cat(batch, {n});
  const DType dt = t.dtype;
  auto at = [&](Value v, const Dims& d) { return Lead(h, v, d); };
  auto full = [&](double v, const Dims& d) { return Full(h, v, dt, d); };
  auto idx = [&](double v) { return Full(h, v, DType::kS64, batch); };
  Value rows = Idx(h, t.dims, r - 2), cols = Idx(h, t.dims, r - 1), vi = Idx(h, vd, r - 2);
  auto col = [&](Value m, Value j) {
    return Pick(h, m, Compare(h, cols, at(j, t.dims), "EQ"), r - 1);
  };
  auto row = [&](Value m, Value i) {
    return Pick(h, m, Compare(h, rows, at(i, t.dims), "EQ"), r - 2);
  };
  auto elem = [&](Value v, Value i) { return Pick(h, v, Compare(h, vi, at(i, vd), "EQ"), r - 2); };
  auto abs = [&](Value v) { return ir::Unary(h, "stablehlo.abs", v); };
  // The largest |v[i]| over i where `in` holds, and the first i reaching it (n when none).
  auto argmax = [&](Value v, Value in) {
    Value cand = Select(h, in, abs(v), full(-1, vd));
    Value mx = ir::Reduce(h, cand, Constant(h, -1, dt), {r - 2}, "stablehlo.maximum");
    Value hit = Compare(h, cand, at(mx, vd), "EQ");
    Value first = ir::Reduce(h, Select(h, hit, vi, Full(h, n, DType::kS64, vd)),
                             Constant(h, n, DType::kS64), {r - 2}, "stablehlo.minimum");
    return std::pair{ir::Binary(h, "stablehlo.maximum", mx, full(0, batch)), first};
  };
  const double alpha = (1 + std::sqrt(17.0)) / 8;
  Value kv = at(k, vd);
  Value colk = col(a, k);
  Value absakk = abs(elem(colk, k));
  auto [colmax, imax] = argmax(colk, Compare(h, vi, kv, "GT"));
  imax = Select(h, Compare(h, imax, idx(n), "EQ"), k, imax);
  Value row_i = row(a, imax), col_i = col(a, imax);
  Value iv = at(imax, vd);
  Value before = And(h, Compare(h, vi, kv, "GE"), Compare(h, vi, iv, "LT"));
  Value rowmax = ir::Binary(h, "stablehlo.maximum", argmax(row_i, before).first,
                            argmax(col_i, Compare(h, vi, iv, "GT")).first);
  Value aimax = abs(elem(row_i, imax));
  Value zero = ir::Binary(
      h, "stablehlo.or",
      Compare(h, ir::Binary(h, "stablehlo.maximum", absakk, colmax), full(0, batch), "EQ"),
      Compare(h, absakk, absakk, "NE"));
  Value acol = Mul(h, full(alpha, batch), colmax);
  Value c1 = Compare(h, absakk, acol, "GE");
  Value c2 = Compare(h, absakk, Mul(h, acol, Div(h, colmax, rowmax)), "GE");
  Value c3 = Compare(h, aimax, Mul(h, full(alpha, batch), rowmax), "GE");
  Value keep = ir::Binary(h, "stablehlo.or", zero, ir::Binary(h, "stablehlo.or", c1, c2));
  Value kp = Select(h, keep, k, imax);
  Value two = And(h, ir::Unary(h, "stablehlo.not", keep), ir::Unary(h, "stablehlo.not", c3));
  Value kstep = Select(h, two, idx(2), idx(1));
  Value kk = Add(h, k, Sub(h, kstep, idx(1)));
  // The interchange of kk and kp within the trailing block (rows and columns >= k), on its
  // symmetric completion.
  Value kt = at(k, t.dims);
  Value block = And(h, Compare(h, rows, kt, "GE"), Compare(h, cols, kt, "GE"));
  Value sym = Add(h, Tri(h, a, true), Mt(h, Tri(h, a, true, -1)));
  auto swap = [&](Value m, Value x, Value y, int64_t dim) {
    Value ids = dim == r - 2 ? rows : cols;
    Value lx = Pick(h, m, Compare(h, ids, at(x, t.dims), "EQ"), dim);
    Value ly = Pick(h, m, Compare(h, ids, at(y, t.dims), "EQ"), dim);
    return Select(h, Compare(h, ids, at(x, t.dims), "EQ"), Insert(h, ly, t.dims, dim),
                  Select(h, Compare(h, ids, at(y, t.dims), "EQ"), Insert(h, lx, t.dims, dim), m));
  };
  Value moved = swap(swap(sym, kk, kp, r - 2), kk, kp, r - 1);
  Value a1 = Select(h, And(h, block, at(ir::Unary(h, "stablehlo.not", zero), t.dims)), moved, a);
  // Rank-1 update (1x1 pivot).
  Value k1 = Add(h, k, idx(1));
  Value ak = col(a1, k), ak1 = col(a1, k1);  // columns k and k + 1 after the interchange
  Value akk = elem(ak, k);
  Value below = Compare(h, vi, kv, "GT");
  Value x = Select(h, below, ak, full(0, vd));
  Value d11 = Div(h, full(1, batch), akk);
  Value trail1 = And(h, Compare(h, rows, kt, "GT"), Compare(h, cols, kt, "GT"));
  Value upd1 =
      Mul(h, Mul(h, Insert(h, x, t.dims, r - 1), Insert(h, x, t.dims, r - 2)), at(d11, t.dims));
  Value one = Select(h, trail1, Sub(h, a1, upd1), a1);
  one = Select(h, And(h, Compare(h, cols, kt, "EQ"), Compare(h, rows, kt, "GT")),
               Insert(h, Mul(h, x, at(d11, vd)), t.dims, r - 1), one);
  // Rank-2 update (2x2 pivot at k, k + 1).
  Value below2 = Compare(h, vi, at(k1, vd), "GT");
  Value c0 = Select(h, below2, ak, full(0, vd));
  Value cc1 = Select(h, below2, ak1, full(0, vd));
  Value d21 = elem(ak, k1);
  Value e11 = Div(h, elem(ak1, k1), d21);
  Value e22 = Div(h, akk, d21);
  Value tt = Div(h, full(1, batch), Sub(h, Mul(h, e11, e22), full(1, batch)));
  Value f21 = Div(h, tt, d21);
  Value wk = Mul(h, at(f21, vd), Sub(h, Mul(h, at(e11, vd), c0), cc1));
  Value wk1 = Mul(h, at(f21, vd), Sub(h, Mul(h, at(e22, vd), cc1), c0));
  Value trail2 =
      And(h, Compare(h, rows, at(k1, t.dims), "GT"), Compare(h, cols, at(k1, t.dims), "GT"));
  Value upd2 = Add(h, Mul(h, Insert(h, c0, t.dims, r - 1), Insert(h, wk, t.dims, r - 2)),
                   Mul(h, Insert(h, cc1, t.dims, r - 1), Insert(h, wk1, t.dims, r - 2)));
  Value twos = Select(h, trail2, Sub(h, a1, upd2), a1);
  Value below2m = Compare(h, rows, at(k1, t.dims), "GT");
  twos = Select(h, And(h, Compare(h, cols, kt, "EQ"), below2m), Insert(h, wk, t.dims, r - 1), twos);
  twos = Select(h, And(h, Compare(h, cols, at(k1, t.dims), "EQ"), below2m),
                Insert(h, wk1, t.dims, r - 1), twos);
  Value stepped = Select(h, at(two, t.dims), twos, one);
  Value last = Compare(h, k, idx(n - 1), "GE");  // a 1x1 pivot in the last column updates nothing
  stepped = Select(h, at(And(h, ir::Unary(h, "stablehlo.not", two), last), t.dims), a1, stepped);
  Value live = Compare(h, k, idx(n), "LT");
  Value anew = Select(h, at(And(h, live, ir::Unary(h, "stablehlo.not", zero)), t.dims), stepped, a);
  // Pivots (1-based; negative for both columns of a 2x2 block) and info.
  const Dims pd = h.type(piv).dims;
  Value pi = Idx(h, pd, r - 2);
  Value kp1 = ir::Convert(h, Add(h, kp, idx(1)), DType::kS32);
  Value code = Select(h, two, ir::Unary(h, "stablehlo.negate", kp1), kp1);
  Value mine = And(h, Compare(h, pi, at(k, pd), "GE"), Compare(h, pi, at(kk, pd), "LE"));
  mine = And(h, mine, at(live, pd));
  Value pnew = Select(h, mine, at(code, pd), piv);
  Value none = Compare(h, info, Full(h, 0, DType::kS32, batch), "EQ");
  Value inew = Select(h, And(h, And(h, zero, none), live),
                      ir::Convert(h, Add(h, k, idx(1)), DType::kS32), info);
  Value knew = Select(h, live, Add(h, k, kstep), k);
  return {knew, anew, pnew, inew};
}

std::vector<Value> LdlFactor(Ctx& c) {
  Graph& g = c.g;
  const Type& lt = c.out[0];
  if (rt::IsComplex(lt.dtype)) throw LoweringError("complex inputs are not supported");
  if (lt.numel() == 0) return AllZeros(c);
  const int64_t n = Rows(lt);
  const Dims batch = Batch(lt);
  Value a = Cast(c, c.In("self"), lt.dtype);
  V init{Full(g, 0, DType::kS64, batch), a, Full(g, 0, DType::kS32, Cat(batch, {n})),
         Full(g, 0, DType::kS32, batch)};
  // Each matrix moves on by its own 1 or 2 columns a step, until every one is done.
  auto open = [&](Graph& h, Value, const V& st) { return AnyColumnLeft(h, st[0], n, "LT"); };
  auto step = [&](Graph& h, Value, V& st) { return LdlStep(h, st); };
  V out = detail::Counted(g, 0, 1, init, open, step);
  return {Tri(g, out[1], true), ir::Convert(g, out[2], c.out[1].dtype),
          ir::Convert(g, out[3], c.out[2].dtype)};
}

// LAPACK's sytrs (lower): L D X = P B forward, column by column with each block's pivot
// interchange, then L^T backward; every matrix at its own column k, as in the factorization.
struct LdlSolveParts {
  Graph& h;
  Value a, piv;  // LD and the 1-based pivots (s64)
  const Type t;  // B's type
  const int64_t r, n;
  const Dims batch, vd;
  Value rows;
  LdlSolveParts(Graph& h, Value a, Value piv, const Type& bt)
      : h(h),
        a(a),
        piv(piv),
        t(bt),
        r(bt.rank()),
        n(Rows(bt)),
        batch(Batch(bt)),
        vd(Cat(batch, {n})),
        rows(Idx(h, bt.dims, r - 2)) {}
  Value idx(int64_t v) const { return Full(h, static_cast<double>(v), DType::kS64, batch); }
  // Column j of LD with only its rows below `after` (other rows zero), as [batch, n].
  Value Col(Value j, Value after) const {
    const Type& at = h.type(a);
    Value c = Pick(h, a, Compare(h, Idx(h, at.dims, r - 1), Lead(h, j, at.dims), "EQ"), r - 1);
    return Select(h, Compare(h, Idx(h, vd, r - 2), Lead(h, after, vd), "GT"), c,
                  Full(h, 0, t.dtype, vd));
  }
  Value Elem(Value v, Value i) const {  // v[..., i] of a [batch, n] vector
    const Type& vt = h.type(v);
    return Pick(h, v, Compare(h, Idx(h, vt.dims, r - 2), Lead(h, i, vt.dims), "EQ"), r - 2);
  }
  Value Entry(Value i, Value j) const { return Elem(Col(j, idx(-1)), i); }  // LD[i, j]
  Value Row(Value b, Value i) const {                                       // [batch, m]
    return Pick(h, b, Compare(h, rows, Lead(h, i, t.dims), "EQ"), r - 2);
  }
  Value SetRow(Value b, Value i, Value v) const {
    return Select(h, Compare(h, rows, Lead(h, i, t.dims), "EQ"), Insert(h, v, t.dims, r - 2), b);
  }
  Value Swap(Value b, Value x, Value y) const {
    return SetRow(SetRow(b, x, Row(b, y)), y, Row(b, x));
  }
  Value Outer(Value l, Value row) const {
    return Mul(h, Insert(h, l, t.dims, r - 1), Insert(h, row, t.dims, r - 2));
  }
  Value Dot(Value l, Value b) const {  // l^T b, [batch, m]
    return ir::Reduce(h, Mul(h, Insert(h, l, t.dims, r - 1), b), Constant(h, 0, t.dtype), {r - 2},
                      "stablehlo.add");
  }
  Value Where(Value pred, Value x, Value y) const { return Select(h, Lead(h, pred, t.dims), x, y); }
};

// s: {k, b, LD, pivots}, as the while loop carries them.
V LdlForward(Graph& h, const V& s) {
  const LdlSolveParts p(h, s[2], s[3], h.type(s[1]));
  Value k = s[0], b = s[1];
  Value code = p.Elem(p.piv, k), k1 = Add(h, k, p.idx(1));
  Value two = Compare(h, code, p.idx(0), "LT");
  // 1x1 pivot: interchange k and code - 1, eliminate below k, divide by d_kk.
  Value b1 = p.Swap(b, k, Sub(h, code, p.idx(1)));
  b1 = Sub(h, b1, p.Outer(p.Col(k, k), p.Row(b1, k)));
  const Dims rd = h.type(p.Row(b1, k)).dims;
  b1 = p.SetRow(b1, k, Div(h, p.Row(b1, k), Lead(h, p.Entry(k, k), rd)));
  // 2x2 pivot: interchange k + 1 and -code - 1, eliminate below k + 1, solve the 2x2 block.
  Value b2 = p.Swap(b, k1, Sub(h, ir::Unary(h, "stablehlo.negate", code), p.idx(1)));
  b2 = Sub(h, Sub(h, b2, p.Outer(p.Col(k, k1), p.Row(b2, k))),
           p.Outer(p.Col(k1, k1), p.Row(b2, k1)));
  Value d21 = Lead(h, p.Entry(k1, k), rd);
  Value akm1 = Div(h, Lead(h, p.Entry(k, k), rd), d21),
        ak = Div(h, Lead(h, p.Entry(k1, k1), rd), d21);
  Value denom = Sub(h, Mul(h, akm1, ak), Full(h, 1, p.t.dtype, rd));
  Value bkm1 = Div(h, p.Row(b2, k), d21), bk = Div(h, p.Row(b2, k1), d21);
  b2 = p.SetRow(b2, k, Div(h, Sub(h, Mul(h, ak, bkm1), bk), denom));
  b2 = p.SetRow(b2, k1, Div(h, Sub(h, Mul(h, akm1, bk), bkm1), denom));
  Value live = Compare(h, k, p.idx(p.n), "LT");
  Value next = p.Where(live, p.Where(two, b2, b1), b);
  return {Select(h, live, Add(h, k, Select(h, two, p.idx(2), p.idx(1))), k), next, s[2], s[3]};
}

V LdlBackward(Graph& h, const V& s) {
  const LdlSolveParts p(h, s[2], s[3], h.type(s[1]));
  Value k = s[0], b = s[1];  // k: the block's last column
  Value code = p.Elem(p.piv, k), km1 = Sub(h, k, p.idx(1));
  Value two = Compare(h, code, p.idx(0), "LT");
  Value bk = Sub(h, p.Row(b, k), p.Dot(p.Col(k, k), b));
  Value b1 = p.Swap(p.SetRow(b, k, bk), k, Sub(h, code, p.idx(1)));
  Value b2 = p.SetRow(p.SetRow(b, k, bk), km1, Sub(h, p.Row(b, km1), p.Dot(p.Col(km1, k), b)));
  b2 = p.Swap(b2, k, Sub(h, ir::Unary(h, "stablehlo.negate", code), p.idx(1)));
  Value live = Compare(h, k, p.idx(0), "GE");
  Value next = p.Where(live, p.Where(two, b2, b1), b);
  return {Select(h, live, Sub(h, k, Select(h, two, p.idx(2), p.idx(1))), k), next, s[2], s[3]};
}

std::vector<Value> LdlSolve(Ctx& c) {
  Graph& g = c.g;
  const Type& xt = c.out[0];
  if (rt::IsComplex(xt.dtype)) throw LoweringError("complex inputs are not supported");
  if (xt.numel() == 0) return AllZeros(c);
  const Dims batch = Batch(xt);
  Value a = ToBatch(g, Cast(c, c.In("LD"), xt.dtype), batch);
  Value piv = ir::Convert(g, c.In("pivots"), DType::kS64);
  piv = ir::BroadcastTo(g, piv, Cat(batch, {Rows(xt)}));
  Value b = ToBatch(g, Cast(c, c.In("B"), xt.dtype), batch);
  const int64_t n = Rows(xt);
  V fwd = detail::Counted(
      g, 0, 1, {Full(g, 0, DType::kS64, batch), b, a, piv},
      [&](Graph& h, Value, const V& st) { return AnyColumnLeft(h, st[0], n, "LT"); },
      [&](Graph& h, Value, V& st) { return LdlForward(h, st); });
  V bwd = detail::Counted(
      g, 0, 1, {Full(g, static_cast<double>(n - 1), DType::kS64, batch), fwd[1], a, piv},
      [&](Graph& h, Value, const V& st) { return AnyColumnLeft(h, st[0], 0, "GE"); },
      [&](Graph& h, Value, V& st) { return LdlBackward(h, st); });
  return {bwd[1]};
}

// ---- Least squares ---------------------------------------------------------------------------

// linalg_lstsq through the SVD, whatever the driver: the minimum-norm solution, which gelsy, gelsd
// and gelss return (and gels, for the full-rank matrices it accepts). Singular values at most
// rcond times the largest count as zero, as in gelsd; rcond defaults to eps * max(m, n). The Meta
// kernel decides which outputs are empty (aten/cpu_only_meta.cc).
std::vector<Value> LinalgLstsq(Ctx& c) {
  Graph& g = c.g;
  const Type& st = c.out[0];
  const DType dt = st.dtype;
  const DType real = rt::IsComplex(dt) ? rt::RealOf(dt) : dt;  // of s, rank and residuals
  Value a = Cast(c, c.In("self"), dt), b = Cast(c, c.In("b"), dt);
  const Type ta = g.type(a);
  const int64_t m = Rows(ta), n = Cols(ta), k = std::min(m, n);
  const bool vector = g.type(b).rank() == ta.rank() - 1;
  if (vector) b = ir::Reshape(g, b, Cat(g.type(b).dims, {1}));
  const Dims batch(st.dims.begin(), st.dims.end() - (vector ? 1 : 2));
  const int64_t nrhs = Cols(g.type(b));
  Value bb = ir::BroadcastTo(g, b, Cat(batch, {m, nrhs}));
  std::vector<Value> res = AllZeros(c);
  Value x = Zeros(g, Type{dt, Cat(batch, {n, nrhs})});
  if (k > 0 && Type{dt, batch}.numel() > 0 && ta.numel() > 0) {
    const bool wide = m < n;
    auto [u, s, v] = SvdTall(g, wide ? Mh(g, a) : a);
    Value left = wide ? v : u, right = wide ? u : v;  // m x k, n x k
    double rcond = c.Has("rcond") ? c.Double("rcond", 0) : -1;
    if (rcond < 0) rcond = Eps(dt) * static_cast<double>(std::max(m, n));
    const Type sv = g.type(s);
    Dims first = sv.dims;
    first.back() = 1;
    Value largest = ir::Slice(g, s, Dims(sv.rank(), 0), first);
    largest = ir::BroadcastTo(g, largest, sv.dims);
    Value cut = Mul(g, largest, Full(g, rcond, real, sv.dims));
    Value keep = Compare(g, s, cut, "GT");
    Value inv = Select(g, keep, Div(g, Full(g, 1, real, sv.dims), s), Zeros(g, sv));
    inv = ir::Convert(g, ir::BroadcastTo(g, inv, Cat(batch, {k})), dt);
    Value coef = MatMul(g, Mh(g, ToBatch(g, left, batch)), bb);  // k x nrhs
    coef = Mul(g, coef, Insert(g, inv, g.type(coef).dims, static_cast<int64_t>(batch.size()) + 1));
    x = MatMul(g, ToBatch(g, right, batch), coef);
    if (c.out[2].numel() > 0) {
      Value ones = ir::Convert(g, keep, DType::kS64);
      res[2] = ir::Reduce(g, ones, Constant(g, 0, DType::kS64), {sv.rank() - 1}, "stablehlo.add");
    }
    if (c.out[3].numel() > 0) res[3] = s;
  }
  res[0] = ir::Reshape(g, x, st.dims);
  if (c.out[1].numel() > 0) {
    Value r = Sub(g, MatMul(g, ToBatch(g, a, batch), x), bb);
    res[1] = ir::Reduce(g, ir::AbsSq(g, r), Constant(g, 0, real),
                        {static_cast<int64_t>(batch.size())}, "stablehlo.add");
  }
  return res;
}

// ---- Matrix exponential ----------------------------------------------------------------------

// exp(A) by scaling and squaring: X = A / 2^s with s = ceil(log2(||A||_1 / theta)) (at least 0),
// so that ||X||_1 <= theta; exp(X) by its Taylor polynomial of degree 18 in Horner form, whose
// remainder theta^19 / 19! is below the dtype's rounding at theta = 3 (float32) and 1.09
// (float64); then each matrix squared its own s times, in one loop to the largest s. The result
// is unique, so it matches PyTorch's (degree-18 Taylor variants of Bader et al.).
std::vector<Value> MatrixExp(Ctx& c) {
  Graph& g = c.g;
  if (c.out[0].numel() == 0) return AllZeros(c);
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};  // half types compute in float32
  const int64_t r = t.rank();
  const Dims batch = Batch(t);
  const DType real = rt::IsComplex(t.dtype) ? rt::RealOf(t.dtype) : t.dtype;  // of the norm
  Value a = Cast(c, c.In("self"), t.dtype);
  Value col_sums = ir::Reduce(g, ir::Abs(g, a), Constant(g, 0, real), {r - 2}, "stablehlo.add");
  Value norm = ir::Reduce(g, col_sums, Constant(g, 0, real), {r - 2}, "stablehlo.maximum");
  const double theta = real == DType::kF64 ? 1.09 : 3.0;
  Value lg = Div(g, ir::Unary(g, "stablehlo.log", Div(g, norm, Full(g, theta, real, batch))),
                 Full(g, std::log(2.0), real, batch));
  Value s = ir::Unary(g, "stablehlo.ceil", lg);
  // At least 0; at most 1100 (a NaN or infinite norm must not loop forever; exp is then inf/NaN).
  s = ir::Clamp(g, Constant(g, 0, real), s, Constant(g, 1100, real));
  s = Select(g, Compare(g, norm, norm, "NE"), Full(g, 1100, real, batch), s);
  Value scale =
      ir::Unary(g, "stablehlo.exponential", Mul(g, s, Full(g, -std::log(2.0), real, batch)));
  Value x = Mul(g, a, Lead(g, ir::Convert(g, scale, t.dtype), t.dims));
  Value eye = Eye(g, t.dtype, t.dims);
  Value p = eye;
  for (int k = 18; k >= 1; --k)
    p = Add(g, eye, Div(g, MatMul(g, x, p), Full(g, k, t.dtype, t.dims)));
  Value times = ir::Convert(g, s, DType::kS64);
  Value most =
      ir::Reduce(g, times, Constant(g, 0, DType::kS64), AllDims(batch.size()), "stablehlo.maximum");
  V out = ForUpTo(g, 0, most, {times, p}, [&](Graph& h, Value j, V& st) {
    Value more = Compare(h, BroadcastInDim(h, j, batch, {}), st[0], "LT");
    return V{st[0], Select(h, Lead(h, more, t.dims), MatMul(h, st[1], st[1]), st[1])};
  });
  return {Cast(c, out[1], c.out[0].dtype)};
}

}  // namespace

void AddDecompRules(RuleMap& m) {
  m["aten::_cholesky_solve_helper"] = CholeskySolveHelper;
  m["aten::_linalg_det"] = Det;
  m["aten::_linalg_eigh"] = LinalgEigh;
  m["aten::_linalg_slogdet"] = Slogdet;
  m["aten::_linalg_solve_ex"] = SolveEx;
  m["aten::_linalg_svd"] = LinalgSvd;
  m["aten::cholesky"] = CholeskyLegacy;
  m["aten::cholesky_inverse"] = CholeskyInverse;
  m["aten::geqrf"] = GeqrfRule;
  m["aten::linalg_cholesky_ex"] = CholeskyEx;
  m["aten::linalg_householder_product"] = LinalgHouseholderProduct;
  m["aten::linalg_inv_ex"] = InvEx;
  m["aten::linalg_ldl_factor_ex"] = LdlFactor;
  m["aten::linalg_ldl_solve"] = LdlSolve;
  m["aten::linalg_lstsq"] = LinalgLstsq;
  m["aten::linalg_lu"] = LinalgLu;
  m["aten::linalg_matrix_exp"] = MatrixExp;
  m["aten::linalg_lu_factor_ex"] = LuFactorEx;
  m["aten::linalg_lu_solve"] = LinalgLuSolve;
  m["aten::linalg_qr"] = LinalgQr;
  m["aten::linalg_solve_triangular"] = SolveTriangular;
  m["aten::lu_unpack"] = LuUnpack;
  m["aten::ormqr"] = Ormqr;
  m["aten::triangular_solve"] = TriangularSolve;
}

}  // namespace tpu::lowering
