// The PJRT client: one plugin, one client, its devices, buffers and executables.
// This header hides the PJRT C API; only client.cc and pjrt_call.h include it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/dtype.h"

struct PJRT_Api;
struct PJRT_Buffer;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_LoadedExecutable;

namespace tpu::rt {

// A PJRT error carried as a C++ exception: the PJRT function, its code and message.
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }  // RESOURCE_EXHAUSTED

 private:
  int code_;
};

class Client;
class InflightLimit;

// True in a process forked from one that had created a Client: the client (and every buffer
// and executable of it) is unusable there, as CUDA's context is after fork.
bool InForkedChild();

// An immutable device buffer. Destroyed with its last shared_ptr.
class Buffer {
 public:
  Buffer(Client* client, PJRT_Buffer* raw, DType dtype, std::vector<int64_t> dims, int device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  PJRT_Buffer* raw() const { return raw_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int device() const { return device_; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * ItemSize(dtype_); }
  // Blocks until the value is computed; throws the execution's error if it failed.
  void Await() const;
  bool IsReady() const;
  // Whether a program was given this buffer (input-output aliasing): its memory is gone.
  bool Donated() const;
  // Calls `fn` (on a runtime thread) once the value is computed or has failed; at once for a
  // donated buffer.
  void OnReady(std::function<void()> fn) const;
  // Copies the (dense, row-major) value to host memory; blocks.
  void ToHost(void* dst, size_t nbytes) const;
  // Where the value lives (host memory on the CPU plugin); valid while the buffer lives.
  void* UnsafePointer() const;

 private:
  bool IsReadyOrThrow() const;

  Client* client_;
  PJRT_Buffer* raw_;
  DType dtype_;
  std::vector<int64_t> dims_;
  int device_;
};
using BufferPtr = std::shared_ptr<Buffer>;

struct ShapedType {
  DType dtype;
  std::vector<int64_t> dims;
};

class Executable {
 public:
  Executable(Client* client, PJRT_LoadedExecutable* raw, std::vector<ShapedType> outputs);
  ~Executable();
  PJRT_LoadedExecutable* raw() const { return raw_; }
  const std::vector<ShapedType>& outputs() const { return outputs_; }

 private:
  Client* client_;
  PJRT_LoadedExecutable* raw_;
  std::vector<ShapedType> outputs_;
};
using ExecutablePtr = std::shared_ptr<Executable>;

struct MemoryStats {
  int64_t in_use = 0;
  int64_t peak = 0;
  int64_t limit = 0;    // 0 when the plugin does not say
  int64_t buffers = 0;  // live buffers
};

// The key-value store a multi-process client exchanges its topology through (the c10d Store
// under torch.distributed). Calls come from plugin threads: implementations are thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Blocks until `key` exists or `timeout_ms` passes (then throws).
  virtual std::string Get(const std::string& key, int timeout_ms) = 0;
  // False at once when `key` does not exist.
  virtual bool TryGet(const std::string& key, std::string* value) = 0;
  virtual void Put(const std::string& key, const std::string& value) = 0;
};

struct ClientOptions {
  std::string plugin_path;  // the .so that exports GetPjrtApi
  std::string platform;     // "cpu", "cuda", "tpu"
  int cpu_device_count = 1;
  // One client spanning processes (plugins that can: XLA:GPU; libtpu finds its peers itself):
  // this process is node `node_id` of `num_nodes`, and they meet through `kv_store`.
  int node_id = 0;
  int num_nodes = 1;
  std::shared_ptr<KeyValueStore> kv_store;
  std::vector<int64_t> visible_devices;  // local device ordinals this process drives (GPU)
  // XLA:GPU's allocator: grow on demand up to this fraction of the GPU's memory, as PyTorch's
  // caching allocator does, instead of taking it all when the client starts (JAX's default).
  // TORCHTPU_GPU_PREALLOCATE=1 and TORCHTPU_GPU_MEMORY_FRACTION override them (GpuMemoryFromEnv).
  bool gpu_preallocate = false;
  double gpu_memory_fraction = 0.9;
};

// `o` with the GPU memory settings of the environment applied; a malformed value is an Error.
ClientOptions GpuMemoryFromEnv(ClientOptions o);

// One named create option: an int64, or a list of them.
struct CreateOption {
  enum class Kind { kInt64, kInt64List, kBool, kFloat };
  std::string name;
  Kind kind = Kind::kInt64;
  std::vector<int64_t> values;  // kInt64 (one value), kInt64List, kBool (0 or 1)
  float real = 0;               // kFloat
};
// The create options for `o`: what Client passes to the plugin.
std::vector<CreateOption> CreateOptions(const ClientOptions& o);
// CompileOptionsProto bytes: one replica and portable when `device_ids` is empty, else one
// replica per entry of `device_ids` (global PJRT device ids, in replica order).
std::string CompileOptionsBytes(const std::vector<int>& device_ids);

class Client {
 public:
  explicit Client(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const PJRT_Api* api() const { return api_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  // The global PJRT id of local device `device` (what device assignments name).
  int device_id(int device) const { return device_ids_.at(device); }
  // What the plugin calls the device ("cpu", "NVIDIA H200", "TPU v5 lite").
  const std::string& device_kind(int device) const { return device_kinds_.at(device); }
  // Every device of the client, local or on other processes (a multi-process client).
  int global_device_count() const { return global_device_count_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& plugin_path() const { return plugin_path_; }
  int api_major() const { return api_major_; }
  int api_minor() const { return api_minor_; }

  // Copies dense row-major host data to a new buffer on `device`.
  BufferPtr FromHost(const void* data, DType dtype, const std::vector<int64_t>& dims, int device);
  // Compiles StableHLO text for single-device, portable execution. `outputs` are the result
  // types of @main, checked against the executable.
  ExecutablePtr Compile(const std::string& mlir, std::vector<ShapedType> outputs);
  // Compiles an N-replica program (collectives across replicas): replica r runs on the device
  // with global id device_ids[r].
  ExecutablePtr CompileReplicated(const std::string& mlir, std::vector<ShapedType> outputs,
                                  const std::vector<int>& device_ids);
  // The executable as bytes (for the persistent cache), and back.
  std::string Serialize(const Executable& exe);
  ExecutablePtr Deserialize(const std::string& bytes, std::vector<ShapedType> outputs);
  // The compile options every program is compiled with (part of cache keys).
  static std::string CompileOptions();
  // Runs `exe` on `device`; returns its outputs (ready asynchronously).
  std::vector<BufferPtr> Execute(const Executable& exe, const std::vector<PJRT_Buffer*>& args,
                                 int device);
  // Runs a replicated executable on its local devices (`devices`, local indices in the
  // executable's replica order, one argument list each): one execution drives them all.
  std::vector<std::vector<BufferPtr>> ExecuteReplicated(
      const Executable& exe, const std::vector<std::vector<PJRT_Buffer*>>& args,
      const std::vector<int>& devices);
  MemoryStats memory_stats(int device) const;
  // Slots of the in-flight limit a multi-device client keeps per device (inflight.h): 16, or
  // TORCHTPU_INFLIGHT_SLOTS.
  static int InflightSlots();
  // Programs queued or running on `device` now; -1 where the client keeps no count (one device).
  int inflight(int device) const;
  // Executables loaded in the client now (all devices).
  int64_t loaded_executables() const { return loaded_.load(); }

  // Live-bytes and buffer accounting done by Buffer (made: +1 and its bytes, destroyed: -1).
  void Track(const Buffer* b, int device, int64_t delta, int count);
  // The buffers alive on `device`, counted by type ("f32[16, 40]" -> 3): what a leak is made of.
  std::map<std::string, int64_t> live_buffers(int device) const;
  // Executable accounting done by Executable.
  void TrackExecutable(int count) { loaded_.fetch_add(count); }

 private:
  // Wraps a loaded executable, refusing one whose output count is not outputs.size().
  ExecutablePtr Checked(PJRT_LoadedExecutable* loaded, std::vector<ShapedType> outputs);

  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::vector<int> device_ids_;
  std::vector<std::string> device_kinds_;
  int global_device_count_ = 0;
  std::shared_ptr<KeyValueStore> kv_store_;  // outlives the client's use of its callbacks
  std::string platform_name_;
  std::string plugin_path_;
  int api_major_ = 0;
  int api_minor_ = 0;
  struct Counters {
    std::atomic<int64_t> in_use{0};
    std::atomic<int64_t> peak{0};
    std::atomic<int64_t> buffers{0};
    mutable std::mutex mu;
    std::unordered_set<const Buffer*> live;
  };
  std::atomic<int64_t> loaded_{0};
  std::unique_ptr<Counters[]> counters_;
  // Programs queued or running per device, multi-device clients only (inflight.h); shared with
  // the completion callbacks that free its slots.
  std::shared_ptr<InflightLimit> inflight_;
  int64_t memory_limit_ = 0;
};

}  // namespace tpu::rt
