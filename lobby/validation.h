// Validation of the bodies the lobby accepts: a RoomAllocation or a BattleResult is OK or
// INVALID_ARGUMENT saying what is wrong. No I/O; thread-safe. Fuzzed by tests/fuzz.
#pragma once

#include "common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

Status ValidateAllocation(const v1::RoomAllocation& allocation);
Status ValidateResult(const v1::BattleResult& result);

}  // namespace verdict::lobby
