// Collectives recorded into fused traces (ranks as threads of one process). A collective is then
// an op like any other: a DDP step's gradient all-reduces sit in the backward's program. When a
// trace holding collectives is flushed, the ranks meet with their whole programs and run them as
// one replicated execution. Ranks whose programs differ (a rank read a value the others did not,
// or sliced a rank-dependent piece) run those collectives one by one instead, and every rank
// does the same for every collective up to the last one any of them had recorded: after that
// watermark, the ranks' programs are fused again.
#pragma once

#include <cstdint>
#include <string>

namespace tpu::dist {

// Installs the meeting of eager::Trace (once).
void InstallMeet();

// Rank `rank` of `group` recorded collective `seq` into the trace of `device`: a rank waiting for
// it may flush that trace (the recording thread may be blocked elsewhere, as NCCL lets it be).
void NoteRecorded(const std::string& group, uint64_t seq, int rank, int device);

}  // namespace tpu::dist
