// torchtpu._C: the Python face of the runtime (the only place that includes Python headers).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>

#include "aten/generator.h"
#include "aten/op_cache.h"
#include "eager/bounded.h"
#include "eager/checks.h"
#include "eager/executor.h"
#include "eager/profile.h"
#include "eager/trace.h"
#include "lowering/rule.h"
#include "python/compile.h"
#include "python/distributed.h"
#include "python/origin.h"
#include "python/profiler.h"

namespace py = pybind11;

namespace tpu {
namespace {

void Init(const std::string& plugin_path, const std::string& platform, int cpu_device_count) {
  rt::ClientOptions o;
  o.plugin_path = plugin_path;
  o.platform = platform;
  o.cpu_device_count = cpu_device_count;
  eager::Configure(o);
}

py::dict Metrics() {
  eager::Metrics& m = eager::GetMetrics();
  py::dict d;
  d["compiles"] = m.compiles.load();
  d["executions"] = m.executions.load();
  d["cache_hits"] = m.cache_hits.load();
  d["cpu_fallbacks"] = m.cpu_fallbacks.load();
  d["compile_seconds"] = static_cast<double>(m.compile_ns.load()) * 1e-9;
  d["disk_cache_hits"] = m.disk_hits.load();
  d["recorded_ops"] = m.recorded_ops.load();
  d["replayed_ops"] = m.replayed_ops.load();
  d["flushes"] = m.flushes.load();
  d["fused_collectives"] = m.fused_collectives.load();
  d["lone_collectives"] = m.lone_collectives.load();
  d["retried_loads"] = m.retried_loads.load();
  d["donated_buffers"] = m.donated_buffers.load();
  d["bounded_runs"] = m.bounded_runs.load();
  d["scalar_uploads"] = m.scalar_uploads.load();
  d["flush_seconds"] = static_cast<double>(m.flush_ns.load()) * 1e-9;
  d["execute_seconds"] = static_cast<double>(m.execute_ns.load()) * 1e-9;
  d["loaded_programs"] = eager::Client().loaded_executables();  // a gauge: never reset
  return d;
}

void ResetMetrics() {
  eager::Metrics& m = eager::GetMetrics();
  m.compiles = 0;
  m.executions = 0;
  m.cache_hits = 0;
  m.cpu_fallbacks = 0;
  m.compile_ns = 0;
  m.disk_hits = 0;
  m.recorded_ops = 0;
  m.replayed_ops = 0;
  m.flushes = 0;
  m.fused_collectives = 0;
  m.lone_collectives = 0;
  m.retried_loads = 0;
  m.donated_buffers = 0;
  m.bounded_runs = 0;
  m.scalar_uploads = 0;
  m.flush_ns = 0;
  m.execute_ns = 0;
}

const char* ModeName(eager::Mode m) {
  switch (m) {
    case eager::Mode::kDebug:
      return "debug";
    case eager::Mode::kFused:
      return "fused";
    default:
      return "strict";
  }
}

aten::TpuGenerator* Gen(int device) {
  return aten::DefaultGenerator(static_cast<c10::DeviceIndex>(device)).get<aten::TpuGenerator>();
}

}  // namespace
}  // namespace tpu

PYBIND11_MODULE(_C, m) {
  using namespace tpu;
  python::RegisterDistributed(m);
  python::RegisterProfiler();
  python::RegisterCompile(m);
  m.def("_init", &Init);
  m.def("_initialized", &eager::Initialized);
  m.def("_set_unavailable", &eager::SetUnavailable);
  m.def("device_count", [] { return eager::Configured() ? eager::Client().device_count() : 0; });
  m.def("platform_name", [] { return eager::Client().platform_name(); });
  m.def("plugin_path", [] { return eager::Client().plugin_path(); });
  m.def("device_kind", [](int device) { return eager::Client().device_kind(device); });
  m.def("api_version",
        [] { return py::make_tuple(eager::Client().api_major(), eager::Client().api_minor()); });
  m.def("synchronize", [](int device) {
    {
      py::gil_scoped_release release;
      eager::Synchronize(device);
    }
    try {
      eager::RaiseFailedChecks(device, true);  // a sync raises what failed in fused programs
    } catch (const eager::OpError& e) {
      if (e.index_error) throw py::index_error(e.what());
      throw;
    }
  });
  m.def("_set_checks", &eager::SetChecksEnabled);
  m.def("_set_donation", &eager::SetDonation);
  m.def("_set_bounded", &eager::SetBounded);
  m.def("_bounded", &eager::BoundedOn);
  m.def("_add_size_hint", &eager::AddSizeHint);
  m.def("_drop_size_hint", &eager::DropSizeHint);
  m.def("_size_hints", &eager::SizeHints);
  m.def("_set_op_cache", &aten::SetOpCacheEnabled);
  m.def("_refuse_float64", &eager::RefuseFloat64);  // tests: behave as a TPU does
  m.def("_set_profiling", &eager::SetProfiling);
  // (program, ops, launch, queued, ready) in seconds of the steady clock; ready is -1e-9 for a
  // run still in flight.
  m.def("_take_program_runs", [] {
    py::list out;
    for (const eager::ProgramRun& r : eager::TakeRuns()) {
      out.append(py::make_tuple(r.program, r.ops, r.launch_ns * 1e-9, r.queued_ns * 1e-9,
                                r.ready_ns * 1e-9));
    }
    return out;
  });
  m.def("_checks", &eager::ChecksEnabled);
  m.def("metrics", &Metrics);
  m.def("_configure_cache", [](const std::string& dir, const std::string& version, int64_t max) {
    return eager::ConfigureDiskCache(dir, version, max);
  });
  m.def("_disk_cache_stats", [] {
    rt::DiskCacheStats s = eager::DiskCacheStats();
    py::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["corrupt"] = s.corrupt;
    d["bytes_read"] = s.bytes_read;
    d["bytes_written"] = s.bytes_written;
    return d;
  });
  m.def("reset_metrics", &ResetMetrics);
  m.def("_in_bad_fork", [] { return rt::InForkedChild(); });
  m.def("memory_stats", [](int device) {
    {
      py::gil_scoped_release release;
      eager::Flush(device);  // pending values count once they exist
    }
    rt::MemoryStats s = eager::Client().memory_stats(device);
    py::dict d;
    d["bytes_in_use"] = s.in_use;
    d["peak_bytes_in_use"] = s.peak;
    d["bytes_limit"] = s.limit;
    d["live_buffers"] = s.buffers;
    return d;
  });
  // The live buffers by type, for finding what a leak holds (tests/test_soak.py).
  m.def("_live_buffers", [](int device) {
    {
      py::gil_scoped_release release;
      eager::Flush(device);
    }
    return eager::Client().live_buffers(device);
  });
  m.def("get_mode", [] { return ModeName(eager::GetMode()); });
  m.def("set_mode", [](const std::string& mode) {
    for (eager::Mode mo : {eager::Mode::kDebug, eager::Mode::kStrict, eager::Mode::kFused}) {
      if (mode == ModeName(mo)) {
        py::gil_scoped_release release;  // leaving fused mode runs what is pending
        eager::SetMode(mo);
        return;
      }
    }
    throw py::value_error("unknown mode '" + mode + "': expected 'debug', 'strict' or 'fused'");
  });
  m.def("_flush", [](int device) {
    py::gil_scoped_release release;
    eager::Flush(device);
  });
  m.def("_pending_ops", [](int device) { return eager::TraceOf(device).pending_ops(); });
  m.def("_set_fused_max_ops", [](size_t n) { eager::Trace::SetMaxOps(n); });
  m.def("_fused_max_ops", [] { return eager::Trace::MaxOps(); });
  m.def("_has_rule", [](const std::string& name, const std::string& overload) {
    return lowering::FindRule(name, overload) != nullptr;
  });
  m.def("_install_origin_capture", &python::InstallOriginCapture);
  m.def("manual_seed", [](int device, uint64_t seed) { Gen(device)->set_current_seed(seed); });
  m.def("seed", [](int device) { return Gen(device)->seed(); });
  m.def("initial_seed", [](int device) { return Gen(device)->current_seed(); });
  m.def("get_rng_state", [](int device) {
    at::Tensor t = at::Tensor(Gen(device)->get_state());
    return py::bytes(static_cast<const char*>(t.data_ptr()), 16);
  });
  m.def("set_rng_state", [](int device, const std::string& state) {
    at::Tensor t = at::empty({static_cast<int64_t>(state.size())}, at::kByte);
    std::memcpy(t.data_ptr(), state.data(), state.size());
    Gen(device)->set_state(*t.unsafeGetTensorImpl());
  });
  m.def("default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        aten::DefaultGenerator(static_cast<c10::DeviceIndex>(device))));
  });
}
