// What an operator does with a room whose battle host is gone (docs/operating.md, "Pending
// settlement"): release its players to a pending settlement, which still accepts the room's result,
// or settle it as ABORTED without its node. The endpoints (POST /v1/rooms/{room_id}:release and
// :abort) are SettlementService members, in room_actions.cc; AbortResult is the one ABORTED result
// that both the endpoint and `verdict-lobby reconcile --abort-lost` settle, through the settlement
// path every result takes. Stateless; thread-safe.
#pragma once

#include <string>

#include "lobby/settlement_store.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

// The ABORTED result that settles `room` for its node: its seats, `reason` as abort_reason, and
// the allocation time as ended_at_ms, so that the same abort sent again is the same payload (a
// duplicate), and the node's own result, arriving later, is refused (OUTCOME_CONFLICT, or
// IDEMPOTENCY_MISMATCH if it is an ABORTED one too) instead of settling the room again.
v1::BattleResult AbortResult(const AllocatedRoom& room, const std::string& reason);

}  // namespace verdict::lobby
