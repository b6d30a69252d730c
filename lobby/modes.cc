#include "lobby/modes.h"

#include <algorithm>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "proto/validation.h"
#include "proto/wire.h"

namespace verdict::lobby {

rating::SystemSpec SpecOf(const v1::RatingSystemSpec& declared) {
  rating::SystemSpec spec{declared.system(), declared.model(), {}};
  for (const auto& [parameter, value] : declared.parameters()) spec.parameters[parameter] = value;
  return spec;
}

v1::RatingSystemSpec DeclarationOf(const rating::SystemSpec& spec) {
  v1::RatingSystemSpec declared;
  declared.set_system(spec.system);
  declared.set_model(spec.model);
  for (const auto& [parameter, value] : spec.parameters) {
    (*declared.mutable_parameters())[parameter] = value;
  }
  return declared;
}

std::string StoredParameters(const std::map<std::string, double>& parameters) {
  google::protobuf::Struct object;
  for (const auto& [name, value] : parameters) {
    (*object.mutable_fields())[name].set_number_value(value);
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(object, &json);
  return json;
}

Result<std::map<std::string, double>> ParametersFromStored(const std::string& json) {
  google::protobuf::Struct object;
  if (!google::protobuf::util::JsonStringToMessage(json, &object).ok()) {
    return InternalError("a mode's parameters are not a JSON object: " + json);
  }
  std::map<std::string, double> parameters;
  for (const auto& [name, value] : object.fields()) {
    if (!value.has_number_value()) {
      return InternalError("a mode's parameter " + name + " is not a number");
    }
    parameters[name] = value.number_value();
  }
  return parameters;
}

bool OnlyOpensOrCloses(const v1::Mode& mode) {
  return mode.rating().system().empty() && mode.has_closed();
}

rating::SeasonReset SeasonResetOf(const v1::SoftReset& reset) {
  return {.mean = reset.mean(), .keep = reset.keep(), .deviation = reset.deviation()};
}

namespace {

// `given`'s seed with its soft reset filled in for `system`; INVALID_ARGUMENT naming the field.
Result<v1::SeedFrom> CompleteSeed(const std::string& name, const v1::SeedFrom& given,
                                  const rating::RatingSystem& system) {
  if (given.mode().empty()) return InvalidArgumentError("seed_from.mode is required");
  if (Status valid = wire::ValidateModeName(given.mode()); !valid.ok()) {
    return InvalidArgumentError("seed_from." + valid.message());
  }
  if (given.mode() == name) {
    return InvalidArgumentError("seed_from.mode: a mode is seeded from an earlier one, not itself");
  }
  const rating::Rating initial = system.Initial();
  v1::SeedFrom seed;
  seed.set_mode(given.mode());
  const v1::SoftReset& reset = given.soft_reset();
  v1::SoftReset* filled = seed.mutable_soft_reset();
  filled->set_keep(reset.has_keep() ? reset.keep() : 1);
  // A system without a deviation (Elo: its new players have none) takes none.
  if (reset.has_deviation() && initial.deviation == 0) {
    return InvalidArgumentError("seed_from.soft_reset.deviation: " + system.spec().system +
                                " has no deviation");
  }
  filled->set_deviation(reset.has_deviation() ? reset.deviation() : initial.deviation);
  filled->set_mean(reset.has_mean() ? reset.mean() : initial.value);
  // The system's own check of a soft reset, on its initial rating: one validation for both.
  if (auto reset_initial = system.ResetForSeason(initial, SeasonResetOf(*filled));
      !reset_initial.ok()) {
    return InvalidArgumentError("seed_from.soft_reset." + reset_initial.status().message());
  }
  return seed;
}

}  // namespace

Result<v1::Mode> CompleteMode(const std::string& name, const v1::Mode& given) {
  VERDICT_RETURN_IF_ERROR(wire::ValidateModeName(name));
  if (!given.mode().empty() && given.mode() != name) {
    return InvalidArgumentError("mode: the body names mode " + wire::ValidUtf8(given.mode()) +
                                ", the path " + name);
  }
  v1::Mode mode;
  mode.set_mode(name);
  if (given.has_closed()) mode.set_closed(given.closed());
  if (OnlyOpensOrCloses(given)) {
    if (given.has_rated() || given.has_shape() || given.provisional_games() ||
        given.has_seed_from() || given.has_rating()) {
      return InvalidArgumentError(
          "rating.system is required with anything but \"closed\": one of " +
          rating::KnownSystems());
    }
    return mode;
  }
  if (given.rating().system().empty()) {
    return InvalidArgumentError("rating.system is required: one of " + rating::KnownSystems());
  }
  auto system = rating::MakeRatingSystem(SpecOf(given.rating()));
  if (!system.ok()) return InvalidArgumentError("rating." + system.status().message());

  const rating::SystemSpec& full = (*system)->spec();
  *mode.mutable_rating() = DeclarationOf(full);
  mode.set_rated(!given.has_rated() || given.rated());
  if (given.provisional_games() > kMaxProvisionalGames) {
    return InvalidArgumentError("provisional_games: must be a whole number from 0 to " +
                                std::to_string(kMaxProvisionalGames));
  }
  mode.set_provisional_games(given.provisional_games());
  if (given.has_seed_from()) {
    auto seed = CompleteSeed(name, given.seed_from(), **system);
    if (!seed.ok()) return seed.status();
    *mode.mutable_seed_from() = std::move(*seed);
  }

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
