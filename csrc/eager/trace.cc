#include "eager/trace.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "eager/bounded.h"
#include "eager/executor.h"
#include "eager/profile.h"
#include "ir/builder.h"
#include "runtime/env.h"

namespace tpu::eager {

namespace {

constexpr size_t kDefaultMaxOps = 1000;
// Loops up to half of this many ops are detected.
const size_t kHistory = rt::EnvCount("TORCHTPU_LOOP_HISTORY", 16384);
// Op graphs shared by structure (a training step has ~1000).
const size_t kInterned = rt::EnvCount("TORCHTPU_INTERNED_GRAPHS", 4096);
// Smaller buffers are not donated. On XLA:CPU, donating the Llama step's many small buffers made it
// about 9% slower, while a loop of in-place updates of 16 MiB ran twice as fast (no fresh pages to
// fault in). TORCHTPU_DONATE_MIN_BYTES sets it, so the tests can donate every buffer. 0-d values
// are never donated: the scalar cache shares them, and its weak references revive them.
int64_t MinDonatedBytes() {
  static const int64_t n = rt::EnvCount("TORCHTPU_DONATE_MIN_BYTES", int64_t{1} << 20);
  return n;
}

std::atomic<bool>& Donating() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("TORCHTPU_DONATE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

std::atomic<size_t> g_max_ops{0};

std::mutex g_meet_mu;
MeetFn g_meet;

// Runs a program holding collectives with the other ranks (through the distributed layer).
std::vector<rt::BufferPtr> Meet(const Meeting& m, int device,
                                const std::vector<rt::BufferPtr>& inputs, const ir::Hash128& key,
                                const std::function<ir::Graph()>& build) {
  MeetFn meet;
  {
    std::lock_guard<std::mutex> lock(g_meet_mu);
    meet = g_meet;
  }
  if (!meet) throw OpError("tpu: internal error: a collective with no process group", false);
  return meet(m, device, inputs, key, build);
}

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

void SetMeet(MeetFn meet) {
  std::lock_guard<std::mutex> lock(g_meet_mu);
  g_meet = std::move(meet);
}

void SetDonation(bool on) { Donating().store(on, std::memory_order_relaxed); }

namespace {
// Loops found under the old limit were cut into spans of it: every trace looks for them anew.
std::atomic<uint64_t> g_limit_epoch{0};
}  // namespace

void Trace::SetMaxOps(size_t n) {
  g_max_ops.store(n);
  g_limit_epoch.fetch_add(1);
}

size_t Trace::MaxOps() {
  size_t n = g_max_ops.load();
  if (n == 0) {
    n = rt::EnvCount("TORCHTPU_FUSED_MAX_OPS", kDefaultMaxOps);
    g_max_ops.store(n);
  }
  return n;
}

int64_t Trace::External(const rt::BufferPtr& buf) {
  auto [it, inserted] = external_index_.emplace(buf.get(), externals_.size());
  if (inserted) externals_.push_back(buf);
  return it->second;
}

std::shared_ptr<const ir::Graph> Trace::Intern(const ir::Hash128& h, ir::Graph&& g) {
  auto it = interned_.find(h);
  if (it != interned_.end()) return it->second;
  if (interned_.size() >= kInterned) interned_.clear();
  auto shared = std::make_shared<const ir::Graph>(std::move(g));
  interned_.emplace(h, shared);
  return shared;
}

std::vector<LazyPtr> Trace::Record(ir::Graph g, const std::vector<LazyPtr>& inputs, std::string op,
                                   OriginPtr origin, CollectivePtr collective) {
  ir::Hash128 h = ir::StructuralHash(g);
  std::shared_ptr<const ir::Graph> shared;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shared = Intern(h, std::move(g));
  }
  return Record(std::move(shared), h, inputs, std::move(op), std::move(origin),
                std::move(collective));
}

std::vector<LazyPtr> Trace::Record(std::shared_ptr<const ir::Graph> g, const ir::Hash128& h,
                                   const std::vector<LazyPtr>& inputs, std::string op,
                                   OriginPtr origin, CollectivePtr collective) {
  // Values pending on another device are computed there first (never under our lock).
  for (const LazyPtr& in : inputs) {
    if (in->device != device_ && !in->ready.load(std::memory_order_acquire)) {
      eager::Materialize(in);  // that device's trace, not this one
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Another thread starts recording (autograd's device thread begins a backward pass, or the
  // main thread takes over again for the optimizer): what is recorded so far starts running
  // now, while the new thread records. A training step's forward runs while its backward is
  // recorded, and its backward while the optimizer step is recorded.
  std::thread::id self = std::this_thread::get_id();
  if (self != recorder_ && !ops_.empty()) FlushLocked();
  recorder_ = self;
  // A cut falls due with the op before: it runs now, when that op's caller no longer holds the
  // values it read (a buffer it overwrote can be given away).
  if (cut_due_) FlushLocked();
  if (uint64_t e = g_limit_epoch.load(std::memory_order_relaxed); e != limit_epoch_) {
    limit_epoch_ = e;
    history_.clear();
    period_ = phase_ = 0;
  }
  // A collective of another group than those held: the ranks that meet differ, so what is
  // held runs first (each rank cuts at the same op).
  if (collective != nullptr) {
    if (!collective_group_.empty() && collective_group_ != collective->group) FlushLocked();
    collective_group_ = collective->group;
  }
  Op rec;
  rec.hash = h;
  rec.inputs.reserve(inputs.size());
  for (const LazyPtr& in : inputs) {
    int64_t src;
    if (in->ready.load(std::memory_order_acquire)) {
      // A capture's program runs again on exact buffers, so it takes none padded.
      src = External(capturing_.load(std::memory_order_relaxed) ? Unpadded(in->buf, in->type.dims)
                                                                : in->buf);
    } else if (in->error) {
      throw OpError(*in->error, false);
    } else {
      src = ~static_cast<int64_t>(in->value);
    }
    rec.inputs.push_back(src);
  }
  rec.first_value = static_cast<uint32_t>(values_.size());
  std::vector<LazyPtr> outs;
  outs.reserve(g->results.size());
  for (ir::Value r : g->results) {
    auto l = std::make_shared<Lazy>(g->type(r), device_);
    l->value = static_cast<uint32_t>(values_.size());
    values_.push_back(l);
    value_op_.push_back(static_cast<uint32_t>(ops_.size()));
    outs.push_back(std::move(l));
  }
  rec.g = std::move(g);
  rec.name = std::move(op);
  rec.origin = std::move(origin);
  rec.collective = std::move(collective);
  ops_.push_back(std::move(rec));
  GetMetrics().recorded_ops++;
  recorded_.fetch_add(1, std::memory_order_relaxed);
  NoteOp(h.lo ^ (h.hi * 31));

  if (capturing_.load(std::memory_order_relaxed)) return outs;  // a capture is one program

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
  cut_due_ = cut;
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
    FlushLocked(v.get());
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

namespace {

using Key = ir::Mixer128;  // a part's key: its ops, wiring, outputs and parameter types

std::string HexKey(uint64_t a, uint64_t b) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

// A fused program's name in profiles: its key, which tells programs apart, and its size.
std::string ProgramName(const Key& key, size_t ops) {
  return "fused program " + HexKey(key.a, key.b).substr(0, 8) + " (" + std::to_string(ops) +
         " ops)";
}

// "aten::mm x4, aten::add.Tensor x2": the ops a program holds, most frequent first.
std::string OpsByCount(const std::vector<std::string_view>& names) {
  std::unordered_map<std::string_view, int> count;
  for (std::string_view n : names) count[n]++;
  std::vector<std::pair<std::string_view, int>> sorted(count.begin(), count.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return std::tie(y.second, x.first) < std::tie(x.second, y.first);
  });
  std::string out;
  for (const auto& [name, n] : sorted) {
    if (!out.empty()) out += ", ";
    out += std::string(name) + " x" + std::to_string(n);
  }
  return out;
}

std::string Describe(const std::string& name, const OriginPtr& origin) {
  return origin ? name + " (recorded at " + origin->Describe() + ")" : name;
}

}  // namespace

Trace::Taken Trace::Take() {
  Taken t;
  t.ops = std::move(ops_);
  t.externals = std::move(externals_);
  t.value_op = std::move(value_op_);
  size_t num_values = values_.size();
  t.live.resize(num_values);
  for (size_t v = 0; v < num_values; ++v) t.live[v] = values_[v].lock();
  t.computed.resize(num_values);
  t.lost.resize(num_values);
  ops_.clear();
  collective_group_.clear();
  externals_.clear();
  external_index_.clear();
  values_.clear();
  value_op_.clear();
  // The next trace is likely as long as this one: growing the vectors op by op again was a
  // tenth of the host's recording time.
  ops_.reserve(t.ops.size());
  values_.reserve(num_values);
  value_op_.reserve(num_values);
  externals_.reserve(t.externals.size());
  return t;
}

void Trace::Settle(Taken& t) {
  for (size_t v = 0; v < t.live.size(); ++v) {
    if (t.live[v] && !t.live[v]->ready.load(std::memory_order_relaxed)) {
      if (t.computed[v]) {
        t.live[v]->buf = t.computed[v];
        t.live[v]->ready.store(true, std::memory_order_release);
      } else {
        t.live[v]->error = t.lost[v] ? t.lost[v]
                                     : std::make_shared<const std::string>(
                                           "tpu: internal error: a value was not computed");
      }
    }
  }
}

void Trace::BeginCapture() {
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  recorder_ = std::this_thread::get_id();
  capture_thread_.store(recorder_, std::memory_order_relaxed);
  capture_spoiled_ = false;
  capturing_.store(true, std::memory_order_relaxed);
}

std::optional<Trace::Program> Trace::EndCapture(const std::vector<LazyPtr>& results) {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_.store(false, std::memory_order_relaxed);
  bool usable = !capture_spoiled_;
  for (const LazyPtr& r : results) {
    usable &= r->ready.load(std::memory_order_acquire) ||
              (r->device == device_ && r->value < values_.size() &&
               values_[r->value].lock().get() == r.get());
  }
  if (!usable) {
    FlushLocked();
    return std::nullopt;
  }
  Program p;
  std::vector<uint32_t> outputs;
  std::vector<char> pending;
  for (const LazyPtr& r : results) pending.push_back(!r->ready.load(std::memory_order_acquire));
  if (!ops_.empty()) {
    Taken t = Take();
    std::vector<char> part(t.ops.size(), 0), needed(t.live.size(), 0);
    std::optional<OpError> failure;
    try {
      failure = RunPart(t, part, 0, needed, &p, &outputs);
    } catch (const std::exception& e) {
      failure = OpError(std::string("tpu: internal error: ") + e.what(), false);
    }
    Settle(t);
    if (failure) throw *failure;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!pending[i]) {
      p.output.push_back(-1);
      p.held.push_back(results[i]->buf);
      continue;
    }
    auto it = std::find(outputs.begin(), outputs.end(), results[i]->value);
    // Replayed op by op after the fused program failed: there is no one program to keep.
    if (!p.exe || it == outputs.end()) return std::nullopt;
    p.output.push_back(it - outputs.begin());
    p.held.push_back(nullptr);
  }
  return p;
}

void Trace::FlushLocked(const Lazy* wanted) {
  cut_due_ = false;
  if (ops_.empty()) return;
  struct Timed {  // host time of the flush, however it ends
    int64_t start = NowNs();
    ~Timed() { GetMetrics().flush_ns += NowNs() - start; }
  } timed;
  if (capturing_.load(std::memory_order_relaxed)) capture_spoiled_ = true;
  Taken t = Take();
  size_t num_values = t.live.size();

  // Part 0: the ops the wanted value depends on (all ops without a wanted value); part 1: the rest.
  // Collectives are not split off: every rank must run them in the order it issued them.
  size_t n = t.ops.size();
  std::vector<char> part(n, 0);
  bool collectives = std::any_of(t.ops.begin(), t.ops.end(),
                                 [](const Op& op) { return op.collective != nullptr; });
  if (wanted != nullptr && !collectives && wanted->value < num_values &&
      t.live[wanted->value].get() == wanted) {
    std::vector<char> cone(n, 0);
    std::vector<uint32_t> stack{t.value_op[wanted->value]};
    size_t size = 0;
    while (!stack.empty()) {
      uint32_t i = stack.back();
      stack.pop_back();
      if (cone[i]) continue;
      cone[i] = 1;
      ++size;
      for (int64_t src : t.ops[i].inputs) {
        if (src < 0) stack.push_back(t.value_op[~src]);
      }
    }
    if (size < n) {
      for (size_t i = 0; i < n; ++i) part[i] = cone[i] ? 0 : 1;
    }
  }
  // Values of part 0 that part 1 reads are results of part 0's program.
  std::vector<char> needed(num_values, 0);
  for (size_t i = 0; i < n; ++i) {
    if (part[i] == 0) continue;
    for (int64_t src : t.ops[i].inputs) {
      if (src < 0 && part[t.value_op[~src]] == 0) needed[~src] = 1;
    }
  }
  std::optional<OpError> failure;
  for (char which : {0, 1}) {
    if (std::find(part.begin(), part.end(), which) == part.end()) continue;
    std::optional<OpError> f;
    try {
      f = RunPart(t, part, which, needed);
    } catch (const std::exception& e) {
      // Not a program failure (a bug of ours): the values are lost, and say why when read.
      f = OpError(std::string("tpu: internal error: ") + e.what(), false);
      auto why = std::make_shared<const std::string>(f->what());
      for (size_t v = 0; v < num_values; ++v) {
        if (!t.computed[v]) t.lost[v] = why;
      }
    }
    if (f && !failure) failure = f;
  }
  Settle(t);
  if (failure) throw *failure;
}

std::optional<OpError> Trace::RunPart(Taken& t, const std::vector<char>& part, char which,
                                      const std::vector<char>& needed_later, Program* program,
                                      std::vector<uint32_t>* program_outputs) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    if (part[i] == which) idx.push_back(i);
  }
  // Parameters: externals, and values an earlier part computed, numbered by first use. Values
  // are numbered within the part, so the key does not depend on what else the trace held.
  std::unordered_map<int64_t, uint32_t> param_of;  // src -> parameter
  std::vector<uint32_t> arg_params;  // the parameter each op input that is one reads, in order
  std::vector<rt::BufferPtr> params;
  std::vector<ir::Type> logical;  // per parameter: the type of the value it holds
  std::vector<int64_t> param_src;
  std::vector<int64_t> local(t.live.size(), -1);  // value -> index among the part's values
  std::vector<uint32_t> outputs;                  // values the program returns
  std::vector<CollectivePtr> collectives;         // the other ranks run these with us
  Key key;
  int64_t next_local = 0;
  for (size_t i : idx) {
    const Op& op = t.ops[i];
    if (op.collective) collectives.push_back(op.collective);
    key.Mix(op.hash.lo);
    key.Mix(op.hash.hi);
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const int64_t src = op.inputs[j];
      if (src < 0 && local[~src] >= 0) {
        key.Mix(2 * static_cast<uint64_t>(local[~src]));
        continue;
      }
      if (src < 0 && !t.computed[~src]) return Replay(t, idx);  // depends on a lost value
      // A scalar the program reads (a Python number, a view offset) is a parameter per use:
      // equal scalars share a buffer, and sharing a parameter would make the program's
      // structure depend on which of its scalars happen to be equal.
      const bool scalar = src >= 0 && t.externals[src]->dims().empty();
      auto it = scalar ? param_of.end() : param_of.find(src);
      const uint32_t param =
          it != param_of.end() ? it->second : static_cast<uint32_t>(params.size());
      if (it == param_of.end()) {
        if (!scalar) param_of.emplace(src, param);
        params.push_back(src >= 0 ? t.externals[src] : t.computed[~src]);
        logical.push_back(op.g->type(op.g->params[j]));
        param_src.push_back(src);
      }
      arg_params.push_back(param);
      key.Mix(2 * static_cast<uint64_t>(param) + 1);
    }
    for (size_t r = 0; r < op.g->results.size(); ++r) {
      uint32_t v = op.first_value + static_cast<uint32_t>(r);
      local[v] = next_local++;
      if (t.live[v] || needed_later[v] || op.collective) {
        outputs.push_back(v);
        key.Mix(local[v]);
      }
    }
  }
  key.Mix(outputs.size());
  if (outputs.empty()) return std::nullopt;  // nothing observable: the ops need not run
  // A padded buffer (a bounded program's output) is another parameter type. The ranks of a
  // collective program must bring the same types, so it takes exact buffers.
  bool any_padded = false;
  for (size_t k = 0; k < params.size(); ++k) {
    if (params[k]->dims() == logical[k].dims) continue;
    if (!collectives.empty()) {
      params[k] = Unpadded(params[k], logical[k].dims);
      continue;
    }
    any_padded = true;
    key.Mix(k);
    for (int64_t d : params[k]->dims()) key.Mix(static_cast<uint64_t>(d));
  }
  // A capture's program runs again on the caller's buffers: it must not consume them.
  std::vector<std::pair<int64_t, int64_t>> donations =
      program == nullptr ? Donations(t, part, which, params, logical, param_src, outputs)
                         : std::vector<std::pair<int64_t, int64_t>>{};
  for (const auto& [param, result] : donations) {
    key.Mix(static_cast<uint64_t>(param) << 32 | static_cast<uint64_t>(result));
  }
  GetMetrics().flushes++;

  std::vector<rt::BufferPtr> outs;
  rt::ExecutablePtr exe;
  std::optional<ProgramLabel> label;
  if (Profiling()) {
    std::vector<std::string_view> names;
    for (size_t i : idx) names.push_back(t.ops[i].name);
    label.emplace(ProgramName(key, idx.size()), OpsByCount(names));
  }
  try {
    // With `padded`, each parameter takes its buffer as it is and cuts out the value it holds;
    // without, it is typed as that value (what bounded programs are made from).
    auto build_with = [&](bool padded) {
      ir::Graph fused;
      std::vector<ir::Value> param_values(params.size());
      for (size_t k = 0; k < params.size(); ++k) {
        const std::vector<int64_t>& dims = padded ? params[k]->dims() : logical[k].dims;
        param_values[k] = fused.Param({params[k]->dtype(), dims});
        if (dims != logical[k].dims) {
          param_values[k] =
              ir::Slice(fused, param_values[k], ir::Dims(dims.size(), 0), logical[k].dims);
        }
      }
      std::vector<ir::Value> vals(t.live.size(), -1);
      size_t next_arg = 0;
      for (size_t i : idx) {
        const Op& op = t.ops[i];
        std::vector<ir::Value> args;
        for (int64_t src : op.inputs) {
          args.push_back(src < 0 && local[~src] >= 0 ? vals[~src]
                                                     : param_values[arg_params[next_arg++]]);
        }
        std::vector<ir::Value> res = ir::Inline(fused, *op.g, args);
        std::copy(res.begin(), res.end(), vals.begin() + op.first_value);
      }
      for (uint32_t v : outputs) fused.results.push_back(vals[v]);
      if (padded) fused.donations = donations;
      return fused;
    };
    // The graph RunBounded builds (each parameter typed as its value) is the program to compile
    // when no parameter is padded, less the donations: it is not built twice.
    std::optional<ir::Graph> typed;
    auto build = [&] {
      if (!typed || any_padded) return build_with(true);
      ir::Graph g = std::move(*typed);
      typed.reset();
      g.donations = donations;
      return g;
    };
    std::optional<std::vector<rt::BufferPtr>> bounded;
    // Threaded ranks (a process group whose ranks record collectives into their traces) keep
    // exact programs: ranks that bring padded and exact values to one meeting would disagree.
    bool ranks = false;
    {
      std::lock_guard<std::mutex> lock(g_meet_mu);
      ranks = static_cast<bool>(g_meet);
    }
    if (collectives.empty() && program == nullptr && !ranks) {
      auto typed_graph = [&]() -> const ir::Graph& {
        if (!typed) typed = build_with(false);
        return *typed;
      };
      bounded = RunBounded({key.a, key.b}, typed_graph, params, &donations, device_,
                           static_cast<int64_t>(idx.size()));
    }
    if (!bounded) {
      // An exact program takes a padded buffer whole, and returns the smaller value: not its type.
      std::erase_if(donations, [&](const auto& d) {
        return params[d.first]->dims() != logical[d.first].dims;
      });
    }
    if (bounded) {
      outs = std::move(*bounded);
    } else if (collectives.empty()) {
      exe = Executable({key.a, key.b}, build);
      outs = Execute(*exe, params, device_, static_cast<int64_t>(idx.size()));
    } else {
      Meeting m{collectives, true, HexKey(key.a, key.b)};
      for (const CollectivePtr& c : collectives) {
        m.signature += "; " + c->group + "/" + std::to_string(c->seq) + " " + c->what;
      }
      outs = Meet(m, device_, params, {key.a, key.b}, build);
      bool alone = idx.size() == collectives.size();
      (alone ? GetMetrics().lone_collectives : GetMetrics().fused_collectives) +=
          static_cast<int64_t>(collectives.size());
    }
  } catch (const CollectiveMismatch&) {
    return RunSegments(t, idx);  // the ranks' programs differ: collectives one by one
  } catch (const OpError& e) {
    return Replay(t, idx, &e);  // the meeting failed: what does not depend on it still runs
  } catch (const rt::Error& e) {
    if (std::getenv("TORCHTPU_FUSED_DEBUG") != nullptr) {
      std::fprintf(stderr, "torchtpu: a fused program of %zu ops failed; replaying them: %.400s\n",
                   idx.size(), e.what());
    }
    return Replay(t, idx);
  }
  GetMetrics().donated_buffers += static_cast<int64_t>(donations.size());
  for (size_t k = 0; k < outputs.size(); ++k) t.computed[outputs[k]] = std::move(outs[k]);
  if (program != nullptr) {
    if (!collectives.empty()) return std::nullopt;  // not one device's program to keep
    program->exe = std::move(exe);
    program->params = std::move(params);
    *program_outputs = std::move(outputs);
  }
  return std::nullopt;
}

std::vector<std::pair<int64_t, int64_t>> Trace::Donations(const Taken& t,
                                                          const std::vector<char>& part, char which,
                                                          const std::vector<rt::BufferPtr>& params,
                                                          const std::vector<ir::Type>& logical,
                                                          const std::vector<int64_t>& param_src,
                                                          const std::vector<uint32_t>& outputs) {
  std::vector<std::pair<int64_t, int64_t>> donations;
  if (!Donating().load(std::memory_order_relaxed)) return donations;
  // Candidates: large buffers held by the trace's externals and by `params` only (the tensor
  // that held each was overwritten, so no one can read it after the program). Most flushes
  // have none, and stop here.
  std::vector<size_t> candidates;
  for (size_t p = 0; p < params.size(); ++p) {
    if (param_src[p] >= 0 && params[p].use_count() == 2 &&
        params[p]->nbytes() >= MinDonatedBytes() && !params[p]->dims().empty()) {
      candidates.push_back(p);
    }
  }
  if (candidates.empty()) return donations;
  std::vector<char> elsewhere(t.externals.size(), 0);  // read by the other part too
  for (size_t i = 0; i < t.ops.size(); ++i) {
    if (part[i] == which) continue;
    for (int64_t src : t.ops[i].inputs) {
      if (src >= 0) elsewhere[src] = 1;
    }
  }
  std::vector<char> taken(outputs.size(), 0);
  std::vector<char> derived(t.live.size());
  for (size_t p : candidates) {
    if (elsewhere[param_src[p]]) continue;
    // The output must be computed from the buffer (the update that replaced it): given to an
    // unrelated output, XLA would have to copy the buffer before its last read.
    std::fill(derived.begin(), derived.end(), 0);
    for (size_t i = 0; i < t.ops.size(); ++i) {
      const Op& op = t.ops[i];
      if (part[i] != which) continue;
      bool from_b = std::any_of(op.inputs.begin(), op.inputs.end(), [&](int64_t src) {
        return src == param_src[p] || (src < 0 && derived[~src]);
      });
      for (size_t r = 0; from_b && r < op.g->results.size(); ++r) derived[op.first_value + r] = 1;
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Op& op = t.ops[t.value_op[outputs[o]]];
      // XLA:CPU cannot run a collective into an aliased parameter: it reduces into a temporary
      // and copies it over, which made a 64 MB all_reduce about 20% slower than a fresh buffer.
      if (op.collective != nullptr) continue;
      const ir::Type& type = op.g->type(op.g->results[outputs[o] - op.first_value]);
      if (!taken[o] && derived[outputs[o]] && type == logical[p]) {
        taken[o] = 1;
        donations.emplace_back(p, o);
        break;
      }
    }
  }
  return donations;
}

std::optional<OpError> Trace::RunSegments(Taken& t, const std::vector<size_t>& idx) {
  // Segment of each op: a collective is a segment of its own.
  std::vector<int64_t> seg(t.ops.size(), -1);
  int64_t n = 0;
  for (size_t i : idx) {
    if (t.ops[i].collective) {
      seg[i] = ++n;
      ++n;
    } else {
      seg[i] = n;
    }
  }
  // Values a later segment reads are results of their own segment's program.
  std::vector<char> needed(t.live.size(), 0);
  for (size_t i : idx) {
    for (int64_t src : t.ops[i].inputs) {
      if (src < 0 && seg[t.value_op[~src]] < seg[i]) needed[~src] = 1;
    }
  }
  std::optional<OpError> first;
  for (int64_t s = 0; s <= n; ++s) {
    std::vector<size_t> ops;
    std::vector<char> mask(t.ops.size(), 0);
    for (size_t i : idx) {
      if (seg[i] == s) ops.push_back(i), mask[i] = 1;
    }
    if (ops.empty()) continue;
    std::optional<OpError> f =
        t.ops[ops[0]].collective ? Replay(t, ops) : RunPart(t, mask, 1, needed);
    if (f && !first) first = f;
  }
  return first;
}

std::optional<OpError> Trace::Replay(Taken& t, const std::vector<size_t>& idx, const OpError* met) {
  std::optional<OpError> first;
  for (size_t i : idx) {
    const Op& op = t.ops[i];
    std::vector<rt::BufferPtr> args;
    std::shared_ptr<const std::string> cause;
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const int64_t src = op.inputs[j];
      rt::BufferPtr b = src >= 0 ? t.externals[src] : t.computed[~src];
      if (src < 0 && t.lost[~src]) cause = t.lost[~src];
      // A padded buffer (a bounded program's output) goes in as the value it holds.
      const std::vector<int64_t>& dims = op.g->type(op.g->params[j]).dims;
      b = Unpadded(std::move(b), dims);
      args.push_back(std::move(b));
    }
    size_t n = op.g->results.size();
    if (!cause) {
      try {
        std::vector<rt::BufferPtr> outs;
        if (!op.collective) {
          outs = Run(*op.g, args, device_);
        } else if (met != nullptr) {
          throw *met;
        } else {
          Meeting m{{op.collective}, false, op.collective->what};
          outs = Meet(m, device_, args, op.hash, [&] { return *op.g; });
          GetMetrics().lone_collectives++;
        }
        std::move(outs.begin(), outs.end(), t.computed.begin() + op.first_value);
        continue;
      } catch (const rt::Error& e) {
        OpError err = DescribeFailure(e, Describe(op.name, op.origin));
        if (!first) first = err;
        cause = std::make_shared<const std::string>(err.what());
      } catch (const OpError& e) {
        std::string where = op.origin ? " (recorded at " + op.origin->Describe() + ")" : "";
        OpError err(e.what() + where, e.out_of_memory, e.distributed);
        if (!first) first = err;
        cause = std::make_shared<const std::string>(err.what());
      }
    }
    std::fill(t.lost.begin() + op.first_value, t.lost.begin() + op.first_value + n, cause);
  }
  return first;
}

namespace {
std::mutex g_traces_mu;                          // taken only to create a trace
std::array<std::atomic<Trace*>, 64> g_traces{};  // live until exit, like the client
}  // namespace

Trace& TraceOf(int device) {
  std::atomic<Trace*>& slot = g_traces.at(static_cast<size_t>(device));
  if (Trace* t = slot.load(std::memory_order_acquire)) return *t;  // every op takes this path
  std::lock_guard<std::mutex> lock(g_traces_mu);
  if (slot.load(std::memory_order_relaxed) == nullptr) {
    slot.store(new Trace(device), std::memory_order_release);
  }
  return *slot.load(std::memory_order_relaxed);
}

void FlushAllTraces() {
  for (auto& slot : g_traces) {
    if (Trace* t = slot.load(std::memory_order_acquire)) t->Flush();
  }
}

}  // namespace tpu::eager
