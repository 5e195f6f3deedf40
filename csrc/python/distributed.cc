// torchtpu._C's distributed half: constructs the c10d backend "tpu" for torchtpu.distributed.
#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "distributed/process_group_tpu.h"
#include "python/distributed.h"

namespace py = pybind11;

namespace tpu::python {

void RegisterDistributed(py::module& m) {
  m.def(
      "_dist_backend",
      [](int rank, int size, double timeout_s, const std::string& uid,
         const py::object& host) -> c10::intrusive_ptr<c10d::Backend> {
        c10::intrusive_ptr<c10d::Backend> h;
        if (!host.is_none()) h = host.cast<c10::intrusive_ptr<c10d::Backend>>();
        auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
        return c10::make_intrusive<dist::ProcessGroupTPU>(rank, size, timeout, uid, std::move(h));
      },
      py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("uid"), py::arg("host"));
}

}  // namespace tpu::python
