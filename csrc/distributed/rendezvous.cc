#include "distributed/rendezvous.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "eager/executor.h"

namespace tpu::dist {

namespace {

struct Meeting {
  std::map<int, Part> parts;  // by rank
};

std::mutex g_mu;
std::unordered_map<std::string, std::shared_ptr<Meeting>> g_meetings;

// Why the parts cannot run as one program, or nothing.
std::optional<std::string> Mismatch(const std::vector<Part>& parts) {
  bool same = true;
  for (const Part& p : parts) same &= p.signature == parts[0].signature;
  if (!same) {
    std::string msg = "ranks issued different collectives:";
    for (size_t r = 0; r < parts.size(); ++r) {
      msg += "\n  rank " + std::to_string(r) + ": " + parts[r].signature;
    }
    return msg;
  }
  for (size_t a = 0; a < parts.size(); ++a) {
    for (size_t b = a + 1; b < parts.size(); ++b) {
      if (parts[a].device == parts[b].device) {
        return "ranks " + std::to_string(a) + " and " + std::to_string(b) +
               " of one collective both use tpu:" + std::to_string(parts[a].device) +
               " (each rank needs its own device: torch.tpu.set_device(rank))";
      }
    }
  }
  return std::nullopt;
}

}  // namespace

void Join(const std::string& key, int size, int rank, Part part, const Launch& launch) {
  std::vector<Part> parts;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& m = g_meetings[key];
    if (!m) m = std::make_shared<Meeting>();
    m->parts[rank] = std::move(part);
    if (static_cast<int>(m->parts.size()) < size) return;
    for (auto& [r, p] : m->parts) parts.push_back(std::move(p));
    g_meetings.erase(key);
  }
  std::optional<std::string> error = Mismatch(parts);
  const bool mismatch = error.has_value();
  std::vector<std::vector<rt::BufferPtr>> outputs;
  if (!error) {
    try {
      outputs = launch(parts);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    if (error) {
      parts[r].done({}, &*error, mismatch);
    } else {
      parts[r].done(std::move(outputs[r]), nullptr, false);
    }
  }
}

std::vector<int> Missing(const std::string& key, int size) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_meetings.find(key);
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (it == g_meetings.end() || !it->second->parts.count(r)) missing.push_back(r);
  }
  return missing;
}

void Abandon(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_meetings.erase(key);
}

void Cancel(const std::string& key, const std::string& why) {
  std::vector<Part> parts;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_meetings.find(key);
    if (it == g_meetings.end()) return;
    for (auto& [r, p] : it->second->parts) parts.push_back(std::move(p));
    g_meetings.erase(it);
  }
  for (Part& p : parts) p.done({}, &why, true);
}

std::vector<std::vector<rt::BufferPtr>> RunReplicated(const std::vector<Part>& parts,
                                                      const ir::Hash128& key,
                                                      const std::function<ir::Graph()>& build,
                                                      std::vector<int> ids) {
  std::vector<int> devices;
  std::vector<std::vector<rt::BufferPtr>> inputs;
  for (const Part& p : parts) {
    devices.push_back(p.device);
    inputs.push_back(p.inputs);
  }
  if (ids.empty()) {
    for (int d : devices) ids.push_back(eager::Client().device_id(d));
  }
  ir::Hash128 k = key;  // the program, and where its replicas run
  k.lo ^= rt::BytesHash(ids.data(), ids.size() * sizeof(int), k.hi);
  rt::ExecutablePtr exe = eager::Executable(k, build, ids);
  return eager::ExecuteReplicated(*exe, inputs, devices);
}

}  // namespace tpu::dist
