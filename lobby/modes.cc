#include "lobby/modes.h"

#include <algorithm>
#include <vector>

#include "lobby/rating/rating_system.h"
#include "proto/validation.h"
#include "proto/wire.h"

namespace verdict::lobby {

Result<v1::Mode> CompleteMode(const std::string& name, const v1::Mode& given) {
  VERDICT_RETURN_IF_ERROR(wire::ValidateModeName(name));
  if (!given.mode().empty() && given.mode() != name) {
    return InvalidArgumentError("mode: the body names mode " + wire::ValidUtf8(given.mode()) +
                                ", the path " + name);
  }
  if (given.rating().system().empty()) {
    return InvalidArgumentError("rating.system is required: one of " + rating::KnownSystems());
  }
  rating::SystemSpec spec{given.rating().system(), given.rating().model(), {}};
  for (const auto& [parameter, value] : given.rating().parameters()) {
    spec.parameters[parameter] = value;
  }
  auto system = rating::MakeRatingSystem(spec);
  if (!system.ok()) return InvalidArgumentError("rating." + system.status().message());

  v1::Mode mode;
  mode.set_mode(name);
  const rating::SystemSpec& full = (*system)->spec();
  mode.mutable_rating()->set_system(full.system);
  mode.mutable_rating()->set_model(full.model);
  for (const auto& [parameter, value] : full.parameters) {
    (*mode.mutable_rating()->mutable_parameters())[parameter] = value;
  }
  mode.set_rated(!given.has_rated() || given.rated());

  // Two teams of one for a system that rates only those; otherwise the lobby's own limits.
  const bool one_on_one = (*system)->Accepts({2, 2}).ok() == false;
  const v1::RoomShape& s = given.shape();
  v1::RoomShape* shape = mode.mutable_shape();
  shape->set_min_teams(s.min_teams() ? s.min_teams() : 2);
  shape->set_max_teams(s.max_teams() ? s.max_teams() : (one_on_one ? 2 : wire::kMaxTeams));
  shape->set_min_team_size(s.min_team_size() ? s.min_team_size() : 1);
  shape->set_max_team_size(s.max_team_size() ? s.max_team_size()
                                             : (one_on_one ? 1 : wire::kMaxPlayers));
  if (shape->min_teams() < 2 || shape->max_teams() > wire::kMaxTeams ||
      shape->min_teams() > shape->max_teams()) {
    return InvalidArgumentError("shape: teams must be within 2 to " +
                                std::to_string(wire::kMaxTeams) + ", min_teams <= max_teams");
  }
  if (shape->max_team_size() > wire::kMaxPlayers ||
      shape->min_team_size() > shape->max_team_size() ||
      shape->min_teams() * shape->min_team_size() > wire::kMaxPlayers) {
    return InvalidArgumentError("shape: team sizes must be within 1 to " +
                                std::to_string(wire::kMaxPlayers) +
                                ", min_team_size <= max_team_size, and the smallest room fit " +
                                std::to_string(wire::kMaxPlayers) + " seats");
  }
  // Every shape the mode accepts must be one its system rates: its two extremes and every team
  // count between (the systems judge by the number of teams and their sizes).
  for (uint32_t teams = shape->min_teams(); teams <= shape->max_teams(); ++teams) {
    for (uint32_t size : {shape->min_team_size(), shape->max_team_size()}) {
      if (Status ok = (*system)->Accepts(std::vector<size_t>(teams, size)); !ok.ok()) {
        return InvalidArgumentError("shape: " + full.system +
                                    " cannot rate every room the shape "
                                    "accepts (" +
                                    ok.message() + ")");
      }
    }
  }
  return mode;
}

}  // namespace verdict::lobby
