// The lobby's endpoints for players, modes and ladders (docs/lobby.md, "Modes and ladders"):
//   GET /v1/players/{player_id}                   any token: the player's rating in every mode
//   PUT /v1/players/{player_id}/ratings/{mode}    admin: carry a rating over (not while in a room)
//   PUT /v1/modes/{mode}                          admin: declare a mode (fixed once in use), or
//                                                 close or reopen it ({"closed": true|false})
//   GET /v1/modes/{mode}                          any token
//   GET /v1/modes/{mode}/leaderboard?limit=N&after=CURSOR&include_provisional=true
//                                                 any token: a page of the ladder
// The service has routed the request and checked the path's player id and mode
// (settlement_service.cc); these read the body, call the store and answer.
#include <charconv>

#include <spdlog/spdlog.h>

#include "lobby/ladder_cursor.h"
#include "lobby/modes.h"
#include "lobby/rating/rating_system.h"
#include "lobby/settlement_service.h"
#include "proto/wire.h"

namespace verdict::lobby {
namespace {

constexpr size_t kDefaultLeaderboardPage = 100;
constexpr size_t kMaxLeaderboardPage = 1000;

// The body of `request`, decoded as `message`, or the problem that refuses it.
std::optional<HttpReply> Decode(const HttpRequest& request, google::protobuf::Message* message,
                                const std::string& path) {
  const auto format = wire::FormatOfContentType(request.content_type);
  if (!format) {
    return ProblemReply(server::ErrorCode::kUnsupportedMediaType,
                        "send application/x-protobuf or application/json", path);
  }
  if (Status decoded = wire::DecodeBody(request.body, *format, message); !decoded.ok()) {
    return ProblemReply(server::ProblemOfUndecodable(decoded), decoded.message(), path);
  }
  return std::nullopt;
}

HttpReply NeedsAdmin(const std::string& what, const std::string& path) {
  return ProblemReply(server::ErrorCode::kUnauthenticated, what + " needs the admin token", path);
}

}  // namespace

HttpReply SettlementService::GetPlayer(const HttpRequest& request, const std::string& player_id) {
  const std::string path = "/v1/players/" + player_id;
  auto player = ladder_.GetPlayer(player_id);
  if (!player.ok()) return FailureReply(player.status(), path);
  if (!player->has_value()) return ProblemReply(ErrorCode::kNotFound, "no such player", path);
  v1::Player& p = **player;
  // A protobuf reader from before ids were strings reads the id as an integer.
  uint64_t number = 0;
  const auto [end, ec] =
      std::from_chars(p.player_id().data(), p.player_id().data() + p.player_id().size(), number);
  const bool integer = ec == std::errc() && end == p.player_id().data() + p.player_id().size() &&
                       std::to_string(number) == p.player_id();
  if (integer && wire::ReplyFormat(request.accept, wire::FormatOfContentType(request.content_type),
                                   wire::BodyFormat::kJson) == wire::BodyFormat::kProtobuf) {
    p.set_legacy_player_id(number);
  }
  return MessageReply(200, p, request);
}

HttpReply SettlementService::PutRating(const HttpRequest& request, const Caller& caller,
                                       const std::string& player_id, const std::string& mode) {
  const std::string path = "/v1/players/" + player_id + "/ratings/" + mode;
  if (!caller.admin) return NeedsAdmin("importing a rating", path);
  v1::RatingImport rating;
  if (auto refused = Decode(request, &rating, path)) return *refused;
  auto declared = ladder_.GetMode(mode);
  if (!declared.ok()) return FailureReply(declared.status(), path);
  if (!declared->has_value()) {
    return ProblemReply(ErrorCode::kNotFound, "mode " + mode + " is not declared", path);
  }
  const v1::RatingSystemSpec& spec = (*declared)->rating();
  auto system = rating::MakeRatingSystem(SpecOf(spec), rating::Declaration::kStored);
  if (!system.ok()) return FailureReply(InternalError(system.status().message()), path);
  const rating::Rating value{rating.rating(), rating.deviation(), rating.volatility()};
  if (Status valid = (*system)->CheckRating(value); !valid.ok()) {
    return ProblemReply(ErrorCode::kInvalidArgument,
                        valid.message() + " (a " + spec.system() + " rating)", path);
  }
  auto imported = ladder_.ImportRating(player_id, mode, rating, (*system)->Displayed(value));
  if (!imported.ok()) return FailureReply(imported.status(), path);
  if (imported->status == ImportStatus::kImported) {
    spdlog::info("player={} mode={}: rating imported", player_id, mode);
  }
  return AnswerReply(AnswerOf(kImportAnswers, imported->status), "import",
                     {.player = player_id, .mode = mode}, imported->rating, request, path);
}

HttpReply SettlementService::PutMode(const HttpRequest& request, const Caller& caller,
                                     const std::string& mode) {
  const std::string path = "/v1/modes/" + mode;
  if (!caller.admin) return NeedsAdmin("declaring a mode", path);
  v1::Mode given;
  if (auto refused = Decode(request, &given, path)) return *refused;
  auto complete = CompleteMode(mode, given);
  if (!complete.ok()) {
    return ProblemReply(ErrorCode::kInvalidArgument, complete.status().message(), path);
  }
  auto declared = ladder_.DeclareMode(*complete);
  if (!declared.ok()) return FailureReply(declared.status(), path);
  if (declared->status == DeclareStatus::kCreated) {
    spdlog::info("mode={}: declared ({})", mode, complete->rating().system());
  } else if (declared->status == DeclareStatus::kUpdated) {
    spdlog::info("mode={}: declaration changed ({}{})", mode, declared->mode.rating().system(),
                 declared->mode.closed() ? ", closed to new rooms" : "");
  }
  return AnswerReply(AnswerOf(kDeclareAnswers, declared->status), "declaration",
                     {.mode = mode, .detail = complete->seed_from().mode()}, declared->mode,
                     request, path);
}

HttpReply SettlementService::GetMode(const HttpRequest& request, const std::string& mode) {
  const std::string path = "/v1/modes/" + mode;
  auto found = ladder_.GetMode(mode);
  if (!found.ok()) return FailureReply(found.status(), path);
  if (!found->has_value()) {
    return ProblemReply(ErrorCode::kNotFound, "mode " + mode + " is not declared", path);
  }
  return MessageReply(200, **found, request);
}

HttpReply SettlementService::GetLeaderboard(const HttpRequest& request, const std::string& mode) {
  const std::string path = "/v1/modes/" + mode + "/leaderboard";
  size_t limit = kDefaultLeaderboardPage;
  if (const auto given = server::QueryValue(request.target, "limit")) {
    const auto [end, ec] = std::from_chars(given->data(), given->data() + given->size(), limit);
    if (ec != std::errc() || end != given->data() + given->size() || limit == 0 ||
        limit > kMaxLeaderboardPage) {
      return ProblemReply(
          ErrorCode::kInvalidArgument,
          "limit must be an integer from 1 to " + std::to_string(kMaxLeaderboardPage), path);
    }
  }
  std::optional<LadderCursor> after;
  if (const auto given = server::QueryValue(request.target, "after")) {
    after = DecodeLadderCursor(*given);
    if (!after) {
      return ProblemReply(ErrorCode::kInvalidArgument,
                          "after must be the `next` of an earlier page of this leaderboard", path);
    }
  }
  bool include_provisional = false;
  if (const auto given = server::QueryValue(request.target, "include_provisional")) {
    if (*given != "true" && *given != "false") {
      return ProblemReply(ErrorCode::kInvalidArgument, "include_provisional must be true or false",
                          path);
    }
    include_provisional = *given == "true";
  }
  auto page = ladder_.GetLeaderboard(mode, limit, after, include_provisional);
  if (!page.ok()) return FailureReply(page.status(), path);
  if (!page->has_value()) {
    return ProblemReply(ErrorCode::kNotFound, "mode " + mode + " is not declared", path);
  }
  return MessageReply(200, **page, request);
}

}  // namespace verdict::lobby
