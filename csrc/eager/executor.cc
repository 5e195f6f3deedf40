#include "eager/executor.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "eager/bounded.h"
#include "eager/origin.h"
#include "eager/profile.h"
#include "eager/trace.h"
#include "runtime/env.h"

namespace tpu::eager {

namespace {
// Runtime objects live until the process ends: destroying them from static destructors races
// with the plugin's own teardown.
rt::Client* g_client = nullptr;
std::atomic<int> g_mode{static_cast<int>(Mode::kFused)};

// Loaded executables, least recently used last. The number is bounded: every loaded program
// holds JIT code mappings, and a process that runs out of them (vm.max_map_count) cannot load
// another; an evicted program comes back from the persistent cache.
struct ExecutableCache {
  using Entry = std::pair<ir::Hash128, rt::ExecutablePtr>;
  std::mutex mu;
  std::list<Entry> lru;
  std::unordered_map<ir::Hash128, std::list<Entry>::iterator, ir::Hash128Hasher> map;
};
ExecutableCache& Cache() {
  static auto* c = new ExecutableCache();
  return *c;
}

// Last output of each device, so Synchronize can wait for everything before it: PJRT runs
// programs on one device in issue order.
struct LastOutputs {
  std::mutex mu;
  std::unordered_map<int, std::weak_ptr<rt::Buffer>> last;
};
LastOutputs& Last() {
  static auto* l = new LastOutputs();
  return *l;
}

// Notes a program's outputs on `device`, so that Synchronize and events wait for them.
void NoteOutputs(const std::vector<rt::BufferPtr>& outs, int device) {
  if (outs.empty()) return;
  std::lock_guard<std::mutex> lock(Last().mu);
  Last().last[device] = outs.back();
}

struct ScalarKey {
  uint64_t bits;
  int dtype;
  int device;
  bool operator==(const ScalarKey& o) const {
    return bits == o.bits && dtype == o.dtype && device == o.device;
  }
};
struct ScalarKeyHash {
  size_t operator()(const ScalarKey& k) const {
    return std::hash<uint64_t>()(k.bits) ^ (static_cast<size_t>(k.dtype) << 48) ^ (k.device * 7919);
  }
};
}  // namespace

namespace {
std::mutex g_disk_mu;
rt::DiskCache* g_disk = nullptr;  // lives until exit, like the client
std::string g_version;

// The disk key: the program's text, how it is compiled, and exactly which plugin and torchtpu
// compile it (a serialized executable only loads into the library version that produced it).
// The text, not the graph's structural hash: an entry outlives the build that wrote it, and a
// stale entry under a structural hash once served another program (a 0-d zero_ read back its
// old value).
std::string DiskKey(const std::string& mlir, const std::vector<int>& device_ids) {
  static const uint64_t plugin = [] {
    rt::Client& cl = Client();
    std::string id = cl.plugin_path() + "|" + cl.platform_name() + "|" +
                     std::to_string(cl.api_major()) + "." + std::to_string(cl.api_minor()) + "|" +
                     std::to_string(rt::FileHash(cl.plugin_path()));
    return rt::BytesHash(id.data(), id.size());
  }();
  std::string opts = rt::CompileOptionsBytes(device_ids) + "|" + g_version;
  const uint64_t lo = rt::BytesHash(mlir.data(), mlir.size(), 0x243f6a8885a308d3ULL);
  const uint64_t hi = rt::BytesHash(mlir.data(), mlir.size(), 0x13198a2e03707344ULL);
  uint64_t a = rt::BytesHash(opts.data(), opts.size(), plugin ^ lo);
  uint64_t b = rt::BytesHash(opts.data(), opts.size(), plugin ^ hi ^ 0x5bd1e995);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

std::vector<rt::ShapedType> OutputTypes(const ir::Graph& g) {
  std::vector<rt::ShapedType> outs;
  for (ir::Value r : g.results) outs.push_back({g.type(r).dtype, g.type(r).dims});
  return outs;
}

rt::ExecutablePtr CompileTimed(const ir::Graph& g, const std::string& mlir,
                               const std::vector<int>& device_ids) {
  Metrics& m = GetMetrics();
  int64_t start = NowNs();
  rt::ExecutablePtr exe = Client().CompileReplicated(mlir, OutputTypes(g), device_ids);
  m.compile_ns += NowNs() - start;
  m.compiles++;
  if (Profiling()) NoteCompile(start, false);
  return exe;
}

// A miss in memory: load from disk, or compile (once across processes) and store.
rt::ExecutablePtr LoadOrCompile(const ir::Graph& g, const std::vector<int>& device_ids) {
  rt::DiskCache* disk;
  {
    std::lock_guard<std::mutex> lock(g_disk_mu);
    disk = g_disk;
  }
  const std::string mlir = ir::PrintModule(g);
  if (disk == nullptr) return CompileTimed(g, mlir, device_ids);
  std::string key = DiskKey(mlir, device_ids);
  auto lock = disk->LockKey(key);
  int64_t start = NowNs();
  if (std::optional<std::string> bytes = disk->Load(key)) {
    try {
      rt::ExecutablePtr exe = Client().Deserialize(*bytes, OutputTypes(g));
      GetMetrics().disk_hits++;
      if (Profiling()) NoteCompile(start, true);
      return exe;
    } catch (const rt::Error&) {
      disk->Remove(key);  // from another plugin build after all: recompile and replace
    }
  }
  rt::ExecutablePtr exe = CompileTimed(g, mlir, device_ids);
  try {
    disk->Store(key, Client().Serialize(*exe));
  } catch (const rt::Error&) {
    // A plugin that cannot serialize only loses the persistent cache.
  }
  return exe;
}
}  // namespace

std::string ConfigureDiskCache(const std::string& dir, const std::string& version,
                               int64_t max_bytes) {
  std::lock_guard<std::mutex> lock(g_disk_mu);
  g_version = version;
  g_disk = nullptr;  // an earlier cache object is leaked on purpose (it may be in use)
  if (dir.empty()) return "";
  std::string warning;
  g_disk = rt::DiskCache::Open(dir, max_bytes, &warning).release();
  return warning;
}

rt::DiskCacheStats DiskCacheStats() {
  std::lock_guard<std::mutex> lock(g_disk_mu);
  return g_disk ? g_disk->stats() : rt::DiskCacheStats{};
}

Metrics& GetMetrics() {
  static Metrics m;
  return m;
}
Mode GetMode() { return static_cast<Mode>(g_mode.load()); }
void SetMode(Mode m) {
  Mode old = static_cast<Mode>(g_mode.exchange(static_cast<int>(m)));
  if (old == Mode::kFused && m != Mode::kFused) FlushAllTraces();
}

namespace {
std::atomic<OriginCapturer> g_capturer{nullptr};
}  // namespace

void SetOriginCapturer(OriginCapturer capture) { g_capturer.store(capture); }
OriginPtr CaptureOrigin() {
  OriginCapturer c = g_capturer.load(std::memory_order_relaxed);
  return c ? c() : nullptr;
}

namespace {
std::mutex g_init_mu;
std::unique_ptr<rt::ClientOptions> g_options;
std::string g_unavailable;  // why there is no client to configure
std::atomic<bool> g_ready{false};
}  // namespace

void Configure(const rt::ClientOptions& options) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  g_options = std::make_unique<rt::ClientOptions>(options);
}

void Init(const rt::ClientOptions& options) {
  Configure(options);
  Client();
}

void SetUnavailable(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  g_unavailable = why;
}

bool Initialized() { return g_ready.load(); }
bool Configured() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  return g_options != nullptr;
}

rt::Client& Client() {
  if (g_ready.load(std::memory_order_acquire)) return *g_client;
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (!g_client) {
    if (!g_options) {
      throw rt::Error(9, g_unavailable.empty()
                             ? "torchtpu runtime is not configured (import torchtpu)"
                             : g_unavailable);
    }
    // At first use, not at import: a malformed setting is then the first op's error.
    g_client = new rt::Client(g_options->platform == "cuda" ? rt::GpuMemoryFromEnv(*g_options)
                                                            : *g_options);
    g_ready.store(true, std::memory_order_release);
  }
  return *g_client;
}

namespace {
size_t MaxLoadedPrograms() {
  static const size_t n = rt::EnvCount("TORCHTPU_MAX_LOADED_PROGRAMS", 1000);
  return n;
}
}  // namespace

namespace {
// Unloads the least recently used programs until at most `keep` stay loaded; returns how many
// it unloaded. A program may still be running: the work issued so far finishes first.
size_t Unload(size_t keep) {
  ExecutableCache& cache = Cache();
  std::vector<rt::ExecutablePtr> evicted;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    while (cache.lru.size() > keep) {
      cache.map.erase(cache.lru.back().first);
      evicted.push_back(std::move(cache.lru.back().second));
      cache.lru.pop_back();
    }
  }
  if (evicted.empty()) return 0;
  std::vector<std::shared_ptr<rt::Buffer>> last;
  {
    std::lock_guard<std::mutex> lock(Last().mu);
    for (auto& [device, weak] : Last().last) {
      if (auto b = weak.lock()) last.push_back(std::move(b));
    }
  }
  for (const auto& b : last) b->Await();
  return evicted.size();  // the executables are destroyed here, after that work
}

// XLA:CPU's JIT ran out of memory or of code mappings (its message quotes errno's ENOMEM).
bool OutOfJitResources(const rt::Error& e) {
  std::string_view msg = e.what();
  return e.out_of_memory() || msg.find("Cannot allocate memory") != std::string_view::npos;
}
}  // namespace

rt::ExecutablePtr Executable(const ir::Hash128& key, const std::function<ir::Graph()>& build,
                             const std::vector<int>& device_ids) {
  ExecutableCache& cache = Cache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.map.find(key);
    if (it != cache.map.end()) {
      GetMetrics().cache_hits++;
      cache.lru.splice(cache.lru.begin(), cache.lru, it->second);
      return it->second->second;
    }
  }
  // The disk cache is keyed by the program's text: `key` may be a fused trace's key, whose
  // meaning is private to this build of torchtpu.
  ir::Graph g = build();
  // Out of JIT resources: unload the older half of the loaded programs (they come back from
  // the persistent cache when needed) and try once more; a second failure is the op's error.
  auto retry = [&] {
    size_t loaded;
    {
      std::lock_guard<std::mutex> lock(cache.mu);
      loaded = cache.lru.size();
    }
    if (Unload(loaded / 2) == 0) throw;  // nothing to free: the failure stands
    GetMetrics().retried_loads++;
    return LoadOrCompile(g, device_ids);
  };
  rt::ExecutablePtr exe;
  try {
    exe = LoadOrCompile(g, device_ids);
  } catch (const rt::Error& e) {
    if (!OutOfJitResources(e)) throw;
    exe = retry();
  } catch (const std::bad_alloc&) {
    exe = retry();
  }
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    if (cache.map.find(key) == cache.map.end()) {
      cache.lru.emplace_front(key, exe);
      cache.map.emplace(key, cache.lru.begin());
    }
  }
  Unload(MaxLoadedPrograms());
  return exe;
}

std::vector<rt::BufferPtr> Execute(const rt::Executable& exe,
                                   const std::vector<rt::BufferPtr>& inputs, int device,
                                   int64_t ops) {
  std::vector<PJRT_Buffer*> raw;
  raw.reserve(inputs.size());
  for (const auto& b : inputs) raw.push_back(b->raw());
  int64_t start = NowNs();
  std::vector<rt::BufferPtr> outs = Client().Execute(exe, raw, device);
  GetMetrics().execute_ns += NowNs() - start;
  if (Profiling()) NoteRun(exe, ops, start, outs, device);
  GetMetrics().executions++;
  if (!outs.empty()) NoteOutputs(outs, device);
  if (GetMode() == Mode::kDebug) {
    for (const auto& b : outs) b->Await();
  }
  return outs;
}

namespace {

// `key`: g's StructuralHash.
std::vector<rt::BufferPtr> RunHashed(const ir::Graph& g, const ir::Hash128& key,
                                     const std::vector<rt::BufferPtr>& inputs, int device) {
  // The memory key is the structural hash too: mark it so it can never equal a trace's key.
  rt::ExecutablePtr exe = Executable({key.lo, key.hi ^ 0x5354524943540000ULL}, [&] { return g; });
  return Execute(*exe, inputs, device);
}

std::vector<LazyPtr> RunNow(const ir::Graph& g, const ir::Hash128& key,
                            const std::vector<LazyPtr>& inputs, int device, const std::string& op) {
  std::vector<rt::BufferPtr> bufs;
  bufs.reserve(inputs.size());
  for (const LazyPtr& in : inputs) bufs.push_back(Materialize(in));
  std::optional<ProgramLabel> label;
  if (Profiling()) label.emplace(op);
  std::vector<LazyPtr> outs;
  for (rt::BufferPtr& b : RunHashed(g, key, bufs, device)) {
    outs.push_back(Lazy::Of(std::move(b), device));
  }
  return outs;
}

}  // namespace

std::vector<rt::BufferPtr> Run(const ir::Graph& g, const std::vector<rt::BufferPtr>& inputs,
                               int device) {
  return RunHashed(g, ir::StructuralHash(g), inputs, device);
}

std::vector<LazyPtr> Submit(ir::Graph g, const std::vector<LazyPtr>& inputs, int device,
                            std::string op) {
  if (GetMode() == Mode::kFused || TraceOf(device).CapturingHere()) {
    return TraceOf(device).Record(std::move(g), inputs, std::move(op), CaptureOrigin());
  }
  return RunNow(g, ir::StructuralHash(g), inputs, device, op);
}

std::vector<LazyPtr> Submit(std::shared_ptr<const ir::Graph> g, const ir::Hash128& h,
                            const std::vector<LazyPtr>& inputs, int device, std::string op) {
  if (GetMode() == Mode::kFused || TraceOf(device).CapturingHere()) {
    return TraceOf(device).Record(std::move(g), h, inputs, std::move(op), CaptureOrigin());
  }
  return RunNow(*g, h, inputs, device, op);
}

rt::BufferPtr Materialize(const LazyPtr& v) {
  if (v->ready.load(std::memory_order_acquire)) return Unpadded(v->buf, v->type.dims);
  return Unpadded(TraceOf(v->device).Materialize(v), v->type.dims);
}

void Flush(int device) { TraceOf(device).Flush(); }

OpError DescribeFailure(const rt::Error& e, const std::string& what) {
  std::string msg = e.what();
  if (e.out_of_memory()) {
    return OpError("tpu out of memory while running " + what + ": " + msg.substr(0, 300), true);
  }
  if (OutOfJitResources(e)) {
    return OpError("tpu could not load the program of " + what +
                       ": XLA ran out of memory for compiled code, even after unloading older "
                       "programs (TORCHTPU_MAX_LOADED_PROGRAMS bounds how many stay loaded): " +
                       msg.substr(0, 300),
                   false);
  }
  // Compiler diagnostics quote the whole module: keep only the first error line.
  if (msg.rfind("PJRT_Client_Compile", 0) == 0) {
    size_t at = msg.find("error: ");
    std::string first = at == std::string::npos ? msg : msg.substr(at + 7);
    first = first.substr(0, std::min<size_t>(first.find('\n'), 300));
    return OpError(
        "tpu failed to compile " + what + " (this is a torchtpu bug, please report it): " + first,
        false);
  }
  return OpError("tpu failed to run " + what + ": " + msg.substr(0, 300), false);
}

// Scalars a program reads (Python numbers, view offsets) are uploaded once per value and kept
// while they are reused: an LRU of kKeptScalars. A value enters it when it is asked for again
// after its last buffer died: a value that recurs over time (a learning rate, a mask's fill),
// whatever the timing. One asked for while a buffer of it lives gets that buffer and is not kept,
// so values used many times in one step and never again (AdamW's bias corrections, an offset in
// a loop over positions) do not churn the LRU. Keeping on any reuse while alive made the kept
// set depend on whether the last program holding a value had finished: on a loaded machine
// constants joined the LRU late, and a training loop's live buffers grew between readings.
// Sharing a living buffer also means equal scalars of one trace always share a parameter, so a
// program's key depends on the values it reads and not on what ran before.
LazyPtr ScalarBuffer(const void* bits, rt::DType t, int device) {
  static const size_t kKeptScalars = rt::EnvCount("TORCHTPU_KEPT_SCALARS", 128);
  static const size_t kMinPrune = rt::EnvCount("TORCHTPU_SCALAR_PRUNE_AT", 1024);
  struct Cache {
    std::mutex mu;
    std::list<std::pair<ScalarKey, LazyPtr>> lru;  // most recently used first
    std::unordered_map<ScalarKey, decltype(lru)::iterator, ScalarKeyHash> kept;
    // Every one handed out. A trace holds its inputs' buffers, not their lazy values, so a
    // buffer can outlive the value it was handed out as: either counts as alive.
    struct Alive {
      std::weak_ptr<Lazy> lazy;
      std::weak_ptr<rt::Buffer> buf;
    };
    std::unordered_map<ScalarKey, Alive, ScalarKeyHash> alive;
    size_t prune_at = kMinPrune;
  };
  if (t == rt::DType::kF64 && !HasFloat64()) {  // a TPU has no float64 buffers at all
    throw rt::Error(3, "tpu: a float64 scalar was made on a platform without float64");
  }
  static auto& c = *new Cache();
  ScalarKey key{0, static_cast<int>(t), device};
  std::memcpy(&key.bits, bits, rt::ItemSize(t));
  std::unique_lock<std::mutex> lock(c.mu);
  auto it = c.kept.find(key);
  if (it != c.kept.end()) {
    c.lru.splice(c.lru.begin(), c.lru, it->second);
    return it->second->second;
  }
  auto living = [&]() -> LazyPtr {
    auto a = c.alive.find(key);
    if (a == c.alive.end()) return nullptr;
    if (LazyPtr l = a->second.lazy.lock()) return l;
    rt::BufferPtr buf = a->second.buf.lock();
    if (buf == nullptr) return nullptr;
    LazyPtr l = Lazy::Of(std::move(buf), device);
    a->second.lazy = l;
    return l;
  };
  if (LazyPtr b = living()) return b;
  lock.unlock();  // the upload runs outside the lock
  LazyPtr b = Lazy::Of(Client().FromHost(bits, t, {}, device), device);
  GetMetrics().scalar_uploads++;
  lock.lock();
  if (LazyPtr other = living()) return other;  // another thread uploaded it meanwhile
  // It was here before and died: it recurs, keep it.
  if (c.alive.contains(key) && !c.kept.contains(key)) {
    c.lru.emplace_front(key, b);
    c.kept.emplace(key, c.lru.begin());
    if (c.lru.size() > kKeptScalars) {
      c.kept.erase(c.lru.back().first);
      c.lru.pop_back();
    }
  }
  c.alive[key] = {b, b->buf};
  if (c.alive.size() > c.prune_at) {
    std::erase_if(c.alive, [](const auto& e) { return e.second.buf.expired(); });
    c.prune_at = std::max(kMinPrune, 2 * c.alive.size());
  }
  return b;
}

std::vector<std::vector<rt::BufferPtr>> ExecuteReplicated(
    const rt::Executable& exe, const std::vector<std::vector<rt::BufferPtr>>& inputs,
    const std::vector<int>& devices) {
  std::vector<std::vector<PJRT_Buffer*>> raw(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& b : inputs[i]) raw[i].push_back(b->raw());
  }
  int64_t start = NowNs();
  auto outs = Client().ExecuteReplicated(exe, raw, devices);
  GetMetrics().execute_ns += NowNs() - start;
  GetMetrics().executions++;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (Profiling()) NoteRun(exe, 1, start, outs[i], devices[i]);  // a row on each device
    NoteOutputs(outs[i], devices[i]);
    if (GetMode() == Mode::kDebug) {
      for (const auto& b : outs[i]) b->Await();
    }
  }
  return outs;
}

namespace {
std::atomic<bool> g_refuse_float64{false};
}  // namespace

bool HasFloat64() {
  // Asked for every float scalar: the platform is compared once, when the client exists.
  static const bool tpu = Client().platform_name() == "tpu";
  return !tpu && !g_refuse_float64.load(std::memory_order_relaxed);
}
void RefuseFloat64(bool on) { g_refuse_float64.store(on, std::memory_order_relaxed); }

std::weak_ptr<rt::Buffer> LastOutput(int device) {
  std::lock_guard<std::mutex> lock(Last().mu);
  auto it = Last().last.find(device);
  return it == Last().last.end() ? std::weak_ptr<rt::Buffer>() : it->second;
}

void Synchronize(int device) {
  Flush(device);
  rt::BufferPtr last;
  {
    std::lock_guard<std::mutex> lock(Last().mu);
    auto it = Last().last.find(device);
    if (it != Last().last.end()) last = it->second.lock();
  }
  if (last) last->Await();
}

}  // namespace tpu::eager
