#include "runtime/client.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "runtime/env.h"
#include "runtime/inflight.h"
#include "runtime/kv_callbacks.h"
#include "runtime/pjrt_call.h"
#include "runtime/plugin_log.h"

namespace tpu::rt {

void ThrowIfError(const PJRT_Api* api, PJRT_Error* err, const char* what) {
  if (err == nullptr) return;
  Args<PJRT_Error_Message_Args> msg;
  msg->error = err;
  api->PJRT_Error_Message(msg.get());
  std::string text(msg->message, msg->message_size);
  Args<PJRT_Error_GetCode_Args> code;
  code->error = err;
  int c = 2;
  if (api->PJRT_Error_GetCode(code.get()) == nullptr) c = static_cast<int>(code->code);
  Args<PJRT_Error_Destroy_Args> destroy;
  destroy->error = err;
  api->PJRT_Error_Destroy(destroy.get());
  if (std::getenv("TORCHTPU_DEBUG_PJRT") != nullptr) {
    std::fprintf(stderr, "torchtpu: %s failed: %.500s\n", what, text.c_str());
  }
  throw Error(c, std::string(what) + ": " + text);
}

namespace {

// Waits for and destroys an event, throwing its error.
void AwaitEvent(const PJRT_Api* api, PJRT_Event* event, const char* what) {
  if (event == nullptr) return;
  Args<PJRT_Event_Await_Args> await;
  await->event = event;
  PJRT_Error* err = api->PJRT_Event_Await(await.get());
  Args<PJRT_Event_Destroy_Args> destroy;
  destroy->event = event;
  api->PJRT_Event_Destroy(destroy.get());
  ThrowIfError(api, err, what);
}

PJRT_Buffer_Type ToPjrt(DType t) { return static_cast<PJRT_Buffer_Type>(t); }

// Protocol-buffer encoding, enough for CompileOptionsProto (no protobuf dependency).
void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void VarintField(std::string& out, int field, uint64_t v) {
  Varint(out, static_cast<uint64_t>(field) << 3);
  Varint(out, v);
}
void BytesField(std::string& out, int field, const std::string& bytes) {
  Varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  Varint(out, bytes.size());
  out += bytes;
}

PJRT_DeviceDescription* Description(const PJRT_Api* api, PJRT_Device* device) {
  Args<PJRT_Device_GetDescription_Args> desc;
  desc->device = device;
  TPU_PJRT(api, Device_GetDescription, desc);
  return desc->device_description;
}

int DeviceId(const PJRT_Api* api, PJRT_Device* device) {
  Args<PJRT_DeviceDescription_Id_Args> id;
  id->device_description = Description(api, device);
  TPU_PJRT(api, DeviceDescription_Id, id);
  return id->id;
}

std::string DeviceKind(const PJRT_Api* api, PJRT_Device* device) {
  Args<PJRT_DeviceDescription_Kind_Args> kind;
  kind->device_description = Description(api, device);
  TPU_PJRT(api, DeviceDescription_Kind, kind);
  return std::string(kind->device_kind, kind->device_kind_size);
}

}  // namespace

std::vector<CreateOption> CreateOptions(const ClientOptions& o) {
  std::vector<CreateOption> out;
  if (o.platform == "cpu")
    out.push_back({"cpu_device_count", CreateOption::Kind::kInt64, {o.cpu_device_count}});
  // libtpu finds its peers itself; the GPU plugin is told who it is and meets through kv.
  if (o.platform == "cuda" && o.num_nodes > 1) {
    out.push_back({"node_id", CreateOption::Kind::kInt64, {o.node_id}});
    out.push_back({"num_nodes", CreateOption::Kind::kInt64, {o.num_nodes}});
  }
  if (o.platform == "cuda" && !o.visible_devices.empty()) {
    out.push_back({"visible_devices", CreateOption::Kind::kInt64List, o.visible_devices});
  }
  if (o.platform == "cuda") {
    out.push_back({"preallocate", CreateOption::Kind::kBool, {o.gpu_preallocate ? 1 : 0}});
    out.push_back({"memory_fraction",
                   CreateOption::Kind::kFloat,
                   {},
                   static_cast<float>(o.gpu_memory_fraction)});
  }
  return out;
}

ClientOptions GpuMemoryFromEnv(ClientOptions o) {
  if (const char* v = std::getenv("TORCHTPU_GPU_PREALLOCATE")) {
    const std::string s = v;
    if (s != "0" && s != "1") {
      throw Error(3, "TORCHTPU_GPU_PREALLOCATE=" + s + ": expected 0 or 1");
    }
    o.gpu_preallocate = s == "1";
  }
  if (const char* v = std::getenv("TORCHTPU_GPU_MEMORY_FRACTION")) {
    char* end = nullptr;
    const double f = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(f > 0.0 && f <= 1.0)) {
      throw Error(
          3, std::string("TORCHTPU_GPU_MEMORY_FRACTION=") + v + ": expected a fraction in (0, 1]");
    }
    o.gpu_memory_fraction = f;
  }
  return o;
}

// XLA:CPU's XNNPACK fusions are off for every program (a DebugOptions override; other plugins
// ignore it), for two reasons:
// - A fusion keeps its XNNPACK runtime, packed weights included, from one run to the next while
//   its arguments keep their addresses. A buffer updated in place (donation) or a new value in
//   freed memory at the same address was then read as the old one: the tied Llama's backward used
//   the previous step's embedding weight, and training diverged from CPU in fused mode.
// - In replicated programs a fusion tears down a thread pool that waits for work queued behind a
//   replica blocked in a collective (the process then aborts).
// TORCHTPU_XLA_CPU_XNNPACK=1 keeps them, only to reproduce that bug (the shadow checker's test).
static void XnnpackOff(std::string& out) {
  if (EnvCount("TORCHTPU_XLA_CPU_XNNPACK", 0) == 1) return;
  std::string off;         // OptionOverrideProto
  VarintField(off, 2, 0);  // bool_field = false
  std::string entry;       // env_option_overrides map entry
  BytesField(entry, 1, "xla_cpu_use_xnnpack");
  BytesField(entry, 2, off);
  BytesField(out, 7, entry);
}

std::string CompileOptionsBytes(const std::vector<int>& device_ids) {
  std::string build;  // ExecutableBuildOptionsProto
  std::string out;    // CompileOptionsProto
  if (device_ids.empty()) {
    VarintField(build, 4, 1);  // num_replicas
    VarintField(build, 5, 1);  // num_partitions
    BytesField(out, 3, build);
    VarintField(out, 4, 1);  // compile_portable_executable
    XnnpackOff(out);
    return out;
  }
  std::string computation;  // DeviceAssignmentProto.ComputationDevice
  for (int id : device_ids) VarintField(computation, 1, static_cast<uint64_t>(id));
  std::string assignment;                         // DeviceAssignmentProto
  VarintField(assignment, 1, device_ids.size());  // replica_count
  VarintField(assignment, 2, 1);                  // computation_count
  BytesField(assignment, 3, computation);
  VarintField(build, 4, device_ids.size());  // num_replicas
  VarintField(build, 5, 1);                  // num_partitions
  BytesField(build, 9, assignment);          // device_assignment
  BytesField(out, 3, build);
  XnnpackOff(out);
  return out;
}

namespace {
std::atomic<bool> g_forked{false};

// Calls `fn` on a runtime thread once `event` is ready or failed, then frees the event.
void OnEvent(const PJRT_Api* api, PJRT_Event* event, std::function<void()> fn) {
  struct Pending {
    std::function<void()> fn;
    const PJRT_Api* api;
    PJRT_Event* event;
  };
  auto* pending = new Pending{std::move(fn), api, event};
  Args<PJRT_Event_OnReady_Args> on;
  on->event = event;
  on->user_arg = pending;
  on->callback = [](PJRT_Error* error, void* user) {
    auto* p = static_cast<Pending*>(user);
    if (error != nullptr) {
      Args<PJRT_Error_Destroy_Args> destroy;
      destroy->error = error;
      p->api->PJRT_Error_Destroy(destroy.get());
    }
    p->fn();
    // The event outlives its callback registration; free it here, after it fired.
    Args<PJRT_Event_Destroy_Args> destroy_event;
    destroy_event->event = p->event;
    p->api->PJRT_Event_Destroy(destroy_event.get());
    delete p;
  };
  PJRT_Error* err = api->PJRT_Event_OnReady(on.get());
  if (err != nullptr) {
    delete pending;
    Args<PJRT_Event_Destroy_Args> destroy_event;
    destroy_event->event = event;
    api->PJRT_Event_Destroy(destroy_event.get());
    ThrowIfError(api, err, "PJRT_Event_OnReady");
  }
}

// Runs `args` (one execution over `devices`) within `limit`'s slots, when there is a limit: the
// slot of each device is freed once its part of the execution completes.
void ExecuteWithin(const PJRT_Api* api, const std::shared_ptr<InflightLimit>& limit,
                   const std::vector<int>& devices, PJRT_LoadedExecutable_Execute_Args* args) {
  if (limit == nullptr) {
    ThrowIfError(api, api->PJRT_LoadedExecutable_Execute(args), "PJRT_LoadedExecutable_Execute");
    return;
  }
  limit->Acquire(devices);
  std::vector<PJRT_Event*> complete(devices.size(), nullptr);
  args->device_complete_events = complete.data();
  PJRT_Error* err = api->PJRT_LoadedExecutable_Execute(args);
  if (err != nullptr) {
    for (int d : devices) limit->Release(d);
    ThrowIfError(api, err, "PJRT_LoadedExecutable_Execute");
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const int d = devices[i];
    try {
      if (complete[i] == nullptr) throw Error(2, "no completion event");
      OnEvent(api, complete[i], [limit, d] { limit->Release(d); });
    } catch (const Error&) {
      limit->Release(d);  // the execution stands; only its slot is freed early
    }
  }
}
}  // namespace

bool InForkedChild() { return g_forked.load(std::memory_order_relaxed); }

Buffer::Buffer(Client* client, PJRT_Buffer* raw, DType dtype, std::vector<int64_t> dims, int device)
    : client_(client), raw_(raw), dtype_(dtype), dims_(std::move(dims)), device_(device) {
  client_->Track(this, device_, nbytes(), 1);
}

Buffer::~Buffer() {
  client_->Track(this, device_, -nbytes(), -1);
  if (InForkedChild()) return;  // the plugin's threads did not survive fork: leave it alone
  Args<PJRT_Buffer_Destroy_Args> args;
  args->buffer = raw_;
  PJRT_Error* err = client_->api()->PJRT_Buffer_Destroy(args.get());
  if (err != nullptr) {
    Args<PJRT_Error_Destroy_Args> destroy;
    destroy->error = err;
    client_->api()->PJRT_Error_Destroy(destroy.get());
  }
}

int64_t Buffer::numel() const {
  return std::accumulate(dims_.begin(), dims_.end(), int64_t{1}, std::multiplies<>());
}

bool Buffer::Donated() const {
  Args<PJRT_Buffer_IsDeleted_Args> args;
  args->buffer = raw_;
  TPU_PJRT(client_->api(), Buffer_IsDeleted, args);
  return args->is_deleted;
}

// A buffer given to a later program is done with: the program that consumed it ran after the one
// that computed it. Events and syncs that still hold it (weakly) see it as ready.
void Buffer::Await() const {
  try {
    Args<PJRT_Buffer_ReadyEvent_Args> args;
    args->buffer = raw_;
    TPU_PJRT(client_->api(), Buffer_ReadyEvent, args);
    AwaitEvent(client_->api(), args->event, "PJRT_Event_Await");
  } catch (const Error&) {
    if (!Donated()) throw;
  }
}

bool Buffer::IsReady() const {
  try {
    return IsReadyOrThrow();
  } catch (const Error&) {
    if (!Donated()) throw;
    return true;
  }
}

bool Buffer::IsReadyOrThrow() const {
  Args<PJRT_Buffer_ReadyEvent_Args> args;
  args->buffer = raw_;
  TPU_PJRT(client_->api(), Buffer_ReadyEvent, args);
  Args<PJRT_Event_IsReady_Args> ready;
  ready->event = args->event;
  PJRT_Error* err = client_->api()->PJRT_Event_IsReady(ready.get());
  bool is_ready = err == nullptr && ready->is_ready;
  Args<PJRT_Event_Destroy_Args> destroy;
  destroy->event = args->event;
  client_->api()->PJRT_Event_Destroy(destroy.get());
  ThrowIfError(client_->api(), err, "PJRT_Event_IsReady");
  return is_ready;
}

void Buffer::OnReady(std::function<void()> fn) const {
  const PJRT_Api* api = client_->api();
  Args<PJRT_Buffer_ReadyEvent_Args> args;
  args->buffer = raw_;
  try {
    TPU_PJRT(api, Buffer_ReadyEvent, args);
  } catch (const Error&) {
    if (!Donated()) throw;
    return fn();  // given to a later program: done with
  }
  OnEvent(api, args->event, std::move(fn));
}

void Buffer::ToHost(void* dst, size_t nbytes) const {
  Args<PJRT_Buffer_ToHostBuffer_Args> args;
  args->src = raw_;
  args->dst = dst;
  args->dst_size = nbytes;
  TPU_PJRT(client_->api(), Buffer_ToHostBuffer, args);
  AwaitEvent(client_->api(), args->event, "PJRT_Buffer_ToHostBuffer");
}

void* Buffer::UnsafePointer() const {
  Args<PJRT_Buffer_UnsafePointer_Args> args;
  args->buffer = raw_;
  TPU_PJRT(client_->api(), Buffer_UnsafePointer, args);
  return reinterpret_cast<void*>(args->buffer_pointer);
}

Executable::Executable(Client* client, PJRT_LoadedExecutable* raw, std::vector<ShapedType> outputs)
    : client_(client), raw_(raw), outputs_(std::move(outputs)) {
  client_->TrackExecutable(1);
}

Executable::~Executable() {
  client_->TrackExecutable(-1);
  if (InForkedChild()) return;
  Args<PJRT_LoadedExecutable_Destroy_Args> args;
  args->executable = raw_;
  PJRT_Error* err = client_->api()->PJRT_LoadedExecutable_Destroy(args.get());
  if (err != nullptr) {
    Args<PJRT_Error_Destroy_Args> destroy;
    destroy->error = err;
    client_->api()->PJRT_Error_Destroy(destroy.get());
  }
}

Client::Client(const ClientOptions& options) : plugin_path_(options.plugin_path) {
  // A child forked after this point inherits the client without the plugin's threads.
  static const int registered = pthread_atfork(nullptr, nullptr, [] { g_forked.store(true); });
  (void)registered;
  // The plugin logs as it starts (absl INFO lines): shown only at TORCHTPU_LOG_LEVEL=info.
  PluginLogFilter quiet;
  // RTLD_LOCAL keeps the plugin's LLVM away from everyone else's; never dlclose it.
  void* handle = dlopen(options.plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw Error(5, "cannot load PJRT plugin " + options.plugin_path + ": " + dlerror());
  }
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) throw Error(5, options.plugin_path + " does not export GetPjrtApi");
  api_ = get_api();
  api_major_ = api_->pjrt_api_version.major_version;
  api_minor_ = api_->pjrt_api_version.minor_version;
  if (api_major_ != 0 || api_minor_ < 81) {
    throw Error(9, "PJRT plugin " + options.plugin_path + " has API version " +
                       std::to_string(api_major_) + "." + std::to_string(api_minor_) +
                       "; torchtpu needs 0.81 or newer with major version 0");
  }

  Args<PJRT_Plugin_Initialize_Args> init;
  TPU_PJRT(api_, Plugin_Initialize, init);

  // Named values are indexed by the plugin with the header's stride: exact layout, no padding.
  const std::vector<CreateOption> named = CreateOptions(options);
  std::vector<PJRT_NamedValue> create;
  for (const CreateOption& o : named) {
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = o.name.c_str();
    v.name_size = o.name.size();
    v.value_size = 1;
    switch (o.kind) {
      case CreateOption::Kind::kInt64List:
        v.type = PJRT_NamedValue_kInt64List;
        v.int64_array_value = o.values.data();
        v.value_size = o.values.size();
        break;
      case CreateOption::Kind::kInt64:
        v.type = PJRT_NamedValue_kInt64;
        v.int64_value = o.values.at(0);
        break;
      case CreateOption::Kind::kBool:
        v.type = PJRT_NamedValue_kBool;
        v.bool_value = o.values.at(0) != 0;
        break;
      case CreateOption::Kind::kFloat:
        v.type = PJRT_NamedValue_kFloat;
        v.float_value = o.real;
        break;
    }
    create.push_back(v);
  }
  Args<PJRT_Client_Create_Args> args;
  args->create_options = create.data();
  args->num_options = create.size();
  kv_store_ = options.kv_store;
  if (kv_store_) {
    args->kv_get_callback = &KvGet;
    args->kv_get_user_arg = kv_store_.get();
    args->kv_try_get_callback = &KvTryGet;
    args->kv_try_get_user_arg = kv_store_.get();
    args->kv_put_callback = &KvPut;
    args->kv_put_user_arg = kv_store_.get();
  }
  TPU_PJRT(api_, Client_Create, args);
  client_ = args->client;

  Args<PJRT_Client_PlatformName_Args> name;
  name->client = client_;
  TPU_PJRT(api_, Client_PlatformName, name);
  platform_name_.assign(name->platform_name, name->platform_name_size);

  Args<PJRT_Client_AddressableDevices_Args> devs;
  devs->client = client_;
  TPU_PJRT(api_, Client_AddressableDevices, devs);
  devices_.assign(devs->addressable_devices,
                  devs->addressable_devices + devs->num_addressable_devices);
  counters_ = std::make_unique<Counters[]>(devices_.size());
  for (PJRT_Device* d : devices_) {
    device_ids_.push_back(DeviceId(api_, d));
    device_kinds_.push_back(DeviceKind(api_, d));
  }
  Args<PJRT_Client_Devices_Args> all;
  all->client = client_;
  TPU_PJRT(api_, Client_Devices, all);
  global_device_count_ = static_cast<int>(all->num_devices);
  // Replicated launches need it (inflight.h); fewer slots than XLA's 32 per device.
  if (devices_.size() > 1) {
    inflight_ = std::make_shared<InflightLimit>(static_cast<int>(devices_.size()), InflightSlots());
  }

  if (platform_name_ == "cpu") {
    memory_limit_ = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  } else if (!devices_.empty()) {
    Args<PJRT_Device_MemoryStats_Args> stats;
    stats->device = devices_[0];
    PJRT_Error* err = api_->PJRT_Device_MemoryStats(stats.get());
    if (err == nullptr && stats->bytes_limit_is_set) memory_limit_ = stats->bytes_limit;
    if (err != nullptr) {
      Args<PJRT_Error_Destroy_Args> destroy;
      destroy->error = err;
      api_->PJRT_Error_Destroy(destroy.get());
    }
  }
}

Client::~Client() {
  // The client lives until process exit; destroying it races with static destructors of the
  // plugin, so we leave it to the OS like other PJRT hosts do.
}

void Client::Track(const Buffer* b, int device, int64_t delta, int count) {
  Counters& c = counters_[device];
  c.buffers.fetch_add(count);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (count > 0) {
      c.live.insert(b);
    } else {
      c.live.erase(b);
    }
  }
  int64_t now = c.in_use.fetch_add(delta) + delta;
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
}

int Client::InflightSlots() {
  static const int n = static_cast<int>(EnvCount("TORCHTPU_INFLIGHT_SLOTS", 16));
  return n;
}

int Client::inflight(int device) const {
  return inflight_ == nullptr ? -1 : inflight_->used(device);
}

std::map<std::string, int64_t> Client::live_buffers(int device) const {
  const Counters& c = counters_[device];
  std::map<std::string, int64_t> out;
  std::lock_guard<std::mutex> lock(c.mu);
  for (const Buffer* b : c.live) {
    std::string t(MlirName(b->dtype()));
    t += "[";
    for (size_t i = 0; i < b->dims().size(); ++i)
      t += (i ? ", " : "") + std::to_string(b->dims()[i]);
    out[t + "]"]++;
  }
  return out;
}

MemoryStats Client::memory_stats(int device) const {
  const Counters& c = counters_[device];
  return MemoryStats{c.in_use.load(), c.peak.load(), memory_limit_, c.buffers.load()};
}

BufferPtr Client::FromHost(const void* data, DType dtype, const std::vector<int64_t>& dims,
                           int device) {
  Args<PJRT_Client_BufferFromHostBuffer_Args> args;
  args->client = client_;
  args->data = data;
  args->type = ToPjrt(dtype);
  args->dims = dims.data();
  args->num_dims = dims.size();
  args->host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args->device = devices_.at(device);
  TPU_PJRT(api_, Client_BufferFromHostBuffer, args);
  auto buf = std::make_shared<Buffer>(this, args->buffer, dtype, dims, device);
  // The host data belongs to the caller: wait until the runtime no longer reads it.
  AwaitEvent(api_, args->done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer");
  return buf;
}

ExecutablePtr Client::Compile(const std::string& mlir, std::vector<ShapedType> outputs) {
  return CompileReplicated(mlir, std::move(outputs), {});
}

ExecutablePtr Client::CompileReplicated(const std::string& mlir, std::vector<ShapedType> outputs,
                                        const std::vector<int>& device_ids) {
  const std::string options = CompileOptionsBytes(device_ids);
  Args<PJRT_Program> program;
  static const char kFormat[] = "mlir";
  program->code = const_cast<char*>(mlir.data());
  program->code_size = mlir.size();
  program->format = kFormat;
  program->format_size = 4;
  Args<PJRT_Client_Compile_Args> args;
  args->client = client_;
  args->program = program.get();
  args->compile_options = options.data();
  args->compile_options_size = options.size();
  TPU_PJRT(api_, Client_Compile, args);
  return Checked(args->executable, std::move(outputs));
}

ExecutablePtr Client::Checked(PJRT_LoadedExecutable* loaded, std::vector<ShapedType> outputs) {
  auto exe = std::make_shared<Executable>(this, loaded, std::move(outputs));
  Args<PJRT_LoadedExecutable_GetExecutable_Args> get;
  get->loaded_executable = loaded;
  TPU_PJRT(api_, LoadedExecutable_GetExecutable, get);
  Args<PJRT_Executable_NumOutputs_Args> num;
  num->executable = get->executable;
  TPU_PJRT(api_, Executable_NumOutputs, num);
  size_t n = num->num_outputs;
  Args<PJRT_Executable_Destroy_Args> destroy;
  destroy->executable = get->executable;
  TPU_PJRT(api_, Executable_Destroy, destroy);
  // Execute sizes its output list from `outputs`: a program with other outputs must never run.
  if (exe->outputs().size() != n) {
    throw Error(13, "program has " + std::to_string(n) + " outputs, expected " +
                        std::to_string(exe->outputs().size()));
  }
  return exe;
}

std::string Client::CompileOptions() { return CompileOptionsBytes({}); }

std::string Client::Serialize(const Executable& exe) {
  Args<PJRT_LoadedExecutable_GetExecutable_Args> get;
  get->loaded_executable = exe.raw();
  TPU_PJRT(api_, LoadedExecutable_GetExecutable, get);
  Args<PJRT_Executable_Serialize_Args> args;
  args->executable = get->executable;
  PJRT_Error* err = api_->PJRT_Executable_Serialize(args.get());
  std::string bytes;
  if (err == nullptr) {
    bytes.assign(args->serialized_bytes, args->serialized_bytes_size);
    args->serialized_executable_deleter(args->serialized_executable);
  }
  Args<PJRT_Executable_Destroy_Args> destroy;
  destroy->executable = get->executable;
  api_->PJRT_Executable_Destroy(destroy.get());
  ThrowIfError(api_, err, "PJRT_Executable_Serialize");
  return bytes;
}

ExecutablePtr Client::Deserialize(const std::string& bytes, std::vector<ShapedType> outputs) {
  Args<PJRT_Executable_DeserializeAndLoad_Args> args;
  args->client = client_;
  args->serialized_executable = bytes.data();
  args->serialized_executable_size = bytes.size();
  TPU_PJRT(api_, Executable_DeserializeAndLoad, args);
  return Checked(args->loaded_executable, std::move(outputs));
}

std::vector<BufferPtr> Client::Execute(const Executable& exe, const std::vector<PJRT_Buffer*>& in,
                                       int device) {
  Args<PJRT_ExecuteOptions> options;
  std::vector<PJRT_Buffer*> outs(exe.outputs().size(), nullptr);
  PJRT_Buffer* const* arg_list = in.data();
  PJRT_Buffer** out_list = outs.data();
  Args<PJRT_LoadedExecutable_Execute_Args> args;
  args->executable = exe.raw();
  args->options = options.get();
  args->argument_lists = &arg_list;
  args->num_devices = 1;
  args->num_args = in.size();
  args->output_lists = &out_list;
  args->execute_device = devices_.at(device);
  ExecuteWithin(api_, inflight_, {device}, args.get());

  std::vector<BufferPtr> result;
  result.reserve(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const ShapedType& t = exe.outputs()[i];
    result.push_back(std::make_shared<Buffer>(this, outs[i], t.dtype, t.dims, device));
  }
  return result;
}

std::vector<std::vector<BufferPtr>> Client::ExecuteReplicated(
    const Executable& exe, const std::vector<std::vector<PJRT_Buffer*>>& in,
    const std::vector<int>& devices) {
  const size_t n = in.size();
  const size_t num_outputs = exe.outputs().size();
  if (devices.size() != n) throw Error(3, "ExecuteReplicated: one device per argument list");
  std::vector<std::vector<PJRT_Buffer*>> outs(n, std::vector<PJRT_Buffer*>(num_outputs));
  std::vector<PJRT_Buffer* const*> arg_lists;
  std::vector<PJRT_Buffer**> out_lists;
  for (size_t i = 0; i < n; ++i) {
    if (in[i].size() != in[0].size()) throw Error(3, "ExecuteReplicated: ragged argument lists");
    arg_lists.push_back(in[i].data());
    out_lists.push_back(outs[i].data());
  }
  Args<PJRT_ExecuteOptions> options;
  // The replicas of one launch meet in their collectives under its launch id (XLA's run id):
  // a launch that reused an id could meet the replicas of an earlier one still leaving.
  static std::atomic<int> launches{0};
  if (n > 1) options->launch_id = ++launches;
  Args<PJRT_LoadedExecutable_Execute_Args> args;
  args->executable = exe.raw();
  args->options = options.get();
  args->argument_lists = arg_lists.data();
  args->num_devices = n;
  args->num_args = n == 0 ? 0 : in[0].size();
  args->output_lists = out_lists.data();
  ExecuteWithin(api_, inflight_, devices, args.get());

  std::vector<std::vector<BufferPtr>> result(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < num_outputs; ++j) {
      const ShapedType& t = exe.outputs()[j];
      result[i].push_back(std::make_shared<Buffer>(this, outs[i][j], t.dtype, t.dims, devices[i]));
    }
  }
  return result;
}

}  // namespace tpu::rt
