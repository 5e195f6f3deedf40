// Captures where an op was recorded in fused mode: the innermost Python frame outside torch and
// torchtpu (the user's line). Code objects are kept alive for the process, so an origin is
// plain data that any thread may drop without the GIL; line numbers are computed only when a
// fused program fails and its error names the op.
#include "python/origin.h"

#include <Python.h>
#include <frameobject.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "eager/origin.h"

namespace tpu::python {

namespace {

std::vector<std::string> g_skip;  // path prefixes of library code (torch, torchtpu)
std::mutex g_code_mu;
std::unordered_set<PyObject*> g_kept_code;

struct PyOrigin final : eager::Origin {
  PyCodeObject* code = nullptr;
  int lasti = 0;
  std::string Describe() const override {
    PyGILState_STATE gil = PyGILState_Ensure();
    std::string where = "<unknown>";
    if (code != nullptr) {
      const char* file = PyUnicode_AsUTF8(code->co_filename);
      const char* name = PyUnicode_AsUTF8(code->co_name);
      int line = PyCode_Addr2Line(code, lasti);
      where = std::string(file ? file : "?") + ":" + std::to_string(line) + " in " +
              (name ? name : "?");
    }
    PyErr_Clear();
    PyGILState_Release(gil);
    return where;
  }
};

bool IsLibrary(PyCodeObject* code) {
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (file == nullptr) {
    PyErr_Clear();
    return false;
  }
  for (const std::string& p : g_skip) {
    if (std::strncmp(file, p.data(), p.size()) == 0) return true;
  }
  return false;
}

void Keep(PyCodeObject* code) {
  std::lock_guard<std::mutex> lock(g_code_mu);
  if (g_kept_code.insert(reinterpret_cast<PyObject*>(code)).second) Py_INCREF(code);
}

eager::OriginPtr Capture() {
  // Threads that never ran Python (autograd's device threads) have no user line to report.
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  auto origin = std::make_shared<PyOrigin>();
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);
    bool library = IsLibrary(code);
    if (origin->code == nullptr || !library) {  // the innermost frame, unless a user frame
      Keep(code);
      origin->code = code;
      origin->lasti = PyFrame_GetLasti(f);
    }
    Py_DECREF(code);
    PyFrameObject* back = library ? PyFrame_GetBack(f) : nullptr;
    Py_DECREF(f);
    f = back;
  }
  PyGILState_Release(gil);
  return origin->code ? origin : nullptr;
}

}  // namespace

void InstallOriginCapture(std::vector<std::string> library_prefixes) {
  g_skip = std::move(library_prefixes);
  eager::SetOriginCapturer(&Capture);
}

}  // namespace tpu::python
