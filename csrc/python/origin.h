// Fused mode's op origins: the user's Python line that recorded each op.
#pragma once

#include <string>
#include <vector>

namespace tpu::python {

// Frames whose file starts with one of `library_prefixes` are skipped: the origin is the
// innermost frame of the user's own code.
void InstallOriginCapture(std::vector<std::string> library_prefixes);

}  // namespace tpu::python
