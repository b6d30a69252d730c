// The recovery-drain benchmark (see drain.cc for what it compares).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/report.h"

namespace verdict::bench {

struct DrainOptions {
  uint64_t backlog = 100'000;                     // results waiting when the lobby comes back
  std::vector<uint32_t> shards = {1, 4, 16, 64};  // outbox shard counts to measure
  std::vector<size_t> batches = {1, 16, 64};      // records per request (deliverer --batch)
  uint64_t serial_backlog = 5'000;                // the serial baseline drains this many
  uint32_t pg_concurrency = 16;                   // pgbench clients for the ceiling
  int lobby_db_pool = 8;                          // the in-process lobby's DB workers
  double lobby_coalesce_ms = 2;  // the lobby's --coalesce-wait-ms (0: no group commit)
  double rtt_ms = 0;             // round trip added between node and lobby by a proxy (0: direct)
  double produce_rate = 0;       // results/s produced during a second drain per shard count
  std::string svg;               // write the drain-rate chart here when set
  std::string db;                // libpq conninfo; empty: PG* environment
  OutputOptions output;
};

int RunDrain(const DrainOptions& options);

}  // namespace verdict::bench
