// torchtpu._C's torch.compile half: capturing an FX graph's run as one program, and replaying it.
#include "python/compile.h"

#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/graph_capture.h"

namespace py = pybind11;

namespace tpu::python {

namespace {

// Graph inputs and outputs are tensors, None and plain numbers; anything else (a SymInt of a
// dynamic graph) becomes a string, which a capture refuses.
std::vector<c10::IValue> ToIValues(const py::sequence& xs) {
  std::vector<c10::IValue> out;
  out.reserve(xs.size());
  for (const py::handle& x : xs) {
    if (THPVariable_Check(x.ptr())) {
      out.emplace_back(THPVariable_Unpack(x.ptr()));
    } else if (x.is_none()) {
      out.emplace_back();
    } else if (py::isinstance<py::bool_>(x)) {
      out.emplace_back(x.cast<bool>());
    } else if (PyLong_CheckExact(x.ptr())) {
      out.emplace_back(x.cast<int64_t>());
    } else if (PyFloat_CheckExact(x.ptr())) {
      out.emplace_back(x.cast<double>());
    } else {
      out.emplace_back(std::string(py::str(py::type::handle_of(x))));
    }
  }
  return out;
}

py::list ToPython(const std::vector<c10::IValue>& xs) {
  py::list out;
  for (const c10::IValue& v : xs) {
    if (v.isTensor()) {
      out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(v.toTensor())));
    } else if (v.isInt()) {
      out.append(py::int_(v.toInt()));
    } else if (v.isDouble()) {
      out.append(py::float_(v.toDouble()));
    } else if (v.isBool()) {
      out.append(py::bool_(v.toBool()));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

}  // namespace

void RegisterCompile(py::module& m) {
  py::class_<aten::GraphProgram, std::shared_ptr<aten::GraphProgram>>(m, "_GraphProgram")
      .def("run",
           [](const aten::GraphProgram& p, const py::sequence& inputs) -> py::object {
             std::vector<c10::IValue> in = ToIValues(inputs);
             std::optional<std::vector<c10::IValue>> out;
             {
               py::gil_scoped_release release;
               out = p.Run(in);
             }
             if (!out) return py::none();
             return ToPython(*out);
           })
      .def_property_readonly("num_params",
                             [](const aten::GraphProgram& p) { return p.params.size(); })
      .def_property_readonly("has_program",
                             [](const aten::GraphProgram& p) { return p.exe != nullptr; });
  m.def("_begin_graph_capture", [](int device, const py::sequence& inputs) {
    aten::BeginGraphCapture(device, ToIValues(inputs));
  });
  m.def("_end_graph_capture", [](const py::sequence& outputs) {
    std::vector<c10::IValue> out = ToIValues(outputs);
    py::gil_scoped_release release;
    return aten::EndGraphCapture(out);
  });
  m.def("_abort_graph_capture", [] {
    py::gil_scoped_release release;
    aten::AbortGraphCapture();
  });
}

}  // namespace tpu::python
