// The ingest memory benchmark (see ingest_memory.cc): verdict-node's resident memory while many
// local connections each hold a batch body short of its last byte, with the node's body budget
// and without it.
#pragma once

#include <cstdint>
#include <string>

#include "bench/report.h"
#include "node/options.h"

namespace verdict::bench {

struct IngestMemoryOptions {
  int connections = 200;  // connections to the node's Unix socket, each holding one body
  // The node's --ingest-body-budget-mib in the bounded run: by default, the node's default.
  uint64_t budget_mib = node::IngestOptions{}.max_body_bytes_in_flight >> 20;
  double hold_s = 2;        // how long the bodies are held while memory is sampled
  std::string node_binary;  // verdict-node to run; empty: the one built with this bench
  OutputOptions output;
};

int RunIngestMemory(const IngestMemoryOptions& options);

}  // namespace verdict::bench
