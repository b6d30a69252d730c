// What a mode's declaration must be (docs/lobby.md, "Modes and ladders"), checked and completed
// before it is stored: a valid name, a rating system the lobby has (lobby/rating/) with every
// parameter filled in, whether it is rated, and the room shapes it accepts within the lobby's own
// limits, narrowed to what its system can rate (Glicko-2: two teams of one). Pure functions: any
// thread.
#pragma once

#include <string>

#include "common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

// The mode of a room whose allocation names none: the ladder every room had before modes, an Elo
// with K = 32 until the operator declares it otherwise.
inline constexpr char kDefaultMode[] = "default";

// `given` (PUT /v1/modes/{name}, or an entry of --modes-file) as it is stored: the mode named
// `name` (a `mode` in the body must be the same), the rating spec with every parameter its system
// uses, rated unless it says otherwise, and every shape bound given or defaulted (2 to 100 teams
// of 1 to 200 players; Glicko-2: two teams of one). INVALID_ARGUMENT naming the field otherwise:
// an unknown system, model or parameter, a value out of range, bounds that contradict each other
// or the system.
Result<v1::Mode> CompleteMode(const std::string& name, const v1::Mode& given);

}  // namespace verdict::lobby
