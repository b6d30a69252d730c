// What a mode's declaration must be (docs/lobby.md, "Modes and ladders"), checked and completed
// before it is stored: a valid name, a rating system the lobby has (lobby/rating/) with every
// parameter filled in, whether it is rated, and the room shapes it accepts within the lobby's own
// limits, narrowed to what its system can rate (Glicko-2: two teams of one). Pure functions: any
// thread.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "lobby/rating/rating_system.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

// The mode of a room whose allocation names none: the ladder every room had before modes, an Elo
// with K = 32 until the operator declares it otherwise.
inline constexpr char kDefaultMode[] = "default";

// The rating system a mode's declaration names, as rating::MakeRatingSystem takes it: the one
// conversion from a declaration to a system, for a mode being declared and for one stored.
rating::SystemSpec SpecOf(const v1::RatingSystemSpec& declared);

// And back: the declaration a mode shows for `spec`.
v1::RatingSystemSpec DeclarationOf(const rating::SystemSpec& spec);

// A declaration's parameters as the database stores them (modes.parameters): a JSON object of
// numbers.
std::string StoredParameters(const std::map<std::string, double>& parameters);

// And back; INTERNAL for a text that is not a JSON object of numbers.
Result<std::map<std::string, double>> ParametersFromStored(const std::string& json);

// The most provisional games a mode may ask of a player (modes.provisional_games).
inline constexpr uint32_t kMaxProvisionalGames = 1000000;

// `given` (PUT /v1/modes/{name}, or an entry of --modes-file) as it is stored: the mode named
// `name` (a `mode` in the body must be the same), the rating spec with every parameter its system
// uses, rated unless it says otherwise, and every shape bound given or defaulted (2 to 100 teams
// of 1 to 200 players; Glicko-2: two teams of one), its provisional games (0 to
// kMaxProvisionalGames), and its seed, if any, with the soft reset's keep (default 1), deviation
// (default: the system's initial; Elo 0) and mean (default: the system's initial rating) filled
// in. `closed` is passed through as given (absent: as it is). A body that gives only `closed`
// (no rating) is that alone: it opens or closes a mode already declared. INVALID_ARGUMENT naming
// the field otherwise: an unknown system, model or parameter, a value out of range, bounds that
// contradict each other or the system, a seed from the mode itself or with a soft reset its
// system refuses (a keep outside 0 to 1). Whether the seed's mode exists, and rates by the same
// system, the store says (sql/functions/verdict_declare_mode.sql).
Result<v1::Mode> CompleteMode(const std::string& name, const v1::Mode& given);

// Whether `mode`, as CompleteMode returned it, only opens or closes its mode.
bool OnlyOpensOrCloses(const v1::Mode& mode);

// A soft reset as the rating seam takes it: a seed's, as CompleteMode filled it in.
rating::SeasonReset SeasonResetOf(const v1::SoftReset& reset);

}  // namespace verdict::lobby
