// Validation of the bodies the lobby accepts: a RoomAllocation or a BattleResult is OK or
// INVALID_ARGUMENT saying what is wrong. The node checks results with the same function before
// it stores them, so that nothing it accepts is bound to be refused by the lobby. No I/O;
// thread-safe. Fuzzed by tests/fuzz.
#pragma once

#include <string>

#include "common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::wire {

Status ValidateAllocation(const v1::RoomAllocation& allocation);
Status ValidateResult(const v1::BattleResult& result);

// The parts, for those who check an input before they build a whole message from it (a node's
// id at start, a room's statistics as the host records them): the same rules, one home.
Status ValidateNodeId(const std::string& node_id);
// One player of a result; its team is checked against the room's by ValidateResult.
Status ValidatePlayerResult(const v1::PlayerResult& player);

}  // namespace verdict::wire
