#include "lobby/settlement_service.h"

#include <openssl/evp.h>

#include <charconv>
#include <limits>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "common/bearer_token.h"
#include "common/constant_time.h"
#include "common/failpoint.h"
#include "lobby/answers.h"
#include "lobby/modes.h"
#include "lobby/settlement_scheduler.h"
#include "proto/validation.h"
#include "proto/wire.h"
#include "server/problem.h"

namespace verdict::lobby {
namespace {

std::string_view PathOf(const std::string& target) {
  return std::string_view(target).substr(0, target.find('?'));
}

// Parses a positive decimal id that is the whole of `s` and fits PostgreSQL's bigint, as every
// room and player id does.
std::optional<uint64_t> ParseId(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v == 0 ||
      v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  return v;
}

constexpr std::string_view kBatchPath = wire::kSettlementsBatchPath;
constexpr std::string_view kSettlePath = wire::kSettlementsPath;
constexpr std::string_view kReceiptPrefix = "/v1/settlements/";
constexpr std::string_view kPlayerPrefix = "/v1/players/";
constexpr std::string_view kModePrefix = "/v1/modes/";
constexpr std::string_view kRoomPrefix = "/v1/rooms/";
constexpr std::string_view kMatchPrefix = "/v1/matches/";
// The most bytes an abort's body ({"reason": "..."}) may take.
constexpr size_t kMaxRoomActionBodyBytes = 4096;
// The most bytes a mode's declaration or a rating import may take.
constexpr size_t kMaxLadderBodyBytes = 64 * 1024;

// What the lobby serves, each path once.
enum class Endpoint {
  kHealth,        // GET /healthz
  kReady,         // GET /readyz
  kMetrics,       // GET /metrics
  kEvents,        // GET /v1/events (WebSocket)
  kRooms,         // POST /v1/rooms
  kSettle,        // POST /v1/settlements
  kBatch,         // POST /v1/settlements:batch
  kReceipt,       // GET /v1/settlements/{room_id}
  kPlayer,        // GET /v1/players/{player_id}
  kPlayerRating,  // PUT /v1/players/{player_id}/ratings/{mode}
  kMode,          // GET and PUT /v1/modes/{mode}
  kLeaderboard,   // GET /v1/modes/{mode}/leaderboard
  kRoomAction,    // POST /v1/rooms/{room_id}:release, :abort and :void
  kMatchAction,   // POST /v1/matches/{match_id}:void
};

struct EndpointRule {
  const char* method;
  bool token;                          // needs a valid bearer token
  size_t max_body;                     // bytes of body it reads
  const char* other_method = nullptr;  // a second method on the same path (reads no body)
};

EndpointRule RuleOf(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kHealth:
    case Endpoint::kReady:
    case Endpoint::kMetrics:
      return {"GET", false, 0};
    case Endpoint::kEvents:
    case Endpoint::kReceipt:
    case Endpoint::kPlayer:
    case Endpoint::kLeaderboard:
      return {"GET", true, 0};
    case Endpoint::kRooms:
    case Endpoint::kSettle:
      return {"POST", true, wire::kMaxResultBodyBytes};
    case Endpoint::kBatch:
      return {"POST", true, wire::kMaxBatchBodyBytes};
    case Endpoint::kRoomAction:
    case Endpoint::kMatchAction:
      return {"POST", true, kMaxRoomActionBodyBytes};
    case Endpoint::kPlayerRating:
      return {"PUT", true, kMaxLadderBodyBytes};
    case Endpoint::kMode:
      return {"PUT", true, kMaxLadderBodyBytes, "GET"};
  }
  return {"GET", true, 0};
}

// Whether `rule` answers `method`, and the bytes of body a request of that method may have.
bool Allows(const EndpointRule& rule, std::string_view method) {
  return method == rule.method || (rule.other_method && method == rule.other_method);
}
size_t MaxBodyOf(const EndpointRule& rule, std::string_view method) {
  return method == rule.method ? rule.max_body : 0;
}
HttpReply MethodNotAllowed(const EndpointRule& rule, std::string_view path) {
  return ProblemReply(ErrorCode::kMethodNotAllowed,
                      std::string("use ") + rule.method +
                          (rule.other_method ? std::string(" or ") + rule.other_method : ""),
                      std::string(path));
}

std::optional<Endpoint> EndpointOf(std::string_view path) {
  if (path == "/healthz") return Endpoint::kHealth;
  if (path == "/readyz") return Endpoint::kReady;
  if (path == "/metrics") return Endpoint::kMetrics;
  if (path == "/v1/events") return Endpoint::kEvents;
  if (path == "/v1/rooms") return Endpoint::kRooms;
  if (path == kSettlePath) return Endpoint::kSettle;
  if (path == kBatchPath) return Endpoint::kBatch;
  if (path.starts_with(kReceiptPrefix)) return Endpoint::kReceipt;
  if (path.starts_with(kPlayerPrefix)) {
    return path.find('/', kPlayerPrefix.size()) == std::string_view::npos ? Endpoint::kPlayer
                                                                          : Endpoint::kPlayerRating;
  }
  if (path.starts_with(kModePrefix)) {
    return path.find('/', kModePrefix.size()) == std::string_view::npos ? Endpoint::kMode
                                                                        : Endpoint::kLeaderboard;
  }
  if (path.starts_with(kRoomPrefix)) return Endpoint::kRoomAction;
  if (path.starts_with(kMatchPrefix)) return Endpoint::kMatchAction;
  return std::nullopt;
}

// The room id of a kReceipt path.
std::optional<uint64_t> IdOf(std::string_view path) {
  return ParseId(path.substr(kReceiptPrefix.size()));
}

HttpReply BadId(std::string_view path) {
  return ProblemReply(ErrorCode::kInvalidArgument,
                      "the id in the path must be a positive integer below 2^63",
                      std::string(path));
}

// What a kRoomAction path ("/v1/rooms/{room_id}:{action}") names: a room and an action
// ("release", "abort" or "void"), or its refusal; and a kMatchAction path
// ("/v1/matches/{match_id}:void"), a match and "void". An action that is not one is no endpoint
// (404); one of them with an id that is not one is a bad argument (400), as on every other
// endpoint.
struct ActionPath {
  uint64_t id = 0;
  std::string_view action;
  std::optional<HttpReply> refused;
};

ActionPath ActionOf(std::string_view path) {
  const bool of_room = path.starts_with(kRoomPrefix);
  const std::string_view rest = path.substr(of_room ? kRoomPrefix.size() : kMatchPrefix.size());
  const size_t colon = rest.find(':');
  const std::string_view action =
      colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  const bool known = action == "void" || (of_room && (action == "release" || action == "abort"));
  if (!known) {
    return {0, action,
            ProblemReply(ErrorCode::kNotFound,
                         of_room ? "no such endpoint: POST /v1/rooms/{room_id}:release, :abort or "
                                   ":void"
                                 : "no such endpoint: POST /v1/matches/{match_id}:void",
                         std::string(path))};
  }
  const std::optional<uint64_t> id = ParseId(rest.substr(0, colon));
  if (!id) return {0, action, BadId(path)};
  return {*id, action, std::nullopt};
}

// A path segment with its %XX escapes decoded; nullopt for a malformed escape.
std::optional<std::string> DecodeSegment(std::string_view segment) {
  std::string out;
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out.push_back(segment[i]);
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= segment.size()) return std::nullopt;  // '%' needs two hex digits after it
    const auto [end, ec] =
        std::from_chars(segment.data() + i + 1, segment.data() + i + 3, value, 16);
    if (ec != std::errc() || end != segment.data() + i + 3) return std::nullopt;
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

// What a ladder path names: a player (/v1/players/{player_id}, and its
// /ratings/{mode}) or a mode (/v1/modes/{mode}, and its /leaderboard). Each segment is
// percent-decoded and checked: a player id or mode that is not one is a bad argument (400), as
// on every other endpoint; a path of another shape is no endpoint (404).
struct LadderPath {
  std::string player;
  std::string mode;
  std::optional<HttpReply> refused;
};

LadderPath LadderPathOf(std::string_view path) {
  const bool of_player = path.starts_with(kPlayerPrefix);
  std::string_view rest = path.substr(of_player ? kPlayerPrefix.size() : kModePrefix.size());
  const size_t slash = rest.find('/');
  const std::string_view first = rest.substr(0, slash);
  const std::string_view tail =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  LadderPath out;
  const auto refuse = [&](ErrorCode code, const std::string& detail) {
    out.refused = ProblemReply(code, detail, std::string(path));
    return out;
  };
  if (of_player) {
    const bool rating = tail.starts_with("/ratings/");
    if (!tail.empty() && !rating) {
      return refuse(ErrorCode::kNotFound,
                    "no such endpoint: /v1/players/{player_id} or /v1/players/{player_id}/ratings/"
                    "{mode}");
    }
    const std::optional<std::string> player = DecodeSegment(first);
    if (!player) return refuse(ErrorCode::kInvalidArgument, "player_id: a malformed %-escape");
    if (Status valid = wire::ValidatePlayerId(*player); !valid.ok()) {
      return refuse(ErrorCode::kInvalidArgument, valid.message());
    }
    out.player = *player;
    if (!rating) return out;
    rest = tail.substr(std::string_view("/ratings/").size());
  } else {
    if (!tail.empty() && tail != "/leaderboard") {
      return refuse(ErrorCode::kNotFound,
                    "no such endpoint: /v1/modes/{mode} or /v1/modes/{mode}/leaderboard");
    }
    rest = first;
  }
  const std::optional<std::string> mode = DecodeSegment(rest);
  if (!mode) return refuse(ErrorCode::kInvalidArgument, "mode: a malformed %-escape");
  if (Status valid = wire::ValidateModeName(*mode); !valid.ok()) {
    return refuse(ErrorCode::kInvalidArgument, valid.message());
  }
  out.mode = *mode;
  return out;
}

HttpReply Unauthenticated(std::string_view path) {
  return ProblemReply(ErrorCode::kUnauthenticated,
                      "a valid bearer token is required (Authorization: Bearer TOKEN)",
                      std::string(path));
}

// The problem a failed store call answers with: INTERNAL when the database refused the request
// itself (the same call fails again, so a node dead-letters it), UNAVAILABLE otherwise.
ErrorCode ProblemOf(const Status& failed) {
  return failed.code() == StatusCode::kInternal ? ErrorCode::kInternal : ErrorCode::kUnavailable;
}

// The detail of a status of `call` that its answer table does not hold.
std::string UnknownOutcome(std::string_view call) {
  return "the " + std::string(call) + "'s outcome is unknown";
}

// The counter label of a settlement's outcome.
std::string CodeOf(const Result<SettleOutcome>& outcome) {
  if (!outcome.ok()) return InfoOf(ProblemOf(outcome.status())).code;
  const Answer* answer = AnswerOf(kSettlementAnswers, outcome->status);
  return std::string(answer ? LabelOf(*answer) : InfoOf(ErrorCode::kInternal).code);
}

}  // namespace

std::string Fingerprint(const v1::BattleResult& result) {
  const std::string bytes = wire::DeterministicBytes(result);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

namespace {

using Attempt = SettlementScheduler::Attempt;

// The attempt for one decoded result, or the problem that stops it (INVALID_ARGUMENT).
Result<Attempt> PrepareAttempt(v1::BattleResult result, const Caller& caller) {
  Status valid = wire::ValidateResult(result);
  if (valid.ok() && !result.node_id().empty() && result.node_id() != caller.node_id) {
    valid = InvalidArgumentError("node_id in the body is not the node the token belongs to");
  }
  if (!valid.ok()) return valid;
  Attempt attempt;
  attempt.fingerprint = Fingerprint(result);
  attempt.result = std::move(result);
  attempt.node_id = caller.node_id;
  return attempt;
}

}  // namespace

std::optional<SettlementRefusal> RefusalOf(const SettleOutcome& outcome) {
  const Answer* answer = AnswerOf(kSettlementAnswers, outcome.status);
  if (!answer) return SettlementRefusal{ErrorCode::kInternal, UnknownOutcome("settlement")};
  if (answer->success) return std::nullopt;
  return SettlementRefusal{
      answer->problem,
      FillDetail(answer->detail, {.outcome = v1::Outcome_Name(outcome.receipt.outcome())})};
}

namespace {

// The store's settlement call, and what a commit means beyond the replies: a debug line per room
// settled, the event hub's news, and the failpoint where a lobby that dies loses only replies.
class StoreCommitter final : public BatchSettler {
 public:
  StoreCommitter(BatchSettler& settler, EventHub* hub) : settler_(settler), hub_(hub) {}

  int workers() const override { return settler_.workers(); }

  std::vector<Result<SettleOutcome>> SettleBattles(const std::vector<SettleRequest>& requests,
                                                   bool wait, Cancellation* cancel) override {
    std::vector<Result<SettleOutcome>> outcomes = settler_.SettleBattles(requests, wait, cancel);
    bool committed = false;
    for (size_t k = 0; k < outcomes.size(); ++k) {
      if (outcomes[k].ok() && outcomes[k]->status == SettleStatus::kSettled) {
        committed = true;
        spdlog::debug("room={} node={}: settled as match {}", requests[k].result->room_id(),
                      requests[k].node_id, outcomes[k]->receipt.match_id());
      }
    }
    if (!committed) return outcomes;
    if (hub_) hub_->Committed();  // committed: only now may subscribers hear of it
    // The one transaction of every request in it (a batch, coalesced singles, a single) has
    // committed and nobody has been answered yet: where a lobby that dies loses only its replies.
    if (CheckFailpoint("settle.after_commit_before_reply") == FailAction::kError) {
      // Injected fault: committed, but the clients hear only an error, as if the reply was lost.
      for (auto& outcome : outcomes) {
        if (outcome.ok() && outcome->status == SettleStatus::kSettled) {
          outcome = UnavailableError("failpoint settle.after_commit_before_reply");
        }
      }
    }
    return outcomes;
  }

 private:
  BatchSettler& settler_;
  EventHub* const hub_;
};

}  // namespace

SettlementService::SettlementService(ServiceStores stores, EventHub* hub, ServiceOptions options,
                                     metrics::Registry& registry, const ReadinessMonitor* readiness)
    : rooms_(stores.rooms),
      receipts_(stores.receipts),
      ladder_(stores.ladder),
      governance_(stores.governance),
      hub_(hub),
      options_(options),
      registry_(registry),
      readiness_(readiness),
      node_tokens_(std::make_shared<const std::vector<NodeToken>>(std::move(options.node_tokens))),
      settlements_(registry.AddLabeledCounter(
          "verdict_lobby_settlements_total",
          "Settlement requests by outcome: OK, DUPLICATE or the error code.", "code")),
      allocations_(registry.AddLabeledCounter("verdict_lobby_allocations_total",
                                              "Room allocations by outcome.", "code")),
      room_actions_(registry.AddLabeledCounter(
          "verdict_lobby_room_actions_total",
          "Rooms an operator released to a pending settlement or aborted.", "action")),
      voids_(registry.AddLabeledCounter("verdict_lobby_voids_total",
                                        "Voids of settled matches by outcome: OK, DUPLICATE or "
                                        "the error code.",
                                        "code")),
      settle_latency_(registry.AddHistogram("verdict_lobby_settle_seconds",
                                            "Time to answer a settlement request.")),
      refusal_log_limit_(LogRateLimitOptions{.clock = options_.settlement.clock}),
      committer_(std::make_unique<StoreCommitter>(stores.settler, hub)),
      scheduler_(
          std::make_unique<SettlementScheduler>(*committer_, options_.settlement, registry)) {
  registry.AddCounterReading(
      "verdict_lobby_refusal_log_lines_suppressed_total",
      "Log lines of refused settlements not written, over the rate limit (each such "
      "settlement is still counted in verdict_lobby_settlements_total).",
      [this] { return static_cast<double>(refusal_log_limit_.suppressed_total()); });
}

SettlementService::~SettlementService() = default;

std::optional<Caller> SettlementService::Authenticate(const std::string& authorization) const {
  const std::optional<std::string_view> token = BearerTokenOf(authorization);
  if (!token) return std::nullopt;
  std::shared_ptr<const std::vector<NodeToken>> tokens;
  {
    MutexLock lock(&tokens_mu_);
    tokens = node_tokens_;
  }
  std::optional<Caller> found;
  // Compare against every token, so the time taken does not say which one nearly matched.
  if (!options_.admin_token.empty() && ConstantTimeEquals(*token, options_.admin_token)) {
    found = Caller{true, ""};
  }
  for (const NodeToken& t : *tokens) {
    if (ConstantTimeEquals(*token, t.token) && !found) found = Caller{false, t.node_id};
  }
  return found;
}

server::HeaderVerdict SettlementService::Judge(const server::RequestHead& head) const {
  const std::string& path = head.path;
  const std::optional<Endpoint> endpoint = EndpointOf(path);
  if (!endpoint) return {ProblemReply(ErrorCode::kNotFound, "no such endpoint", path)};
  const EndpointRule rule = RuleOf(*endpoint);
  if (rule.token && !Authenticate(head.authorization)) return {Unauthenticated(path)};
  if (!Allows(rule, head.method)) return {MethodNotAllowed(rule, path)};
  switch (*endpoint) {
    case Endpoint::kHealth:
      return {HttpReply{200, "text/plain", "ok\n", {}}};
    case Endpoint::kMetrics:
      return {HttpReply{200, std::string(metrics::kTextContentType), registry_.RenderText(), {}}};
    case Endpoint::kReady: {
      // Not ready is never final: an unmigrated schema or an unreachable database is for later.
      const Status ready =
          readiness_ ? readiness_->Current() : UnavailableError("readiness is not monitored");
      if (!ready.ok()) return {Unavailable(ready.message(), path)};
      return {HttpReply{200, "text/plain", "ready\n", {}}};
    }
    case Endpoint::kReceipt:
      if (!IdOf(path)) return {BadId(path)};
      break;
    case Endpoint::kRoomAction:
    case Endpoint::kMatchAction:
      if (auto refused = ActionOf(path).refused) return {std::move(*refused)};
      break;
    case Endpoint::kPlayer:
    case Endpoint::kPlayerRating:
    case Endpoint::kMode:
    case Endpoint::kLeaderboard:
      if (auto refused = LadderPathOf(path).refused) return {std::move(*refused)};
      break;
    case Endpoint::kEvents:
    case Endpoint::kRooms:
    case Endpoint::kSettle:
    case Endpoint::kBatch:
      break;
  }
  return {std::nullopt, MaxBodyOf(rule, head.method)};
}

Status SettlementService::CheckTokens(const std::vector<NodeToken>& tokens,
                                      const std::string& admin_token) {
  if (!admin_token.empty()) {
    if (Status valid = CheckBearerToken(admin_token); !valid.ok()) {
      return InvalidArgumentError("the admin token " + valid.message());
    }
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (Status valid = CheckBearerToken(tokens[i].token); !valid.ok()) {
      return InvalidArgumentError("node " + tokens[i].node_id + "'s token " + valid.message());
    }
    if (!admin_token.empty() && tokens[i].token == admin_token) {
      return InvalidArgumentError("node " + tokens[i].node_id +
                                  "'s token is the admin token; give each its own");
    }
    for (size_t j = 0; j < i; ++j) {
      if (tokens[i].token == tokens[j].token && tokens[i].node_id != tokens[j].node_id) {
        return InvalidArgumentError("one token is given to two nodes, " + tokens[j].node_id +
                                    " and " + tokens[i].node_id);
      }
    }
  }
  return Status::Ok();
}

Status SettlementService::ReplaceNodeTokens(std::vector<NodeToken> tokens) {
  VERDICT_RETURN_IF_ERROR(CheckTokens(tokens, options_.admin_token));
  auto fresh = std::make_shared<const std::vector<NodeToken>>(std::move(tokens));
  MutexLock lock(&tokens_mu_);
  node_tokens_ = std::move(fresh);
  return Status::Ok();
}

bool SettlementService::HasToken(const std::string& node_id) const {
  MutexLock lock(&tokens_mu_);
  for (const NodeToken& t : *node_tokens_) {
    if (t.node_id == node_id) return true;
  }
  return false;
}

using server::QueryValue;

Result<std::string> SettlementService::ParseEventsEpoch(const std::string& target) {
  const auto value = QueryValue(target, "epoch");
  if (!value) return std::string();
  if (value->empty() || value->size() > 64 ||
      value->find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    return InvalidArgumentError("epoch must be the feed's epoch, in lowercase hex digits");
  }
  return std::string(*value);
}

Result<std::optional<int64_t>> SettlementService::ParseEventsAfter(const std::string& target) {
  const auto value = QueryValue(target, "after");
  if (!value) return std::optional<int64_t>();
  int64_t after = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), after);
  if (ec != std::errc() || end != value->data() + value->size() || after < 0) {
    return InvalidArgumentError("after must be a non-negative event id");
  }
  return std::optional<int64_t>(after);
}

std::optional<HttpReply> SettlementService::RefuseEventsCursor(const FeedState& feed, int64_t after,
                                                               const std::string& epoch,
                                                               const std::string& instance) {
  v1::ProblemDetails where;
  v1::FeedPosition* position_of = where.mutable_feed();
  position_of->set_epoch(feed.epoch);
  position_of->set_head_event_id(static_cast<uint64_t>(feed.head));
  position_of->set_trimmed_through(static_cast<uint64_t>(feed.trimmed_through));
  position_of->set_oldest_event_id(static_cast<uint64_t>(feed.oldest));
  const std::string position = "; the feed's epoch is " + feed.epoch + ", its head " +
                               std::to_string(feed.head) + ", and it holds every event after " +
                               std::to_string(feed.trimmed_through);
  if (!epoch.empty() && epoch != feed.epoch) {
    return ProblemReply(ErrorCode::kEpochChanged,
                        "the cursor is from epoch " + epoch +
                            ", another history of the feed (a restore): its event ids may now "
                            "name other events" +
                            position,
                        instance, where);
  }
  if (after > feed.head) {
    return ProblemReply(
        ErrorCode::kCursorAhead,
        "the cursor " + std::to_string(after) + " is beyond the feed's head" + position, instance,
        where);
  }
  if (after < feed.trimmed_through) {
    return ProblemReply(ErrorCode::kCursorTrimmed,
                        "events after the cursor " + std::to_string(after) +
                            " are past retention and gone" + position,
                        instance, where);
  }
  return std::nullopt;
}

void SettlementService::Handle(const HttpRequest& request, std::shared_ptr<Cancellation> cancel,
                               ReplyFn done) {
  const std::string path(PathOf(request.target));
  const std::optional<Endpoint> endpoint = EndpointOf(path);
  if (!endpoint) return done(ProblemReply(ErrorCode::kNotFound, "no such endpoint", path));
  std::optional<Caller> caller = Authenticate(request.authorization);
  if (!caller) return done(Unauthenticated(path));
  const EndpointRule rule = RuleOf(*endpoint);
  if (!Allows(rule, request.method)) return done(MethodNotAllowed(rule, path));
  switch (*endpoint) {
    case Endpoint::kSettle:
      return PostSettlement(request, *caller, std::move(cancel), std::move(done));
    case Endpoint::kBatch:
      return PostSettlementBatch(request, *caller, std::move(cancel), std::move(done));
    case Endpoint::kRooms:
      return done(PostRoom(request, *caller));
    case Endpoint::kReceipt: {
      const std::optional<uint64_t> id = IdOf(path);
      if (!id) return done(BadId(path));
      return done(GetSettlement(request, *caller, *id));
    }
    case Endpoint::kPlayer:
    case Endpoint::kPlayerRating:
    case Endpoint::kMode:
    case Endpoint::kLeaderboard: {
      LadderPath ladder = LadderPathOf(path);
      if (ladder.refused) return done(std::move(*ladder.refused));
      switch (*endpoint) {
        case Endpoint::kPlayer:
          return done(GetPlayer(request, ladder.player));
        case Endpoint::kPlayerRating:
          return done(PutRating(request, *caller, ladder.player, ladder.mode));
        case Endpoint::kMode:
          return done(request.method == "PUT" ? PutMode(request, *caller, ladder.mode)
                                              : GetMode(request, ladder.mode));
        default:
          return done(GetLeaderboard(request, ladder.mode));
      }
    }
    case Endpoint::kRoomAction: {
      ActionPath action = ActionOf(path);
      if (action.refused) return done(std::move(*action.refused));
      if (action.action == "void") return done(PostVoid(request, *caller, 0, action.id));
      return PostRoomAction(request, *caller, action.id, std::string(action.action),
                            std::move(done));
    }
    case Endpoint::kMatchAction: {
      ActionPath action = ActionOf(path);
      if (action.refused) return done(std::move(*action.refused));
      return done(PostVoid(request, *caller, action.id, 0));
    }
    case Endpoint::kHealth:
    case Endpoint::kReady:
    case Endpoint::kMetrics:
    case Endpoint::kEvents:
      break;  // answered from the header, or by the server (the event feed's WebSocket)
  }
  done(ProblemReply(ErrorCode::kNotFound, "no such endpoint here", path));
}

HttpReply SettlementService::PostRoom(const HttpRequest& request, const Caller& caller) {
  const std::string path = "/v1/rooms";
  if (!caller.admin) {
    allocations_.Add("UNAUTHENTICATED");
    return ProblemReply(ErrorCode::kUnauthenticated, "allocating rooms needs the admin token",
                        path);
  }
  const auto format = wire::FormatOfContentType(request.content_type);
  if (!format) {
    return ProblemReply(ErrorCode::kUnsupportedMediaType,
                        "send application/x-protobuf or application/json", path);
  }
  v1::RoomAllocation allocation;
  if (Status decoded = wire::DecodeBody(request.body, *format, &allocation); !decoded.ok()) {
    const ErrorCode code = server::ProblemOfUndecodable(decoded);
    allocations_.Add(InfoOf(code).code);
    return ProblemReply(code, decoded.message(), path);
  }
  if (Status valid = wire::ValidateAllocation(allocation); !valid.ok()) {
    allocations_.Add("INVALID_ARGUMENT");
    return ProblemReply(ErrorCode::kInvalidArgument, valid.message(), path);
  }
  // Stored and answered with the mode it is played in, so the answer says which ladder it is.
  if (allocation.mode().empty()) allocation.set_mode(kDefaultMode);
  if (!HasToken(allocation.node_id())) {
    allocations_.Add("INVALID_ARGUMENT");
    return ProblemReply(ErrorCode::kInvalidArgument,
                        "node " + allocation.node_id() + " has no token on this lobby", path);
  }
  auto outcome = rooms_.AllocateRoom(allocation);
  if (!outcome.ok()) {
    allocations_.Add(InfoOf(ProblemOf(outcome.status())).code);
    return FailureReply(outcome.status(), path);
  }
  const Answer* answer = AnswerOf(kAllocationAnswers, outcome->status);
  allocations_.Add(std::string(answer ? LabelOf(*answer) : "INTERNAL"));
  const AnswerFields fields{.room = std::to_string(allocation.room_id()),
                            .player = outcome->busy_player,
                            .detail = outcome->detail};
  return AnswerReply(answer, "allocation", fields, allocation, request, path);
}

void SettlementService::PostSettlement(const HttpRequest& request, const Caller& caller,
                                       std::shared_ptr<Cancellation> cancel, ReplyFn done) {
  const auto started = std::chrono::steady_clock::now();
  const std::string path(kSettlePath);
  // Counts the reply by its code and sends it.
  auto answer = [this, started, done](const std::string& code, HttpReply r) {
    settlements_.Add(code);
    settle_latency_.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    done(std::move(r));
  };
  if (caller.node_id.empty()) {
    return answer("UNAUTHENTICATED",
                  ProblemReply(ErrorCode::kUnauthenticated, "settling needs a node token", path));
  }
  const auto format = wire::FormatOfContentType(request.content_type);
  if (!format) {
    return answer("UNSUPPORTED_MEDIA_TYPE",
                  ProblemReply(ErrorCode::kUnsupportedMediaType,
                               "send application/x-protobuf or application/json", path));
  }
  v1::BattleResult result;
  if (Status decoded = wire::DecodeBody(request.body, *format, &result); !decoded.ok()) {
    const ErrorCode code = server::ProblemOfUndecodable(decoded);
    LogRefusal(0, caller.node_id, code, decoded.message());
    return answer(InfoOf(code).code, ProblemReply(code, decoded.message(), path));
  }
  const uint64_t room_id = result.room_id();
  auto attempt = PrepareAttempt(std::move(result), caller);
  if (!attempt.ok()) {
    LogRefusal(room_id, caller.node_id, ErrorCode::kInvalidArgument, attempt.status().message());
    return answer("INVALID_ARGUMENT",
                  ProblemReply(ErrorCode::kInvalidArgument, attempt.status().message(), path));
  }
  attempt->cancel = std::move(cancel);
  attempt->finish = [this, answer,
                     request_format =
                         HttpRequest{"", "", request.content_type, request.accept, "", ""},
                     room = attempt->result.room_id(),
                     node = caller.node_id](const Result<SettleOutcome>& outcome) {
    LogIfRefused(room, node, outcome);
    const HttpReply reply = SettlementReply(request_format, outcome, room);
    answer(CodeOf(outcome), reply);
  };
  std::vector<Attempt> one;
  one.push_back(std::move(*attempt));
  scheduler_->Settle(std::move(one));
}

namespace {

// The items of one batch request, filled in as their rooms settle; the reply goes out when the
// last one is in.
struct BatchReply {
  std::mutex mu;
  v1::SettlementBatchReply reply;
  size_t pending = 0;
  size_t unavailable = 0;    // items the database could not answer now (UNAVAILABLE)
  size_t settled_items = 0;  // items that went to the database
  HttpRequest format;
  SettlementService::ReplyFn done;
};

void SetProblem(v1::SettlementItem* item, ErrorCode code, const std::string& detail) {
  *item->mutable_problem() = server::ItemProblem(code, detail);
}

// The item a single settlement's reply would have been.
void SetItem(v1::SettlementItem* item, const Result<SettleOutcome>& outcome, uint64_t room_id) {
  if (!outcome.ok()) {
    return SetProblem(item, ProblemOf(outcome.status()), outcome.status().message());
  }
  if (auto refused = RefusalOf(*outcome)) return SetProblem(item, refused->code, refused->detail);
  *item->mutable_receipt() = outcome->receipt;
  item->mutable_receipt()->set_room_id(room_id);
}

}  // namespace

void SettlementService::PostSettlementBatch(const HttpRequest& request, const Caller& caller,
                                            std::shared_ptr<Cancellation> cancel, ReplyFn done) {
  const std::string path(kBatchPath);
  if (caller.node_id.empty()) {
    return done(ProblemReply(ErrorCode::kUnauthenticated, "settling needs a node token", path));
  }
  const auto format = wire::FormatOfContentType(request.content_type);
  if (!format) {
    return done(ProblemReply(ErrorCode::kUnsupportedMediaType,
                             "send application/x-protobuf or application/json", path));
  }
  // The decoding refuses more than wire::kMaxBatchResults results (413) before it parses them.
  v1::SettlementBatch batch;
  if (Status decoded = wire::DecodeBody(request.body, *format, &batch); !decoded.ok()) {
    const ErrorCode code = server::ProblemOfUndecodable(decoded);
    LogRefusal(0, caller.node_id, code, decoded.message());
    return done(ProblemReply(code, decoded.message(), path));
  }
  auto collect = std::make_shared<BatchReply>();
  collect->format = HttpRequest{"", "", request.content_type, request.accept, "", ""};
  collect->done = std::move(done);
  // Answers the request once the last of its items is in.
  auto finish_batch = [this, collect] {
    if (collect->settled_items > 0 && collect->unavailable == collect->settled_items) {
      // Nothing reached the database: the whole request is unavailable, as a single one would be.
      return collect->done(Unavailable("the database cannot settle now", std::string(kBatchPath)));
    }
    collect->done(MessageReply(200, collect->reply, collect->format));
  };
  std::vector<Attempt> attempts;
  std::set<uint64_t> rooms;
  for (int i = 0; i < batch.results_size(); ++i) {
    v1::SettlementItem* item = collect->reply.add_items();
    const uint64_t room = batch.results(i).room_id();
    if (!rooms.insert(room).second) {
      const std::string detail = "room " + std::to_string(room) + " appears earlier in this batch";
      LogRefusal(room, caller.node_id, ErrorCode::kInvalidArgument, detail);
      SetProblem(item, ErrorCode::kInvalidArgument, detail);
      continue;
    }
    auto attempt = PrepareAttempt(std::move(*batch.mutable_results(i)), caller);
    if (!attempt.ok()) {
      LogRefusal(room, caller.node_id, ErrorCode::kInvalidArgument, attempt.status().message());
      SetProblem(item, ErrorCode::kInvalidArgument, attempt.status().message());
      continue;
    }
    attempt->cancel = cancel;
    attempt->finish = [this, collect, finish_batch, i, room,
                       node = caller.node_id](const Result<SettleOutcome>& outcome) {
      settlements_.Add(CodeOf(outcome));
      LogIfRefused(room, node, outcome);
      std::unique_lock lock(collect->mu);
      SetItem(collect->reply.mutable_items(i), outcome, room);
      ++collect->settled_items;
      if (!outcome.ok() && ProblemOf(outcome.status()) == ErrorCode::kUnavailable) {
        ++collect->unavailable;
      }
      if (--collect->pending > 0) return;
      lock.unlock();
      finish_batch();
    };
    attempts.push_back(std::move(*attempt));
  }
  collect->pending = attempts.size();
  if (attempts.empty()) return finish_batch();
  scheduler_->Settle(std::move(attempts));
}

HttpReply SettlementService::SettlementReply(const HttpRequest& request,
                                             const Result<SettleOutcome>& outcome,
                                             uint64_t room_id) {
  const std::string path(kSettlePath);
  if (!outcome.ok()) return FailureReply(outcome.status(), path);
  if (auto refused = RefusalOf(*outcome)) {
    return ProblemReply(refused->code, refused->detail, path, options_.retry_after_s);
  }
  v1::SettlementReceipt receipt = outcome->receipt;
  receipt.set_room_id(room_id);
  return MessageReply(200, receipt, request);
}

HttpReply SettlementService::GetSettlement(const HttpRequest& request, const Caller& caller,
                                           uint64_t room_id) {
  auto receipt = receipts_.GetReceipt(
      room_id, caller.admin ? std::nullopt : std::optional<std::string>(caller.node_id));
  if (!receipt.ok()) return FailureReply(receipt.status(), std::string(kSettlePath));
  if (!receipt->has_value()) {
    auto expired = receipts_.ReceiptExpired(
        room_id, caller.admin ? std::nullopt : std::optional<std::string>(caller.node_id));
    if (!expired.ok()) return FailureReply(expired.status(), "/v1/settlements");
    if (*expired) {
      return ProblemReply(ErrorCode::kOriginalExpired, std::string(kOriginalExpiredDetail),
                          "/v1/settlements");
    }
    return ProblemReply(ErrorCode::kRoomUnknown, "no settlement of this room is visible to you",
                        std::string(kSettlePath));
  }
  v1::SettlementReceipt r = **receipt;
  r.set_duplicate(true);  // a read of an existing settlement
  return MessageReply(200, r, request);
}

HttpReply SettlementService::Unavailable(const std::string& detail,
                                         const std::string& instance) const {
  return ProblemReply(ErrorCode::kUnavailable, detail, instance, options_.retry_after_s);
}

HttpReply SettlementService::FailureReply(const Status& failed, const std::string& instance) {
  return ProblemReply(ProblemOf(failed), failed.message(), instance, options_.retry_after_s);
}

// A lobby refusing every result of a node (a node pointed at the wrong lobby, say) writes 50 of
// these lines at once and then one a second: bounded, and each line says how many it stands for.
void SettlementService::LogRefusal(uint64_t room, const std::string& node, ErrorCode code,
                                   const std::string& detail) {
  const auto& info = InfoOf(code);
  std::string fields = room ? "room=" + std::to_string(room) + " " : "";
  fields += "node=" + node + " code=" + info.code;
  LogLimited(*spdlog::default_logger(), refusal_log_limit_, spdlog::level::warn,
             "{}: settlement refused: {}", fields, detail);
}

// A settlement answered 503 (the database away, a room another transaction holds) is retried by
// its node and counted in verdict_lobby_settlements_total: no line of its own.
void SettlementService::LogIfRefused(uint64_t room, const std::string& node,
                                     const Result<SettleOutcome>& outcome) {
  if (!outcome.ok()) {
    const ErrorCode code = ProblemOf(outcome.status());
    if (!InfoOf(code).retryable) LogRefusal(room, node, code, outcome.status().ToString());
    return;
  }
  if (auto refused = RefusalOf(*outcome); refused && !InfoOf(refused->code).retryable) {
    LogRefusal(room, node, refused->code, refused->detail);
  }
}

HttpReply SettlementService::AnswerReply(const Answer* answer, std::string_view call,
                                         const AnswerFields& fields,
                                         const google::protobuf::Message& message,
                                         const HttpRequest& request, const std::string& path) {
  if (!answer) return ProblemReply(ErrorCode::kInternal, UnknownOutcome(call), path);
  if (answer->success) return MessageReply(answer->success, message, request);
  return ProblemReply(answer->problem, FillDetail(answer->detail, fields), path,
                      options_.retry_after_s);
}

HttpReply SettlementService::MessageReply(int status, const google::protobuf::Message& message,
                                          const HttpRequest& request) {
  const wire::BodyFormat format = wire::ReplyFormat(
      request.accept, wire::FormatOfContentType(request.content_type), wire::BodyFormat::kJson);
  auto body = wire::EncodeBody(message, format);
  if (!body.ok()) {
    // Never a 2xx with an empty body: the client would take it for an answer.
    spdlog::error("cannot encode the {} reply: {}", status, body.status().ToString());
    return ProblemReply(ErrorCode::kInternal, body.status().message(), "");
  }
  return {status, std::string(wire::ContentTypeOf(format)), std::move(*body), {}};
}

}  // namespace verdict::lobby
