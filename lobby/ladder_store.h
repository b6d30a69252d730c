// The store's reads and writes of modes, ladders and players' ratings (docs/lobby.md, "Modes and
// ladders"), on the store's pool: SettlementStore's DeclareMode, GetMode, GetLeaderboard,
// ImportRating and GetPlayer. Internal to the store; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lobby/pg/pool.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

// The statements these run, for the pool to prepare on every connection.
std::vector<std::pair<std::string, std::string>> LadderStatements();

Result<DeclareOutcome> DeclareModeIn(pg::Pool& pool, const v1::Mode& mode);
Result<std::optional<v1::Mode>> GetModeIn(pg::Pool& pool, const std::string& mode);
Result<std::optional<v1::Leaderboard>> GetLeaderboardIn(pg::Pool& pool, const std::string& mode,
                                                        size_t limit,
                                                        const std::optional<LadderCursor>& after);
Result<ImportOutcome> ImportRatingIn(pg::Pool& pool, const std::string& player_id,
                                     const std::string& mode, const v1::RatingImport& rating,
                                     double displayed);
Result<std::optional<v1::Player>> GetPlayerIn(pg::Pool& pool, const std::string& player_id);

// The opaque text of a ladder cursor (base64url), and back; nullopt for text that is not one,
// its id included: a cursor names a player id (wire::ValidatePlayerId).
std::string EncodeLadderCursor(const LadderCursor& cursor);
std::optional<LadderCursor> DecodeLadderCursor(std::string_view text);

}  // namespace verdict::lobby
