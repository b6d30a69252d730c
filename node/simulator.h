// Simulator: a stand-in battle host for `verdict-node run --simulate-*` and the demo. It
// allocates rooms at the lobby at a steady rate, of each kind of battle in turn (a 5v5, a
// free-for-all, a battle royale: SimulatedMode), lets each battle run for a while, then plays out
// the end the way real clients do — disconnects, the odd kick, placements reported by every
// player that mostly agree, occasional aborts — and finishes the room through the node. Runs on
// its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "node/battle_node.h"
#include "node/lobby_admin_client.h"

namespace verdict::node {

// A kind of battle: `teams` teams of `team_size` players, allocated in `mode`.
struct SimulatedMode {
  // The allocation's mode, declared at the lobby beforehand. Default: none named, which the
  // lobby reads as "default".
  std::string mode;
  uint32_t teams = 2;      // Default: 2
  uint32_t team_size = 5;  // Default: 5
};

// The kinds of battle of `--simulate-modes`: "MODE=TEAMSxSIZE,…", for example
// "ranked-5v5=2x5,ffa-8=8x1,royale-trios=20x3". INVALID_ARGUMENT naming the item that is not
// one, or whose room the lobby would refuse (wire::ValidateAllocation: a mode name of
// [a-z0-9._-], 2 to 100 teams, at most 200 seats).
Result<std::vector<SimulatedMode>> ParseSimulatedModes(std::string_view list);

struct SimulatorOptions {
  uint64_t rooms = 0;                      // battles to play in all
  double rooms_per_s = 50;                 // how fast new battles start
  std::chrono::milliseconds battle{2000};  // how long a battle lasts (±25 %)
  std::vector<std::string> lobby_urls;
  std::string admin_token;
  // First room id; 0 picks one from the clock (seconds × 1,000,000) so runs never collide.
  uint64_t first_room_id = 0;
  // Players are first_player_id … first_player_id + pool - 1 (a restarted host whose earlier
  // battles were cut short may want fresh ones).
  uint64_t first_player_id = 1;
  uint64_t seed = 0;  // 0: random
  // The kinds of battle, played in turn: the first room of the first kind, the next of the
  // second, and round again. The players are one pool, so a player plays in several modes.
  // Default: 5v5s in no named mode, as before modes.
  std::vector<SimulatedMode> modes = {SimulatedMode{}};
};

struct SimulatorCounts {
  uint64_t started = 0;   // rooms allocated and playing or done
  uint64_t finished = 0;  // rooms whose result went to the node
  uint64_t aborted = 0;
  uint64_t suspect = 0;
  uint64_t allocation_failures = 0;  // lobby unreachable or refusing; retried
};

class Simulator {
 public:
  // `node` must outlive the simulator.
  Simulator(SimulatorOptions options, BattleNode& node);
  ~Simulator();
  void Start();
  // Asks the playing thread to stop after the room it is ending, without waiting: a room's end
  // may be blocked on a full channel, which only the node's Shutdown releases.
  void RequestStop();
  // RequestStop, then waits for the playing thread.
  void Stop();
  // All rooms played and finished.
  bool done() const { return done_.load(); }
  SimulatorCounts counts() const;

 private:
  struct Battle;
  class Play;  // the playing thread's players, battles and pacing (simulator.cc)
  void Run();

  const SimulatorOptions options_;
  BattleNode& node_;
  LobbyAdminClient lobby_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> started_{0}, finished_{0}, aborted_{0}, suspect_{0}, failures_{0};
  std::thread thread_;
};

}  // namespace verdict::node
