// Where the ranks of one collective meet when they are threads of one process, each driving
// its own device of one PJRT client. Joining never blocks: the last rank to arrive launches
// the program for everyone (one replicated execution) and hands each rank its results.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/client.h"

namespace tpu::dist {

struct Part {
  int device = 0;         // the rank's local device
  std::string signature;  // what the rank issued, compared across ranks
  std::vector<rt::BufferPtr> inputs;
  // Runs once, on the launching thread: the rank's results, or the reason there are none
  // (`mismatch`: the ranks issued different signatures).
  std::function<void(std::vector<rt::BufferPtr> outputs, const std::string* error, bool mismatch)>
      done;
};

// Runs the program over every part (in meeting-rank order); returns each part's outputs.
using Launch = std::function<std::vector<std::vector<rt::BufferPtr>>(const std::vector<Part>&)>;

// Runs the program `build` makes (cached under `key` and the replicas' global device ids) with
// one replica per part; `ids` overrides the parts' devices' ids when one client spans processes.
std::vector<std::vector<rt::BufferPtr>> RunReplicated(const std::vector<Part>& parts,
                                                      const ir::Hash128& key,
                                                      const std::function<ir::Graph()>& build,
                                                      std::vector<int> ids = {});

// Adds `part` as participant `rank` of the `size` participants of meeting `key`. The last to
// join checks that every part issued the same signature on a distinct device, then calls
// `launch` and every part's done.
void Join(const std::string& key, int size, int rank, Part part, const Launch& launch);

// The participants of meeting `key` that have not joined yet (all of them if none has).
std::vector<int> Missing(const std::string& key, int size);

// Forgets a meeting that timed out, so that a late rank does not launch it for nobody.
void Abandon(const std::string& key);

// Ends a meeting that will not complete: the parts that joined are done with `why` as a mismatch.
void Cancel(const std::string& key, const std::string& why);

}  // namespace tpu::dist
