// The lobby memory benchmark (see lobby_memory.cc): verdict-lobby's resident memory idle, after a
// burst of the largest valid settlement batches, and once the burst has settled.
#pragma once

#include <string>

#include "bench/report.h"

namespace verdict::bench {

struct LobbyMemoryOptions {
  int batches = 20;          // settlement batches in the burst
  int rooms = 256;           // rooms per batch: the most a batch may carry (wire::kMaxBatchResults)
  int seats = 200;           // seats per room: the most a room may have (wire::kMaxPlayers)
  int clients = 2;           // batches in flight at once
  int db_pool = 8;           // the lobby's --db-pool
  double settle_s = 5;       // how long the lobby is left idle after the burst, its RSS sampled
  std::string lobby_binary;  // verdict-lobby to run; empty: the one built with this bench
  std::string baseline_lobby;  // another build's verdict-lobby to run the same way; empty: none
  std::string db;              // libpq conninfo of the server; empty: PG* environment
  OutputOptions output;
};

int RunLobbyMemory(const LobbyMemoryOptions& options);

}  // namespace verdict::bench
