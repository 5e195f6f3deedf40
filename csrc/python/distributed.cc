// torchtpu._C's distributed half: the c10d backend "tpu" and the multi-process client set-up.
#include "python/distributed.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/process_group_tpu.h"
#include "distributed/store_kv.h"
#include "eager/executor.h"

namespace py = pybind11;

namespace tpu::python {

void RegisterDistributed(py::module& m) {
  m.def(
      "_dist_backend",
      [](int rank, int size, double timeout_s, const std::string& uid, const py::object& host,
         std::vector<int> device_ids, bool fuse) -> c10::intrusive_ptr<c10d::Backend> {
        c10::intrusive_ptr<c10d::Backend> h;
        if (!host.is_none()) h = host.cast<c10::intrusive_ptr<c10d::Backend>>();
        auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
        return c10::make_intrusive<dist::ProcessGroupTPU>(rank, size, timeout, uid, std::move(h),
                                                          std::move(device_ids), fuse);
      },
      py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("uid"), py::arg("host"),
      py::arg("device_ids"), py::arg("fuse") = false);
  // A client that spans processes: this one is node `node_id` of `num_nodes`, they exchange
  // their topology through `store`. Must come before the client is first used.
  m.def("_init_multiprocess",
        [](const std::string& plugin, const std::string& platform, int node_id, int num_nodes,
           std::vector<int64_t> visible, const c10::intrusive_ptr<c10d::Store>& store) {
          rt::ClientOptions o;
          o.plugin_path = plugin;
          o.platform = platform;
          o.node_id = node_id;
          o.num_nodes = num_nodes;
          o.visible_devices = std::move(visible);
          o.kv_store = std::make_shared<dist::StoreKeyValueStore>(store);
          eager::Configure(o);
        });
  m.def("_global_device_count", [] { return eager::Client().global_device_count(); });
  m.def("_device_id", [](int device) { return eager::Client().device_id(device); });
  // The store adapter PJRT's key-value callbacks call (exposed so tests can drive it).
  py::class_<dist::StoreKeyValueStore, std::shared_ptr<dist::StoreKeyValueStore>>(m, "_StoreKV")
      .def(py::init<c10::intrusive_ptr<c10d::Store>>())
      .def("get",
           [](dist::StoreKeyValueStore& kv, const std::string& key, int timeout_ms) {
             py::gil_scoped_release release;
             return py::bytes(kv.Get(key, timeout_ms));
           })
      .def("try_get",
           [](dist::StoreKeyValueStore& kv, const std::string& key) -> py::object {
             std::string v;
             if (!kv.TryGet(key, &v)) return py::none();
             return py::bytes(v);
           })
      .def("put", [](dist::StoreKeyValueStore& kv, const std::string& key,
                     const std::string& value) { kv.Put(key, value); });
}

}  // namespace tpu::python
