// torch.profiler's view of the device: a Kineto child profiler that turns the programs a tpu runs
// (and the compiles that made them) into trace activities.
#pragma once

namespace tpu::python {

// Registers the profiler with Kineto; `torch.profiler.profile(activities=[..., PrivateUse1])`
// then starts and stops it.
void RegisterProfiler();

}  // namespace tpu::python
