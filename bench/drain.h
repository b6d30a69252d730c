// The recovery-drain benchmark (see drain.cc for what it compares).
#pragma once

#include <cstdint>
#include <memory>
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
  // Room shapes and rating systems, "TxS:SYSTEM" (20x3:openskill: 20 teams of 3): with them, only
  // a drain of each, in a mode of its own, at the headline shards and the largest batch; the first
  // is the reference the others are measured against.
  std::vector<std::string> modes;
  // With a baseline: only the same drain through two verdict-lobby binaries, alternating, each on
  // a database of its own (bench/lobby_compare.cc).
  std::string baseline_lobby;  // the other build's verdict-lobby
  std::string lobby_binary;    // this build's (default: the one built with the benchmark)
  // With a baseline node as well: each side's results go through its own verdict-node process
  // (enqueue, then run) instead of this build's deliverers in the benchmark's process.
  std::string baseline_node;  // the other build's verdict-node
  std::string node_binary;    // this build's (default: the one built with the benchmark)
  int rounds = 2;             // drains through each binary
  // Without a baseline: how many times the headline drain and the batch ceiling run, alternating
  // (the first time within the drains); the headline ratio is of their medians.
  int ceiling_rounds = 1;
  OutputOptions output;
};

// The shard count the headline figures are measured at: 16 if `shards` has it, else the most.
uint32_t HeadlineShards(const DrainOptions& options);
// The batch they are measured at: the deliverer's default if `batches` has it, else the largest.
size_t HeadlineBatch(const DrainOptions& options);

// The drain through `baseline_lobby` and through `lobby_binary`, alternating (lobby_compare.cc).
int RunLobbyComparison(const DrainOptions& options);

int RunDrain(const DrainOptions& options);

// A drain of results for rooms base + 1 … base + n that are allocated already, into the lobby at
// `lobby_url`, through deliverers of `shards` shards sending batches of `batch` (outbox files in
// `dir`); the receipts are counted in `conninfo`. The players go as integer ids, which every
// lobby build reads, those from before string ids too. Results per second, 0 if it could not run.
double DrainAllocated(const std::string& conninfo, const std::string& dir, uint32_t shards,
                      size_t batch, uint64_t base, uint64_t n, const std::string& lobby_url);

// One drain on its own, for the modes that measure a drain under other conditions (retention):
// a lobby in this process on `conninfo` with `pool` DB workers, its default group commit and the
// drain's node token, and a drain of `n` results for rooms base + 1 … base + n through deliverers
// of `shards` shards sending batches of `batch` (outbox files in `dir`). Allocates the rooms
// first, as a drain run does.
class DrainLobby {
 public:
  DrainLobby(const std::string& conninfo, int pool);
  ~DrainLobby();
  DrainLobby(const DrainLobby&) = delete;
  DrainLobby& operator=(const DrainLobby&) = delete;

  // 0 if it could not start.
  uint16_t port() const;
  // Results per second, 0 if the drain could not run.
  double Drain(const std::string& dir, uint32_t shards, size_t batch, uint64_t base,
               uint64_t n) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string conninfo_;
};

}  // namespace verdict::bench
