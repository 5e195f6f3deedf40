// Registers the distributed bindings of torchtpu._C.
#pragma once

#include <pybind11/pybind11.h>

namespace tpu::python {

void RegisterDistributed(pybind11::module& m);

}  // namespace tpu::python
