#include "eager/trace.h"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "eager/executor.h"

namespace tpu::eager {

namespace {

constexpr size_t kDefaultMaxOps = 1000;
constexpr size_t kHistory = 16384;  // loops up to half of this are detected

std::atomic<size_t> g_max_ops{0};

// Z-function: z[i] = length of the longest common prefix of s and s[i..].
std::vector<size_t> ZFunction(const std::vector<uint64_t>& s) {
  size_t n = s.size();
  std::vector<size_t> z(n, 0);
  if (n > 0) z[0] = n;
  for (size_t i = 1, l = 0, r = 0; i < n; ++i) {
    if (i < r) z[i] = std::min(r - i, z[i - l]);
    while (i + z[i] < n && s[z[i]] == s[i + z[i]]) ++z[i];
    if (i + z[i] > r) l = i, r = i + z[i];
  }
  return z;
}

}  // namespace

void Trace::SetMaxOps(size_t n) { g_max_ops.store(n); }

size_t Trace::MaxOps() {
  size_t n = g_max_ops.load();
  if (n == 0) {
    const char* env = std::getenv("TORCHTPU_FUSED_MAX_OPS");
    n = env ? std::strtoull(env, nullptr, 10) : 0;
    if (n == 0) n = kDefaultMaxOps;
    g_max_ops.store(n);
  }
  return n;
}

int64_t Trace::External(const rt::BufferPtr& buf) {
  auto [it, inserted] = external_index_.emplace(buf.get(), externals_.size());
  if (inserted) externals_.push_back(buf);
  return it->second;
}

std::vector<LazyPtr> Trace::Record(ir::Graph g, const std::vector<LazyPtr>& inputs, std::string op,
                                   OriginPtr origin) {
  // Values pending on another device are computed there first (never under our lock).
  for (const LazyPtr& in : inputs) {
    if (in->device != device_ && !in->ready.load(std::memory_order_acquire)) Materialize(in);
  }
  std::lock_guard<std::mutex> lock(mu_);
  Op rec;
  ir::Hash128 h = ir::StructuralHash(g);
  key_.Mix(h.lo);
  key_.Mix(h.hi);
  rec.inputs.reserve(inputs.size());
  for (const LazyPtr& in : inputs) {
    int64_t src;
    if (in->ready.load(std::memory_order_acquire)) {
      src = External(in->buf);
    } else if (in->device != device_) {
      src = External(TraceOf(in->device).Materialize(in));
    } else if (in->error) {
      throw OpError(*in->error, false);
    } else {
      src = ~static_cast<int64_t>(in->value);
    }
    rec.inputs.push_back(src);
    key_.Mix(static_cast<uint64_t>(src));
  }
  rec.first_value = static_cast<uint32_t>(values_.size());
  std::vector<LazyPtr> outs;
  outs.reserve(g.results.size());
  for (ir::Value r : g.results) {
    auto l = std::make_shared<Lazy>(g.type(r), device_);
    l->value = static_cast<uint32_t>(values_.size());
    values_.push_back(l);
    outs.push_back(std::move(l));
  }
  rec.g = std::make_shared<const ir::Graph>(std::move(g));
  rec.name = std::move(op);
  rec.origin = std::move(origin);
  ops_.push_back(std::move(rec));
  GetMetrics().recorded_ops++;
  NoteOp(h.lo ^ (h.hi * 31));

  // Cut points: a loop boundary, or the size limit.
  size_t max_ops = MaxOps();
  bool cut = false;
  if (period_ > 0) {
    ++phase_;
    if (phase_ == span_) {
      phase_ = 0;
      if (RepeatsLastSpan()) {
        cut = true;
      } else {
        period_ = 0;  // the loop changed: back to the size limit until a new one is found
      }
    } else if (phase_ % max_ops == 0) {
      cut = true;
    }
  }
  if (!cut && ops_.size() >= max_ops) {
    cut = true;
    if (period_ == 0) DetectPeriod();
  }
  if (cut) FlushLocked();
  return outs;
}

void Trace::NoteOp(uint64_t h) {
  history_.push_back(h);
  if (history_.size() > kHistory) history_.pop_front();
}

bool Trace::RepeatsLastSpan() const {
  size_t n = history_.size();
  if (n < 2 * span_) return false;
  return std::equal(history_.end() - static_cast<ptrdiff_t>(span_), history_.end(),
                    history_.end() - static_cast<ptrdiff_t>(2 * span_));
}

// The loop is the period that explains the longest stretch of recent history (so a step's
// repeated layers do not pass for the step itself); it must have repeated at least twice.
void Trace::DetectPeriod() {
  std::vector<uint64_t> rev(history_.rbegin(), history_.rend());
  std::vector<size_t> z = ZFunction(rev);
  size_t best = 0, best_cover = 0;
  for (size_t p = 1; p < z.size(); ++p) {
    if (z[p] < p) continue;
    size_t cover = z[p] + p;
    if (cover > best_cover) best = p, best_cover = cover;
  }
  if (best == 0) return;
  size_t max_ops = MaxOps();
  period_ = best;
  span_ = best < max_ops ? best * (max_ops / best) : best;
  phase_ = 0;  // this cut is the loop's anchor
}

size_t Trace::pending_ops() {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_.size();
}

rt::BufferPtr Trace::Materialize(const LazyPtr& v) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!v->ready.load(std::memory_order_acquire)) {
    if (v->error) throw OpError(*v->error, false);
    FlushLocked();
  }
  if (v->error) throw OpError(*v->error, false);
  if (!v->ready.load(std::memory_order_acquire)) {
    throw OpError("tpu: internal error: a pending value is not in its device's trace", false);
  }
  return v->buf;
}

void Trace::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
}

void Trace::FlushLocked() {
  if (ops_.empty()) return;
  std::vector<Op> ops = std::move(ops_);
  std::vector<rt::BufferPtr> externals = std::move(externals_);
  std::vector<std::weak_ptr<Lazy>> values = std::move(values_);
  Key key = key_;
  ops_.clear();
  externals_.clear();
  external_index_.clear();
  values_.clear();
  key_ = Key();

  // Results are the values something outside the trace still refers to.
  std::vector<LazyPtr> live;
  for (auto& w : values) {
    if (LazyPtr l = w.lock()) {
      key.Mix(l->value);
      live.push_back(std::move(l));
    }
  }
  key.Mix(values.size());
  if (live.empty()) return;  // nothing observable: the ops need not run
  GetMetrics().flushes++;

  std::vector<rt::BufferPtr> outs;
  try {
    rt::ExecutablePtr exe = Executable({key.a, key.b}, [&] {
      ir::Graph fused;
      std::vector<ir::Value> ext;
      for (const auto& b : externals) ext.push_back(fused.Param({b->dtype(), b->dims()}));
      std::vector<ir::Value> vals(values.size(), -1);
      for (const Op& op : ops) {
        std::vector<ir::Value> args;
        for (int64_t src : op.inputs) args.push_back(src >= 0 ? ext[src] : vals[~src]);
        std::vector<ir::Value> res = ir::Inline(fused, *op.g, args);
        std::copy(res.begin(), res.end(), vals.begin() + op.first_value);
      }
      for (const LazyPtr& l : live) fused.results.push_back(vals[l->value]);
      return fused;
    });
    outs = Execute(*exe, externals, device_);
  } catch (const rt::Error&) {
    Replay(ops, externals, live, values.size());
    return;
  } catch (const std::exception& e) {
    // Not a program failure (a bug of ours): the values are lost, and say why when read.
    auto why = std::make_shared<const std::string>(std::string("tpu: internal error: ") + e.what());
    for (const LazyPtr& l : live) l->error = why;
    throw;
  }
  for (size_t k = 0; k < live.size(); ++k) {
    live[k]->buf = std::move(outs[k]);
    live[k]->ready.store(true, std::memory_order_release);
  }
}

void Trace::Replay(const std::vector<Op>& ops, const std::vector<rt::BufferPtr>& externals,
                   const std::vector<LazyPtr>& live, size_t num_values) {
  std::vector<rt::BufferPtr> vals(num_values);
  std::vector<std::shared_ptr<const std::string>> lost(num_values);
  std::optional<OpError> first;
  for (const Op& op : ops) {
    std::vector<rt::BufferPtr> args;
    std::shared_ptr<const std::string> cause;
    for (int64_t src : op.inputs) {
      if (src >= 0) {
        args.push_back(externals[src]);
      } else {
        args.push_back(vals[~src]);
        if (lost[~src]) cause = lost[~src];
      }
    }
    size_t n = op.g->results.size();
    if (!cause) {
      try {
        std::vector<rt::BufferPtr> outs = Run(*op.g, args, device_);
        std::move(outs.begin(), outs.end(), vals.begin() + op.first_value);
        continue;
      } catch (const rt::Error& e) {
        std::string what = op.name;
        if (op.origin) what += " (recorded at " + op.origin->Describe() + ")";
        OpError err = DescribeFailure(e, what);
        if (!first) first = err;
        cause = std::make_shared<const std::string>(err.what());
      }
    }
    std::fill(lost.begin() + op.first_value, lost.begin() + op.first_value + n, cause);
  }
  for (const LazyPtr& l : live) {
    if (lost[l->value]) {
      l->error = lost[l->value];
    } else {
      l->buf = vals[l->value];
      l->ready.store(true, std::memory_order_release);
    }
  }
  if (first) throw *first;
}

namespace {
std::mutex g_traces_mu;
std::array<Trace*, 64> g_traces{};  // live until exit, like the client
}  // namespace

Trace& TraceOf(int device) {
  std::lock_guard<std::mutex> lock(g_traces_mu);
  Trace*& t = g_traces.at(static_cast<size_t>(device));
  if (t == nullptr) t = new Trace(device);
  return *t;
}

void FlushAllTraces() {
  std::vector<Trace*> all;
  {
    std::lock_guard<std::mutex> lock(g_traces_mu);
    for (Trace* t : g_traces)
      if (t) all.push_back(t);
  }
  for (Trace* t : all) t->Flush();
}

}  // namespace tpu::eager
