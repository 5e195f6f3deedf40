// Registers the torch.compile bindings of torchtpu._C (graph capture and replay).
#pragma once

#include <pybind11/pybind11.h>

namespace tpu::python {

void RegisterCompile(pybind11::module& m);

}  // namespace tpu::python
