// The statuses the lobby's SQL functions answer, each spelled once: a table per function, of the
// name the function returns and the record's status it means. The PostgreSQL store reads every
// status through these tables, and the tests iterate over them (tests/lobby/pg_statuses_test.cc
// holds each table equal to the names its SQL function can return). Constant data: any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

template <typename E>
struct SqlStatus {
  std::string_view name;  // as the SQL function returns it
  E status;
};

// sql/functions/verdict_allocate.sql
inline constexpr SqlStatus<AllocateStatus> kAllocateStatuses[] = {
    {"allocated", AllocateStatus::kAllocated},
    {"duplicate", AllocateStatus::kDuplicate},
    {"room_exists", AllocateStatus::kRoomExists},
    {"player_busy", AllocateStatus::kPlayerBusy},
    {"room_id_reused", AllocateStatus::kRoomIdReused},
    {"mode_unknown", AllocateStatus::kModeUnknown},
    {"shape_refused", AllocateStatus::kShapeRefused},
    {"mode_closed", AllocateStatus::kModeClosed},
};

// sql/functions/verdict_settle_prepare.sql. Its 'settle' is a room this call writes: answered
// kSettled once the write commits (a call that does not commit answers no room from its rows).
inline constexpr std::string_view kSettleToWrite = "settle";
inline constexpr SqlStatus<SettleStatus> kSettleStatuses[] = {
    {kSettleToWrite, SettleStatus::kSettled},
    {"duplicate", SettleStatus::kDuplicate},
    {"room_unknown", SettleStatus::kRoomUnknown},
    {"outcome_conflict", SettleStatus::kOutcomeConflict},
    {"idempotency_mismatch", SettleStatus::kIdempotencyMismatch},
    {"roster_mismatch", SettleStatus::kRosterMismatch},
    {"busy", SettleStatus::kBusy},
    {"original_expired", SettleStatus::kOriginalExpired},
};

// sql/functions/verdict_declare_mode.sql
inline constexpr SqlStatus<DeclareStatus> kDeclareStatuses[] = {
    {"created", DeclareStatus::kCreated},
    {"updated", DeclareStatus::kUpdated},
    {"unchanged", DeclareStatus::kUnchanged},
    {"in_use", DeclareStatus::kInUse},
    {"seed_unknown", DeclareStatus::kSeedUnknown},
    {"seed_system_differs", DeclareStatus::kSeedSystemDiffers},
    {"mode_unknown", DeclareStatus::kModeUnknown},
};

// sql/functions/verdict_import_rating.sql
inline constexpr SqlStatus<ImportStatus> kImportStatuses[] = {
    {"imported", ImportStatus::kImported},
    {"player_busy", ImportStatus::kPlayerBusy},
    {"mode_unknown", ImportStatus::kModeUnknown},
};

// sql/functions/verdict_release_room.sql
inline constexpr SqlStatus<ReleaseStatus> kReleaseStatuses[] = {
    {"released", ReleaseStatus::kReleased},
    {"room_unknown", ReleaseStatus::kRoomUnknown},
    {"busy", ReleaseStatus::kBusy},
};

// INTERNAL: `call` answered a status this binary does not know (never a guess: a node
// dead-letters on a final refusal).
Status UnknownSqlStatus(std::string_view call, std::string_view name);

// The status `name` means in `table`; UnknownSqlStatus for a name it does not hold.
template <typename E, size_t N>
Result<E> StatusFromSql(const SqlStatus<E> (&table)[N], std::string_view call,
                        std::string_view name) {
  for (const SqlStatus<E>& entry : table) {
    if (entry.name == name) return entry.status;
  }
  return UnknownSqlStatus(call, name);
}

}  // namespace verdict::lobby
