// Value checks of ops, like CUDA's device-side asserts but recoverable. An op whose rule checks
// its inputs (an index in range, a valid probability) returns an s64[2] flag beside its results:
// [0, 0], or [k + 1, quoted value] when its check k failed. Strict and debug modes read the flag
// at once and the op raises; fused mode keeps it here, and the next host read or sync raises the
// failure, naming the op and the line that recorded it. TORCHTPU_CHECKS=0 turns checks off.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eager/executor.h"
#include "eager/lazy.h"
#include "eager/origin.h"

namespace tpu::eager {

struct CheckText {
  bool index_error = false;  // IndexError, else RuntimeError
  std::string message;       // "{}" stands for the quoted value
};
using CheckTexts = std::shared_ptr<const std::vector<CheckText>>;

bool ChecksEnabled();
void SetChecksEnabled(bool on);  // for benchmarks: checks on against off in one process

// The error a flag holds, if any; `where` follows the message (the op and its line).
std::optional<OpError> CheckError(const int64_t flag[2], const std::vector<CheckText>& texts,
                                  const std::string& where);

// An op's flag, just submitted: run already (strict, debug), it raises now; recorded (fused), it
// is kept for RaiseFailedChecks.
void AfterSubmit(const LazyPtr& flag, const CheckTexts& texts, const std::string& op);

// Raises the first failure among `device`'s kept flags that are computed by now (all of them,
// waiting, with `wait`). Passing flags are dropped; so is a failure once raised.
void RaiseFailedChecks(int device, bool wait);

}  // namespace tpu::eager
