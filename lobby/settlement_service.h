// SettlementService: the lobby's request handling without the transport — routing,
// authentication, content negotiation, validation, and the error contract. The settlements'
// turns per room and their group commit are its SettlementScheduler's
// (lobby/settlement_scheduler.h). Handle() blocks on the database: the HTTP server calls it from
// DB worker threads. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/log_rate_limit.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "lobby/answers.h"
#include "lobby/event_hub.h"
#include "lobby/readiness.h"
#include "lobby/settlement_scheduler.h"
#include "lobby/settlement_store.h"
#include "proto/validation.h"
#include "server/http_server.h"
#include "server/http_types.h"
#include "server/problem.h"

namespace verdict::lobby {

// The lobby answers with the shared server's request, reply and error types.
using server::ErrorCode;
using server::HttpReply;
using server::HttpRequest;
using server::InfoOf;
using server::ProblemReply;

// A bearer token and the node it belongs to. A node may have several at once (while its token
// is being rotated); a token belongs to one node.
struct NodeToken {
  std::string node_id;
  std::string token;
};

struct ServiceOptions {
  // The nodes' tokens; a node may settle only rooms allocated to it.
  std::vector<NodeToken> node_tokens;
  // Bearer token that POST /v1/rooms requires (and that may read any room). Empty: allocation
  // is refused with 401.
  std::string admin_token;
  // Seconds a 503 asks the client to wait (Retry-After).
  // Default: 1.
  int retry_after_s = 1;
  // The group commit (lobby/settlement_scheduler.h); its clock also times the refusals' log
  // limit.
  SchedulerOptions settlement;
  // The most later matches a `replay` void may rate again (docs/design.md §5, "Voiding a match").
  // Default: 1,000 (`serve --void-replay-limit`).
  int void_replay_limit = VoidRequest{}.replay_limit;
};

// The roles of the store the service uses: settlements, rooms, receipts, the ladder and voids.
// Not owned.
struct ServiceStores {
  BatchSettler& settler;
  RoomStore& rooms;
  ReceiptStore& receipts;
  LadderStore& ladder;
  GovernanceStore& governance;

  // All five from one store that plays every role (lobby/pg_store.h's PgStore, a test's fake).
  template <typename Store>
  static ServiceStores Of(Store& store) {
    return ServiceStores{store, store, store, store, store};
  }
};

// Who a request is from, by its bearer token.
struct Caller {
  bool admin = false;
  std::string node_id;  // empty unless a node
};

// How a settlement outcome that is not a receipt is answered: its error code and detail.
struct SettlementRefusal {
  ErrorCode code;
  std::string detail;
};

// The refusal for `outcome` in kSettlementAnswers (lobby/answers.h), or nullopt when it is
// answered with its receipt (settled, or a duplicate).
std::optional<SettlementRefusal> RefusalOf(const SettleOutcome& outcome);

class SettlementService {
 public:
  // `stores`, `hub`, `registry` and `readiness` must outlive the service; `hub` may be null, and
  // so may `readiness` (then /readyz answers 503).
  SettlementService(ServiceStores stores, EventHub* hub, ServiceOptions options,
                    metrics::Registry& registry, const ReadinessMonitor* readiness = nullptr);
  ~SettlementService();
  SettlementService(const SettlementService&) = delete;
  SettlementService& operator=(const SettlementService&) = delete;

  using ReplyFn = std::function<void(HttpReply)>;

  // Answers `request` by calling `done` exactly once: before returning, or later from the
  // thread of another settlement of the same room. Attempts at one room take turns, so however
  // many arrive together they hold one DB worker between them: identical ones share the
  // running one's outcome, different ones wait (without a worker) and run after it.
  // `cancel` (may be null) is cancelled by the server when the client hangs up: the attempt's
  // statement is stopped, or the attempt is skipped if it has not started.
  void Handle(const HttpRequest& request, std::shared_ptr<Cancellation> cancel, ReplyFn done);

  // A request judged from its header alone, before any of its body is read (the server asks
  // on an I/O thread; it never blocks): the answer when the header is enough, else the largest
  // body the endpoint reads. Answered here: /healthz, /metrics, /readyz (from the readiness
  // monitor's last verdict), an unknown path (404), a missing or invalid token (401), a wrong
  // method (405), an id out of range (400). The GET endpoints read no body: one announced is
  // refused 413 from its header.
  server::HeaderVerdict Judge(const server::RequestHead& head) const;

  // For GET /v1/events: the caller (any valid token), or nullopt.
  std::optional<Caller> Authenticate(const std::string& authorization) const;

  // OK if `tokens` can serve beside `admin_token`: no token given to two nodes, and none equal to
  // the admin token (that node would be taken for the admin, refused its settlements with 401
  // and given admin rights). INVALID_ARGUMENT saying which otherwise.
  static Status CheckTokens(const std::vector<NodeToken>& tokens, const std::string& admin_token);

  // Replaces the node tokens (SIGHUP reloads them), unless CheckTokens refuses them: then the
  // tokens in use stay, and the error says why. Requests in flight finish with the tokens they
  // were authenticated with; connections stay open.
  Status ReplaceNodeTokens(std::vector<NodeToken> tokens);
  // `after` from "/v1/events?after=N" (nullopt when absent: the feed starts at the beginning of
  // what it holds, its trim mark); INVALID_ARGUMENT if malformed.
  static Result<std::optional<int64_t>> ParseEventsAfter(const std::string& target);
  // `epoch` from "/v1/events?epoch=E" (empty when absent); INVALID_ARGUMENT if malformed.
  static Result<std::string> ParseEventsEpoch(const std::string& target);
  // The refusal of a subscription to the feed from cursor `after` in `epoch` (empty: not given),
  // or nullopt if the feed can continue from there: EPOCH_CHANGED for another epoch,
  // CURSOR_AHEAD beyond the head, CURSOR_TRIMMED below the events retained (docs/events.md).
  // Each problem says where the feed stands.
  static std::optional<HttpReply> RefuseEventsCursor(const FeedState& feed, int64_t after,
                                                     const std::string& epoch,
                                                     const std::string& instance);

 private:
  HttpReply PostRoom(const HttpRequest& request, const Caller& caller);
  void PostSettlement(const HttpRequest& request, const Caller& caller,
                      std::shared_ptr<Cancellation> cancel, ReplyFn done);
  void PostSettlementBatch(const HttpRequest& request, const Caller& caller,
                           std::shared_ptr<Cancellation> cancel, ReplyFn done);
  HttpReply SettlementReply(const HttpRequest& request, const Result<SettleOutcome>& outcome,
                            uint64_t room_id);
  HttpReply GetSettlement(const HttpRequest& request, const Caller& caller, uint64_t room_id);
  // POST /v1/rooms/{room_id}:release and :abort (lobby/room_actions.cc).
  void PostRoomAction(const HttpRequest& request, const Caller& caller, uint64_t room_id,
                      const std::string& action, ReplyFn done);
  void AbortRoom(const HttpRequest& request, const AllocatedRoom& room, const std::string& reason,
                 ReplyFn done);
  // POST /v1/matches/{match_id}:void and /v1/rooms/{room_id}:void (lobby/match_actions.cc): the
  // match, by its id or its room's (the other 0).
  HttpReply PostVoid(const HttpRequest& request, const Caller& caller, uint64_t match_id,
                     uint64_t room_id);
  // The players, modes and ladders (lobby/ladder_endpoints.cc).
  HttpReply GetPlayer(const HttpRequest& request, const std::string& player_id);
  HttpReply PutRating(const HttpRequest& request, const Caller& caller,
                      const std::string& player_id, const std::string& mode);
  HttpReply PutMode(const HttpRequest& request, const Caller& caller, const std::string& mode);
  HttpReply GetMode(const HttpRequest& request, const std::string& mode);
  HttpReply GetLeaderboard(const HttpRequest& request, const std::string& mode);
  bool HasToken(const std::string& node_id) const;
  // 503 UNAVAILABLE with Retry-After: the client should try again later.
  HttpReply Unavailable(const std::string& detail, const std::string& instance) const;
  // The problem of a failed store call: 500 INTERNAL (not retryable) for an error the same call
  // would meet again, 503 UNAVAILABLE otherwise.
  HttpReply FailureReply(const Status& failed, const std::string& instance);
  HttpReply MessageReply(int status, const google::protobuf::Message& message,
                         const HttpRequest& request);
  // The reply of a store call's status by its `answer` (lobby/answers.h): `message` for a
  // success, else the problem, its detail filled from `fields`. No answer (nullptr): 500 INTERNAL
  // saying `call`'s outcome is unknown.
  HttpReply AnswerReply(const Answer* answer, std::string_view call, const AnswerFields& fields,
                        const google::protobuf::Message& message, const HttpRequest& request,
                        const std::string& path);
  // Logs a result refused for good (room 0: the body named none): once per result, at warning,
  // with its room, node and code; at most 50 lines at once and then one a second
  // (refusal_log_limit_), each saying how many it stands for.
  void LogRefusal(uint64_t room, const std::string& node, ErrorCode code,
                  const std::string& detail);
  // LogRefusal for an outcome of the store that is final: a refusal, or a failure a retry would
  // meet again (INTERNAL).
  void LogIfRefused(uint64_t room, const std::string& node, const Result<SettleOutcome>& outcome);

  RoomStore& rooms_;
  ReceiptStore& receipts_;
  LadderStore& ladder_;
  GovernanceStore& governance_;
  EventHub* hub_;
  const ServiceOptions options_;
  metrics::Registry& registry_;
  const ReadinessMonitor* readiness_;

  mutable Mutex tokens_mu_;
  std::shared_ptr<const std::vector<NodeToken>> node_tokens_ GUARDED_BY(tokens_mu_);

  metrics::LabeledCounter& settlements_;
  metrics::LabeledCounter& allocations_;
  metrics::LabeledCounter& room_actions_;
  metrics::LabeledCounter& voids_;
  metrics::Histogram& settle_latency_;
  LogRateLimit refusal_log_limit_;
  // The store's settlement call, and what a commit means beyond the replies (the event hub's
  // news, the log); the group commit that makes it (lobby/settlement_scheduler.h).
  const std::unique_ptr<BatchSettler> committer_;
  const std::unique_ptr<SettlementScheduler> scheduler_;
};

// sha256 of the deterministic serialization: the payload fingerprint of docs/design.md §3 (32
// bytes).
std::string Fingerprint(const v1::BattleResult& result);

}  // namespace verdict::lobby
