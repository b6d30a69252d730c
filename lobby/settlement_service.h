// SettlementService: the lobby's request handling without the transport — routing,
// authentication, content negotiation, validation, coalescing of identical concurrent
// settlements, and the error contract. Handle() blocks on the database: the HTTP server calls
// it from DB worker threads. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/metrics.h"
#include "common/status.h"
#include "lobby/event_hub.h"
#include "lobby/http_types.h"
#include "lobby/settlement_store.h"
#include "lobby/validation.h"

namespace verdict::lobby {

struct ServiceOptions {
  // node_id → bearer token; a node may settle only rooms allocated to it.
  std::map<std::string, std::string> node_tokens;
  // Bearer token that POST /v1/rooms requires (and that may read any room). Empty: allocation
  // is refused with 401.
  std::string admin_token;
  // Seconds a 503 asks the client to wait (Retry-After).
  // Default: 1.
  int retry_after_s = 1;
};

// Who a request is from, by its bearer token.
struct Caller {
  bool admin = false;
  std::string node_id;  // empty unless a node
};

class SettlementService {
 public:
  // `store`, `hub` and `registry` must outlive the service; `hub` may be null.
  SettlementService(SettlementStore& store, EventHub* hub, ServiceOptions options,
                    metrics::Registry& registry);

  HttpReply Handle(const HttpRequest& request);

  // True for requests that never touch the database (the server answers them on its I/O
  // threads): health and metrics.
  static bool IsCheap(const HttpRequest& request);

  // For GET /v1/events: the caller (any valid token), or nullopt.
  std::optional<Caller> Authenticate(const std::string& authorization) const;
  // `after` from "/v1/events?after=N" (0 when absent); INVALID_ARGUMENT if malformed.
  static Result<int64_t> ParseEventsAfter(const std::string& target);

  SettlementStore& store() { return store_; }

 private:
  struct Flight;

  HttpReply PostRoom(const HttpRequest& request, const Caller& caller);
  HttpReply PostSettlement(const HttpRequest& request, const Caller& caller);
  HttpReply GetSettlement(const HttpRequest& request, const Caller& caller, uint64_t room_id);
  HttpReply GetPlayer(const HttpRequest& request, uint64_t player_id);
  Result<SettleOutcome> SettleCoalesced(const v1::BattleResult& result, const std::string& node_id,
                                        const std::string& fingerprint);
  HttpReply Unavailable(const Status& status, const std::string& instance);
  HttpReply MessageReply(int status, const google::protobuf::Message& message,
                         const HttpRequest& request);

  SettlementStore& store_;
  EventHub* hub_;
  const ServiceOptions options_;

  std::mutex flights_mu_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;

  metrics::LabeledCounter& settlements_;
  metrics::LabeledCounter& allocations_;
  metrics::Histogram& settle_latency_;
  metrics::Counter& coalesced_;
};

// sha256 of the deterministic serialization: the payload fingerprint of DESIGN §3 (32 bytes).
std::string Fingerprint(const v1::BattleResult& result);

// Compares without an early exit, so timing does not reveal how much of a token matched.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace verdict::lobby
