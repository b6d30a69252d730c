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

Result<v1::Mode> CompleteMode(const std::string& name, const v1::Mode& given) {
  VERDICT_RETURN_IF_ERROR(wire::ValidateModeName(name));
  if (!given.mode().empty() && given.mode() != name) {
    return InvalidArgumentError("mode: the body names mode " + wire::ValidUtf8(given.mode()) +
                                ", the path " + name);
  }
  if (given.rating().system().empty()) {
    return InvalidArgumentError("rating.system is required: one of " + rating::KnownSystems());
  }
  auto system = rating::MakeRatingSystem(SpecOf(given.rating()));
  if (!system.ok()) return InvalidArgumentError("rating." + system.status().message());

  v1::Mode mode;
  mode.set_mode(name);
  const rating::SystemSpec& full = (*system)->spec();
  *mode.mutable_rating() = DeclarationOf(full);
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
