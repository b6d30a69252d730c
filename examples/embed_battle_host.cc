// How a battle host embeds verdict: start a BattleNode once, add a room for every battle the
// lobby allocates to this host, feed it what happens, and let it finish. The node stores each
// result durably and delivers it to the lobby; the host never talks to the lobby about results.
// Built with the rest of verdict so it always compiles; it is not run by the tests.
#include <cstdio>
#include <memory>
#include <string>

#include "verdict/node/battle_node.h"

namespace {

// The host tells the room's connected game clients that the battle is over.
class GameClients : public verdict::node::BattleEndNotifier {
 public:
  void NotifyBattleEnd(const verdict::v1::BattleResult& result) override {
    std::printf("room %llu over, winner team %u\n",
                static_cast<unsigned long long>(result.room_id()), result.winner_team());
  }
};

// The host keeps replays wherever it likes; verdict only records the path.
class ReplayFiles : public verdict::node::ReplayStore {
 public:
  verdict::Result<std::string> WriteReplay(const verdict::v1::BattleResult& result) override {
    return "/var/lib/battle-host/replays/" + std::to_string(result.room_id()) + ".rep";
  }
};

}  // namespace

int main() {
  // The host's objects that rooms call are shared with the rooms (RoomOptions), so they live as
  // long as any room may call them, whatever order they and the node are destroyed in.
  auto clients = std::make_shared<GameClients>();
  auto replays = std::make_shared<ReplayFiles>();

  verdict::node::NodeOptions options;
  options.node_id = "battle-host-7";
  options.outbox_dir = "/var/lib/battle-host/verdict-outbox";
  options.lobby_urls = {"http://lobby-a.internal:8080", "http://lobby-b.internal:8080"};
  options.token = "the-token-the-lobby-knows-this-host-by";
  options.metrics_listen = "0.0.0.0:9464";
  auto node = verdict::node::BattleNode::Start(options);
  if (!node.ok()) {
    std::fprintf(stderr, "verdict: %s\n", node.status().ToString().c_str());
    return 1;
  }

  // The lobby allocated room 42 to this host with this roster.
  verdict::v1::RoomAllocation allocation;
  allocation.set_room_id(42);
  allocation.set_node_id(options.node_id);
  for (int player = 1; player <= 10; ++player) {
    verdict::v1::Seat* seat = allocation.add_seats();
    seat->set_player_id("player-" + std::to_string(player));  // any 1-64 bytes of UTF-8
    seat->set_team(player <= 5 ? 1 : 2);
  }
  // A host that feeds rooms from an event loop asks for Finishing::kHandedOff, so that no call
  // ever blocks; this one calls from its worker threads, where the call that finishes the room
  // may wait while the outbox cannot write.
  auto room =
      (*node)->AddRoom(allocation, {.notifier = clients,
                                    .replays = replays,
                                    .finishing = verdict::node::Finishing::kOnCallingThread});
  if (!room.ok()) {
    std::fprintf(stderr, "verdict: %s\n", room.status().ToString().c_str());
    return 1;
  }

  // During the battle. The handle may be kept as long as the host likes: once the room has been
  // released (30 s after it finished) every call answers NOT_FOUND instead of touching freed
  // memory, so a late reconnect is refused cleanly.
  room->RecordStats("player-3", /*kills=*/12, /*deaths=*/4, /*assists=*/7, /*score=*/2400)
      .IgnoreError();
  room->SetOnline("player-9", false).IgnoreError();  // a player dropped
  // At the end every client reports who won; more than half of the nine eligible seats (five
  // votes) decide it, and the room finishes itself: its result is queued for the outbox, durable
  // once the node's writer has synced it (NodeOptions::on_stored), and then delivered. A report
  // that comes after the decision is refused (FAILED_PRECONDITION), which is fine.
  for (int player = 1; player <= 10; ++player) {
    room->Report("player-" + std::to_string(player), 1).IgnoreError();
  }

  // On exit: Shutdown stores what is still queued (within writer.shutdown_deadline) and returns
  // how many results it could not; what is stored and not yet delivered goes out after the next
  // start.
  if ((*node)->Shutdown() > 0) return 1;
  return 0;
}
