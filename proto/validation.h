// Validation of the bodies the lobby accepts: a RoomAllocation or a BattleResult is OK or
// INVALID_ARGUMENT saying what is wrong. The node checks results with the same function before
// it stores them, so that nothing it accepts is bound to be refused by the lobby. No I/O;
// thread-safe. Fuzzed by tests/fuzz.
#pragma once

#include "common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::wire {

Status ValidateAllocation(const v1::RoomAllocation& allocation);
Status ValidateResult(const v1::BattleResult& result);

}  // namespace verdict::wire
