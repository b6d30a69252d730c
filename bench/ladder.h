// The ladder benchmark (see ladder.cc): a mode's leaderboard and the release of a room, at
// millions of rated players.
#pragma once

#include <cstdint>
#include <string>

#include "bench/report.h"

namespace verdict::bench {

struct LadderOptions {
  uint64_t players = 10'000'000;  // players, each rated in the mode "default"
  int pages = 200;                // leaderboard pages read (each of 100), from the top and deep
  int rooms = 50;                 // rooms allocated and then released, one at a time
  std::string lobby_binary;       // verdict-lobby to run; empty: the one built with this bench
  std::string db;                 // libpq conninfo of the server; empty: PG* environment
  OutputOptions output;
};

int RunLadder(const LadderOptions& options);

}  // namespace verdict::bench
