// How many programs each device of a multi-device client may have queued or running.
//
// XLA:CPU runs each replica of a replicated launch on one of its pool threads, and there takes a
// slot of the device's in-flight semaphore (32 programs), blocking if it is full. Replicas that
// already run wait in the collective's rendezvous, each holding a pool thread; with the pool that
// small (one thread per device), no thread is left to run the programs queued on the full device,
// so its slot never frees: the process hangs, then aborts on XLA's rendezvous timeout. Taking a
// slot of our own, on the caller's thread, before every execution, with fewer slots than XLA's,
// keeps XLA's semaphore from ever blocking a pool thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

namespace tpu::rt {

class InflightLimit {
 public:
  InflightLimit(int devices, int slots);

  // Blocks until each of `devices` has a free slot, then takes one on each, all at once (two
  // callers never hold part of what the other waits for).
  void Acquire(const std::vector<int>& devices);
  // Frees one slot of `device` (an execution there completed or never started).
  void Release(int device);
  // Slots of `device` taken now.
  int used(int device) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<int> used_;
  int slots_;
};

}  // namespace tpu::rt
