#include "distributed/recorded.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "distributed/rendezvous.h"
#include "eager/trace.h"

namespace tpu::dist {

namespace {

std::mutex g_mu;
std::map<std::tuple<std::string, uint64_t, int>, int> g_at;  // (group, seq, rank) -> device

// Fused meetings: taken around joining one, so that a watermark raised meanwhile cancels it.
std::mutex g_fuse_mu;
std::map<std::string, uint64_t> g_single_through;  // group -> collectives up to this run alone
std::map<std::string, std::pair<std::string, uint64_t>> g_pending;  // key -> (group, seq)

void Forget(const eager::Meeting& m) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const eager::CollectivePtr& c : m.collectives) g_at.erase({c->group, c->seq, c->rank});
}

// The device whose trace holds collective `seq` of rank `rank` (-1: none); `take` forgets it.
int RecordedAt(const std::string& group, uint64_t seq, int rank, bool take) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_at.find({group, seq, rank});
  if (it == g_at.end()) return -1;
  int device = it->second;
  if (take) g_at.erase(it);
  return device;
}

// Runs the trace of `device` on a thread of its own: its meeting (and, if the ranks' programs
// differ, its collectives one by one) must not wait inside another rank's wait.
void FlushElsewhere(int device) {
  std::thread([device] {
    try {
      eager::TraceOf(device).Flush();
    } catch (const std::exception&) {
      // The values that failed carry the error; their rank sees it when it reads them.
    }
  }).detach();
}

bool RunsAlone(const std::string& group, uint64_t seq) {
  auto it = g_single_through.find(group);
  return it != g_single_through.end() && seq <= it->second;
}

// This rank runs collectives up to `last` one by one: so must every rank, and a fused meeting
// that starts at one of them will not complete.
void SingleThrough(const std::string& group, uint64_t last) {
  std::lock_guard<std::mutex> lock(g_fuse_mu);
  uint64_t& w = g_single_through.try_emplace(group, last).first->second;
  w = std::max(w, last);
  for (auto it = g_pending.begin(); it != g_pending.end();) {
    if (it->second.first == group && it->second.second <= w) {
      Cancel(it->first, "another rank runs this collective on its own");
      it = g_pending.erase(it);
    } else {
      ++it;
    }
  }
}

struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool mismatch = false;
  std::string error;  // empty: outputs hold the results
  std::vector<rt::BufferPtr> outputs;
};

std::vector<rt::BufferPtr> Meet(const eager::Meeting& m, int device,
                                const std::vector<rt::BufferPtr>& inputs, const ir::Hash128& key,
                                const std::function<ir::Graph()>& build) {
  const eager::CollectiveOp& c = *m.collectives.at(0);
  Forget(m);
  // A single collective meets where an unrecorded one would (process_group_tpu.cc).
  const std::string where = (m.fused ? "fused:" : "") + c.group + "/" + std::to_string(c.seq);
  auto out = std::make_shared<Outcome>();
  Part part;
  part.device = device;
  part.signature = m.signature;
  part.inputs = inputs;
  part.done = [out](std::vector<rt::BufferPtr> outputs, const std::string* error, bool mismatch) {
    std::lock_guard<std::mutex> lock(out->mu);
    out->done = true;
    out->mismatch = mismatch;
    if (error != nullptr) out->error = *error;
    out->outputs = std::move(outputs);
    out->cv.notify_all();
  };
  auto launch = [&](const std::vector<Part>& parts) { return RunReplicated(parts, key, build); };
  if (m.fused) {
    std::lock_guard<std::mutex> lock(g_fuse_mu);
    if (RunsAlone(c.group, c.seq)) throw eager::CollectiveMismatch("run alone");
    g_pending[where] = {c.group, c.seq};
    Join(where, c.size, c.rank, std::move(part), launch);
  } else {
    Join(where, c.size, c.rank, std::move(part), launch);
  }

  const auto deadline = std::chrono::steady_clock::now() + c.timeout;
  std::map<int, std::pair<uint64_t, int>> idle;  // missing rank -> (ops recorded, polls alike)
  std::unique_lock<std::mutex> lock(out->mu);
  while (!out->cv.wait_for(lock, std::chrono::milliseconds(10), [&] { return out->done; })) {
    lock.unlock();
    std::vector<int> missing = Missing(where, c.size);
    // A rank that recorded this collective and then recorded nothing for 200 ms is blocked
    // elsewhere (Gloo, a Python barrier): run its trace for it. A rank still recording will
    // flush by itself, at the point every rank does.
    for (int r : missing) {
      int d = RecordedAt(c.group, c.seq, r, false);
      if (d < 0) continue;
      auto& [count, polls] = idle[r];
      uint64_t now = eager::TraceOf(d).recorded();
      if (now != count) {
        count = now;
        polls = 0;
      } else if (++polls >= 20 && RecordedAt(c.group, c.seq, r, true) >= 0) {
        FlushElsewhere(d);
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      Abandon(where);
      std::string msg =
          "tpu: " + c.what + " timed out after " + std::to_string(c.timeout.count()) + " ms";
      if (!missing.empty()) {
        msg += ": ranks";
        for (int r : missing) msg += " " + std::to_string(r);
        msg += " never issued it";
      }
      throw eager::OpError(msg, false, true);
    }
    lock.lock();
  }
  lock.unlock();  // done: the outcome no longer changes
  if (m.fused) {
    {
      std::lock_guard<std::mutex> fuse_lock(g_fuse_mu);
      g_pending.erase(where);
    }
    if (out->mismatch) {
      if (c.rank == 0 && std::getenv("TORCHTPU_FUSED_DEBUG") != nullptr) {
        std::fprintf(stderr,
                     "torchtpu: ranks brought different programs with collectives; "
                     "running these one by one: %.2000s\n",
                     out->error.c_str());
      }
      SingleThrough(c.group, m.collectives.back()->seq);
      throw eager::CollectiveMismatch(out->error);
    }
  }
  if (!out->error.empty()) throw eager::OpError("tpu: " + out->error, false, true);
  return std::move(out->outputs);
}

}  // namespace

void InstallMeet() {
  static std::once_flag once;
  std::call_once(once, [] { eager::SetMeet(Meet); });
}

void NoteRecorded(const std::string& group, uint64_t seq, int rank, int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_at[{group, seq, rank}] = device;
}

}  // namespace tpu::dist
