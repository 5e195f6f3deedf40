#include "eager/checks.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "runtime/env.h"

namespace tpu::eager {

namespace {

struct Kept {
  LazyPtr flag;
  CheckTexts texts;
  std::string op;
  OriginPtr origin;
};

struct Device {
  std::mutex mu;
  std::deque<Kept> kept;
};

Device& Of(int device) {
  static std::mutex mu;
  static auto& all = *new std::unordered_map<int, std::unique_ptr<Device>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& d = all[device];
  if (!d) d = std::make_unique<Device>();
  return *d;
}

// A training loop that never reads would keep a flag per step: past this many, the computed
// ones are looked at when the next is kept (a failure found then waits for the next read).
const size_t kPollAt = rt::EnvCount("TORCHTPU_CHECK_POLL_AT", 256);

void ReadFlag(const rt::BufferPtr& buf, int64_t flag[2]) { buf->ToHost(flag, 2 * sizeof(int64_t)); }

bool Computed(const LazyPtr& v) {
  return v->ready.load(std::memory_order_acquire) && v->buf && v->buf->IsReady();
}

std::string Where(const Kept& k) {
  return " (raised by " + k.op + (k.origin ? " recorded at " + k.origin->Describe() : "") + ")";
}

}  // namespace

std::atomic<bool>& Enabled() {
  static std::atomic<bool> on = [] {
    const char* env = std::getenv("TORCHTPU_CHECKS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

bool ChecksEnabled() { return Enabled().load(std::memory_order_relaxed); }
void SetChecksEnabled(bool on) { Enabled().store(on, std::memory_order_relaxed); }

std::optional<OpError> CheckError(const int64_t flag[2], const std::vector<CheckText>& texts,
                                  const std::string& where) {
  if (flag[0] <= 0 || static_cast<size_t>(flag[0]) > texts.size()) return std::nullopt;
  const CheckText& t = texts[flag[0] - 1];
  std::string msg = t.message;
  if (size_t at = msg.find("{}"); at != std::string::npos) {
    msg.replace(at, 2, std::to_string(flag[1]));
  }
  OpError e(msg + where, false);
  e.index_error = t.index_error;
  return e;
}

void AfterSubmit(const LazyPtr& flag, const CheckTexts& texts, const std::string& op) {
  if (flag->ready.load(std::memory_order_acquire)) {  // it ran: strict or debug mode
    int64_t bits[2];
    ReadFlag(flag->buf, bits);
    if (auto e = CheckError(bits, *texts, "")) throw *e;
    return;
  }
  Device& d = Of(flag->device);
  std::lock_guard<std::mutex> lock(d.mu);
  d.kept.push_back({flag, texts, op, CaptureOrigin()});
  if (d.kept.size() < kPollAt) return;
  std::deque<Kept> still;
  for (Kept& k : d.kept) {
    int64_t bits[2] = {0, 0};
    if (Computed(k.flag)) ReadFlag(k.flag->buf, bits);
    if (!Computed(k.flag) || bits[0] != 0) still.push_back(std::move(k));
  }
  d.kept = std::move(still);
}

void RaiseFailedChecks(int device, bool wait) {
  Device& d = Of(device);
  std::deque<Kept> taken;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    taken.swap(d.kept);
  }
  std::optional<OpError> first;
  std::deque<Kept> still;
  for (Kept& k : taken) {
    if (first || !(wait || Computed(k.flag))) {
      still.push_back(std::move(k));
      continue;
    }
    int64_t bits[2];
    try {
      ReadFlag(Materialize(k.flag), bits);
    } catch (const std::exception&) {
      continue;  // the op's program failed: that error is raised where its results are read
    }
    first = CheckError(bits, *k.texts, Where(k));
  }
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.kept.insert(d.kept.begin(), std::make_move_iterator(still.begin()),
                  std::make_move_iterator(still.end()));
  }
  if (first) throw *first;
}

}  // namespace tpu::eager
