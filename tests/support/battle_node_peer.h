// BattleNodeTestPeer: the parts of a BattleNode that tests reach behind its public interface —
// its result channel (to fill it, and to watch producers wait on it), its outbox (to read what
// it stored while it runs) and its room table (to release rooms on the test's schedule). A host
// has none of them. Header-only.
#pragma once

#include "node/battle_node.h"
#include "node/result_channel.h"
#include "node/room_table.h"
#include "storage/outbox.h"

namespace verdict::node {

class BattleNodeTestPeer {
 public:
  static ResultChannel& results(BattleNode& node) { return *node.channel_; }
  static storage::Outbox& outbox(BattleNode& node) { return *node.outbox_; }
  static RoomTable& rooms(BattleNode& node) { return *node.rooms_; }
};

}  // namespace verdict::node
