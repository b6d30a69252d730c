// The ladder's cursor: where a page of GET /v1/modes/{mode}/leaderboard starts, as the opaque
// text a client passes back in ?after= (base64url of the displayed rating's order-preserving bits
// and the player id). The one codec of it: the store writes a page's `next` with it, the endpoint
// reads `after` with it. Pure functions: any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lobby/settlement_store.h"

namespace verdict::lobby {

// The opaque text of a ladder cursor (base64url), and back; nullopt for text that is not one,
// its id included: a cursor names a player id (wire::ValidatePlayerId).
std::string EncodeLadderCursor(const LadderCursor& cursor);
std::optional<LadderCursor> DecodeLadderCursor(std::string_view text);

}  // namespace verdict::lobby
