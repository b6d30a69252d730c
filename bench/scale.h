// The scale benchmark (see scale.cc): node memory over a deep backlog, and the cost of reading
// a shard's head after many acks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/report.h"

namespace verdict::bench {

struct ScaleOptions {
  uint64_t records = 1'000'000;  // backlog size
  size_t size = 2048;            // serialized result size, bytes
  uint32_t shards = 16;          // outbox shards
  double node_seconds = 10;      // how long verdict-node runs over the backlog
  std::string node_binary;       // verdict-node to run; empty: the one built with this bench
  OutputOptions output;
};

int RunScale(const ScaleOptions& options);

}  // namespace verdict::bench
