#include "node/ingest.h"

#include <charconv>
#include <mutex>

#include <spdlog/spdlog.h>

#include "common/bearer_token.h"
#include "common/constant_time.h"
#include "common/log.h"
#include "proto/validation.h"
#include "proto/wire.h"
#include "server/problem.h"
#include "storage/outbox.h"

namespace verdict::node {
namespace {

using server::ErrorCode;
using server::HttpReply;
using server::ProblemReply;

constexpr std::string_view kResultPath = "/v1/results";
constexpr std::string_view kBatchPath = "/v1/results:batch";
constexpr std::string_view kRedrivePath = "/v1/outbox:redrive";
constexpr int kRetryAfterS = 1;

HttpReply TextReply(int status, std::string text) {
  return {status, "text/plain", std::move(text), {}};
}

HttpReply MessageReply(int status, const google::protobuf::Message& message,
                       const std::string& accept) {
  // JSON unless the client asks for protobuf: the sidecar is called by hand and from scripts.
  const wire::BodyFormat format = wire::ReplyFormat(accept, std::nullopt, wire::BodyFormat::kJson);
  auto body = wire::EncodeBody(message, format);
  if (!body.ok()) return ProblemReply(ErrorCode::kInternal, body.status().message(), "");
  return {status, std::string(wire::ContentTypeOf(format)), std::move(*body), {}};
}

v1::StoredResult StoredOf(uint64_t room_id, const storage::EnqueueResult& r) {
  v1::StoredResult stored;
  stored.set_room_id(room_id);
  stored.set_shard(r.shard);
  stored.set_sequence(r.sequence);
  stored.set_duplicate(r.already_present);
  return stored;
}

// The problem for a result the outbox refused or could not store.
ErrorCode ProblemOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kAlreadyExists:
      return ErrorCode::kIdempotencyMismatch;
    case StatusCode::kResourceExhausted:
      return ErrorCode::kPayloadTooLarge;
    case StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    default:
      return ErrorCode::kUnavailable;
  }
}

// What ?durability= asks for: false for "stored" (the default), true for "replicated";
// INVALID_ARGUMENT for anything else.
Result<bool> ReplicatedAsked(const std::string& target) {
  bool replicated = false;
  for (const server::QueryParam& p : server::QueryParams(target)) {
    if (p.name != "durability" || !p.has_value) continue;
    if (p.value == "replicated") {
      replicated = true;
    } else if (p.value == "stored") {
      replicated = false;
    } else {
      return InvalidArgumentError("durability is 'stored' or 'replicated', not '" +
                                  wire::ValidUtf8(p.value) + "'");
    }
  }
  return replicated;
}

// What POST /v1/outbox:redrive asks for: the side area (`from`), and one room (`room_id`) or
// every record (`all=true`), exactly one of the two.
struct RedriveAsk {
  storage::SideArea from = storage::SideArea::kDeadLetter;
  std::optional<uint64_t> room_id;  // unset: all
};

// The redrive's query, or INVALID_ARGUMENT saying what is wrong with it.
Result<RedriveAsk> RedriveAskOf(const std::string& target) {
  std::optional<std::string_view> from, room, all;
  for (const server::QueryParam& p : server::QueryParams(target)) {
    std::optional<std::string_view>* slot = p.name == "from"      ? &from
                                            : p.name == "room_id" ? &room
                                            : p.name == "all"     ? &all
                                                                  : nullptr;
    if (!slot) {
      return InvalidArgumentError("unknown parameter '" + wire::ValidUtf8(p.name) +
                                  "'; give from, and room_id or all=true");
    }
    if (*slot) return InvalidArgumentError(std::string(p.name) + " is given twice");
    *slot = p.value;
  }
  RedriveAsk ask;
  if (from == "dead-letter") {
    ask.from = storage::SideArea::kDeadLetter;
  } else if (from == "quarantine") {
    ask.from = storage::SideArea::kQuarantine;
  } else {
    return InvalidArgumentError("from is 'dead-letter' or 'quarantine'");
  }
  if (all && room) return InvalidArgumentError("give room_id or all=true, not both");
  if (all) {
    if (*all != "true") return InvalidArgumentError("all is 'true' when given");
    return ask;
  }
  if (!room) return InvalidArgumentError("give the room_id whose records move, or all=true");
  uint64_t id = 0;
  const auto [end, error] = std::from_chars(room->data(), room->data() + room->size(), id);
  if (room->empty() || error != std::errc() || end != room->data() + room->size() || id == 0) {
    return InvalidArgumentError("room_id is a room id: a decimal integer from 1 to 2^64-1");
  }
  ask.room_id = id;
  return ask;
}

// The problem for a stored result that could not be replicated.
ErrorCode ReplicationProblemOf(const Status& s) {
  return s.code() == StatusCode::kAlreadyExists ? ErrorCode::kIdempotencyMismatch
                                                : ErrorCode::kUnavailable;
}

}  // namespace

IngestService::IngestService(IngestOptions options, std::string node_id, uint32_t shard_count,
                             size_t first_ingest_listener, IngestHooks hooks,
                             metrics::Registry& registry)
    : options_(std::move(options)),
      node_id_(std::move(node_id)),
      shard_count_(shard_count),
      first_ingest_listener_(first_ingest_listener),
      hooks_(std::move(hooks)),
      token_(options_.token),
      result_not_durable_(Unavailable(
          "the result is not durable yet (the outbox is slow or failing); retry it: an identical "
          "result already stored is answered 200",
          std::string(kResultPath))),
      batch_not_durable_(Unavailable(
          "the results are not durable yet (the outbox is slow or failing); retry the batch: "
          "results already stored are answered as duplicates",
          std::string(kBatchPath))),
      result_not_replicated_(Unavailable(
          "the result is not replicated yet (etcd is slow or away; it may already be stored on "
          "this node); retry it: an identical result is answered 200 once it is replicated",
          std::string(kResultPath))),
      batch_not_replicated_(Unavailable(
          "the results are not replicated yet (etcd is slow or away; they may already be stored "
          "on this node); retry the batch: results already stored are answered as duplicates "
          "once replicated",
          std::string(kBatchPath))),
      answers_(registry.AddLabeledCounter(
          "verdict_node_ingest_results_total",
          "Results posted to the ingest endpoints, by answer: STORED, DUPLICATE, or the problem "
          "code.",
          "result")) {
  registry.AddGauge("verdict_node_ingest_pending_results",
                    "Results posted and not yet durable (their requests wait for the fsync).",
                    [this] { return static_cast<double>(pending_.load()); });
}

void IngestService::SetToken(std::string token) {
  MutexLock lock(&token_mu_);
  token_ = std::move(token);
}

bool IngestService::TokenMatches(const std::string& authorization) const {
  const std::optional<std::string_view> presented = BearerTokenOf(authorization);
  if (!presented) return false;
  MutexLock lock(&token_mu_);
  return !token_.empty() && ConstantTimeEquals(*presented, token_);
}

HttpReply IngestService::Unavailable(const std::string& detail, const std::string& path) const {
  return ProblemReply(ErrorCode::kUnavailable, detail, path, kRetryAfterS);
}

server::HeaderVerdict IngestService::OnHeader(const server::RequestHead& head) {
  const std::string& path = head.path;
  auto only = [&](const char* method) -> std::optional<HttpReply> {
    if (head.method == method) return std::nullopt;
    return ProblemReply(ErrorCode::kMethodNotAllowed, path + " takes " + method, path);
  };
  if (path == "/metrics" || path == "/healthz" || path == "/readyz") {
    if (auto refused = only("GET")) return {std::move(refused)};
    if (path == "/metrics") {
      return {HttpReply{200, std::string(metrics::kTextContentType), hooks_.metrics(), {}}};
    }
    const Status s = path == "/healthz" ? hooks_.health() : hooks_.ready();
    if (!s.ok()) return {TextReply(503, s.message() + "\n")};
    return {TextReply(200, path == "/healthz" ? "ok\n" : "ready\n")};
  }
  if (path == kRedrivePath && head.listener >= first_ingest_listener_) {
    if (auto refused = only("POST")) return {std::move(refused)};
    if (!head.local && !TokenMatches(head.authorization)) {
      return {ProblemReply(ErrorCode::kUnauthenticated,
                           "this listener needs the node's ingest bearer token", path)};
    }
    return {std::nullopt, 0};  // everything is in the query
  }
  const bool result = path == kResultPath;
  if ((!result && path != kBatchPath) || head.listener < first_ingest_listener_) {
    return {ProblemReply(ErrorCode::kNotFound,
                         "no such endpoint; results go to POST /v1/results on an ingest listener",
                         path)};
  }
  if (auto refused = only("POST")) return {std::move(refused)};
  if (!head.local && !TokenMatches(head.authorization)) {
    answers_.Add("UNAUTHENTICATED");
    return {ProblemReply(ErrorCode::kUnauthenticated,
                         "this listener needs the node's ingest bearer token", path)};
  }
  if (!wire::FormatOfContentType(head.content_type)) {
    answers_.Add("UNSUPPORTED_MEDIA_TYPE");
    return {ProblemReply(ErrorCode::kUnsupportedMediaType,
                         "send application/json or application/x-protobuf", path)};
  }
  return {std::nullopt, result ? wire::kMaxResultBodyBytes : wire::kMaxBatchBodyBytes};
}

void IngestService::OnRequest(const server::RequestHead& head, server::HttpRequest request,
                              std::shared_ptr<server::Exchange> exchange) {
  if (head.path == kRedrivePath) return PostRedrive(head.target, std::move(exchange));
  auto replicated = ReplicatedAsked(head.target);
  if (replicated.ok() && *replicated && !hooks_.replicate) {
    replicated = InvalidArgumentError(
        "durability=replicated: this node does not replicate (it runs without --replicate-to)");
  }
  if (!replicated.ok()) {
    answers_.Add("INVALID_ARGUMENT");
    return exchange->Reply(ProblemReply(ErrorCode::kInvalidArgument, replicated.status().message(),
                                        head.path, kRetryAfterS));
  }
  if (head.path == kResultPath) return PostResult(request, std::move(exchange), *replicated);
  PostBatch(request, std::move(exchange), *replicated);
}

void IngestService::PostRedrive(const std::string& target,
                                std::shared_ptr<server::Exchange> exchange) {
  const std::string path(kRedrivePath);
  auto ask = RedriveAskOf(target);
  if (!ask.ok()) {
    return exchange->Reply(ProblemReply(ErrorCode::kInvalidArgument, ask.status().message(), path));
  }
  if (!hooks_.redrive) {
    return exchange->Reply(
        ProblemReply(ErrorCode::kNotFound, "this node does not redrive through its API", path));
  }
  const Status started = hooks_.redrive(
      ask->from, ask->room_id, [exchange, path](Result<storage::RedriveReport> report) {
        if (!report.ok()) {
          // A full disk or an I/O error may pass; a damaged outbox will not.
          const StatusCode failed = report.status().code();
          const ErrorCode code =
              failed == StatusCode::kUnavailable || failed == StatusCode::kResourceExhausted
                  ? ErrorCode::kUnavailable
                  : ErrorCode::kInternal;
          return exchange->Reply(ProblemReply(code, report.status().message(), path, kRetryAfterS));
        }
        exchange->Reply({200,
                         "application/json",
                         "{\"moved\":" + std::to_string(report->moved) +
                             ",\"skipped\":" + std::to_string(report->skipped) + "}",
                         {}});
      });
  if (!started.ok()) exchange->Reply(Unavailable(started.message(), path));
}

Status IngestService::Prepare(v1::BattleResult& result) const {
  if (result.node_id().empty()) {
    result.set_node_id(node_id_);
  } else if (result.node_id() != node_id_) {
    return InvalidArgumentError("node_id '" + wire::ValidUtf8(result.node_id()) +
                                "' is not this node's ('" + node_id_ + "')");
  }
  return wire::ValidateResult(result);
}

// Answers of one request, filled in by the writer's completions; the last one answers, unless
// the negative control answered first. `answer` is set before any completion can run and never
// changed after: the completions run on the writer's thread.
struct IngestService::Pending {
  std::mutex mu;
  std::vector<storage::EnqueueResult> outcomes;
  size_t left = 0;
  std::function<void(std::vector<storage::EnqueueResult>)> answer;
  std::atomic<bool> answered{false};

  // Runs `answer` with `with`, if nothing answered before.
  void Answer(std::vector<storage::EnqueueResult> with) {
    if (!answered.exchange(true)) answer(std::move(with));
  }
};

std::optional<HttpReply> IngestService::Store(
    std::vector<v1::BattleResult> results,
    std::function<void(std::vector<storage::EnqueueResult>)> answer, const std::string& path) {
  const size_t n = results.size();
  if (Status ready = hooks_.ready(); !ready.ok()) return Unavailable(ready.message(), path);
  if (pending_.fetch_add(n) + n > options_.max_pending_results) {
    pending_ -= n;
    return Unavailable("too many results are waiting to be made durable", path);
  }
  auto pending = std::make_shared<Pending>();
  pending->outcomes.resize(n);
  pending->left = n;
  pending->answer = std::move(answer);
  std::vector<ResultChannel::Completion> done;
  done.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    done.emplace_back([this, pending, i](const storage::EnqueueResult& r) {
      --pending_;
      std::unique_lock lock(pending->mu);
      pending->outcomes[i] = r;
      if (--pending->left > 0) return;
      std::vector<storage::EnqueueResult> outcomes = std::move(pending->outcomes);
      lock.unlock();
      pending->Answer(std::move(outcomes));
    });
  }
  std::vector<uint64_t> rooms;
  if (options_.unsafe_answer_before_durable_for_test) {
    for (const auto& r : results) rooms.push_back(r.room_id());
  }
  if (Status offered = hooks_.offer(std::move(results), std::move(done)); !offered.ok()) {
    pending_ -= n;
    return Unavailable(offered.message(), path);
  }
  if (options_.unsafe_answer_before_durable_for_test) {
    Log().warn("UNSAFE: answering for {} result(s) before they are durable", n);
    std::vector<storage::EnqueueResult> fake(n);
    for (size_t i = 0; i < n; ++i) fake[i].shard = storage::RoomShard(rooms[i], shard_count_);
    pending->Answer(std::move(fake));
  }
  return std::nullopt;
}

void IngestService::PostResult(const server::HttpRequest& request,
                               std::shared_ptr<server::Exchange> exchange, bool replicated) {
  const std::string path(kResultPath);
  auto refuse = [&](ErrorCode code, const std::string& detail) {
    answers_.Add(server::InfoOf(code).code);
    exchange->Reply(ProblemReply(code, detail, path, kRetryAfterS));
  };
  v1::BattleResult result;
  if (Status decoded =
          wire::DecodeBody(request.body, *wire::FormatOfContentType(request.content_type), &result);
      !decoded.ok()) {
    return refuse(server::ProblemOfUndecodable(decoded),
                  "undecodable BattleResult: " + decoded.message());
  }
  if (Status valid = Prepare(result); !valid.ok()) {
    return refuse(ErrorCode::kInvalidArgument, valid.message());
  }
  const uint64_t room = result.room_id();
  std::vector<v1::BattleResult> one;
  one.push_back(std::move(result));
  std::vector<v1::BattleResult> to_replicate;
  if (replicated) to_replicate = one;
  auto refused = Store(
      std::move(one),
      [this, exchange, room, accept = request.accept, path,
       to_replicate = std::move(to_replicate)](std::vector<storage::EnqueueResult> outcomes) {
        const storage::EnqueueResult r = outcomes.front();
        if (!r.status.ok()) {
          const ErrorCode code = ProblemOf(r.status);
          answers_.Add(server::InfoOf(code).code);
          return exchange->Reply(ProblemReply(code, r.status.message(), path, kRetryAfterS));
        }
        auto answer = [this, exchange, room, accept, r] {
          answers_.Add(r.already_present ? "DUPLICATE" : "STORED");
          exchange->Reply(MessageReply(r.already_present ? 200 : 201, StoredOf(room, r), accept));
        };
        if (to_replicate.empty()) return answer();
        hooks_.replicate(to_replicate, [this, exchange, path, answer](std::vector<Status> done) {
          const Status& s = done.front();
          if (s.ok()) return answer();
          const ErrorCode code = ReplicationProblemOf(s);
          answers_.Add(server::InfoOf(code).code);
          exchange->Reply(
              ProblemReply(code, "stored, not replicated: " + s.message(), path, kRetryAfterS));
        });
      },
      path);
  if (refused) {
    answers_.Add("UNAVAILABLE");
    return exchange->Reply(std::move(*refused));
  }
  if (replicated) {
    return exchange->ReplyUnlessAnsweredWithin(options_.replicated_wait, result_not_replicated_);
  }
  exchange->ReplyUnlessAnsweredWithin(options_.durable_wait, result_not_durable_);
}

void IngestService::PostBatch(const server::HttpRequest& request,
                              std::shared_ptr<server::Exchange> exchange, bool replicated) {
  const std::string path(kBatchPath);
  auto refuse = [&](ErrorCode code, const std::string& detail) {
    answers_.Add(server::InfoOf(code).code);
    exchange->Reply(ProblemReply(code, detail, path, kRetryAfterS));
  };
  // The decoding refuses more than wire::kMaxBatchResults results (413) before it parses them.
  v1::SettlementBatch batch;
  if (Status decoded =
          wire::DecodeBody(request.body, *wire::FormatOfContentType(request.content_type), &batch);
      !decoded.ok()) {
    return refuse(server::ProblemOfUndecodable(decoded), "undecodable batch: " + decoded.message());
  }
  // Items refused here are answered in place; the others are stored together, with one fsync.
  auto reply = std::make_shared<v1::StoredBatchReply>();
  std::vector<v1::BattleResult> valid;
  std::vector<int> slots;  // reply item of each valid result
  for (v1::BattleResult& result : *batch.mutable_results()) {
    v1::StoredItem* item = reply->add_items();
    if (Status s = Prepare(result); !s.ok()) {
      answers_.Add("INVALID_ARGUMENT");
      *item->mutable_problem() = server::ItemProblem(ErrorCode::kInvalidArgument, s.message());
      continue;
    }
    slots.push_back(reply->items_size() - 1);
    valid.push_back(std::move(result));
  }
  std::vector<uint64_t> rooms;
  for (const auto& r : valid) rooms.push_back(r.room_id());
  std::vector<v1::BattleResult> to_replicate;
  if (replicated) to_replicate = valid;
  auto answer = [this, exchange, reply, slots, rooms, accept = request.accept,
                 to_replicate =
                     std::move(to_replicate)](std::vector<storage::EnqueueResult> outcomes) {
    std::vector<v1::BattleResult> stored;  // to replicate: the ones stored OK
    std::vector<size_t> stored_at;         // their index in `outcomes`
    for (size_t i = 0; i < outcomes.size(); ++i) {
      v1::StoredItem* item = reply->mutable_items(slots[i]);
      const storage::EnqueueResult& r = outcomes[i];
      if (r.status.ok()) {
        *item->mutable_stored() = StoredOf(rooms[i], r);
        if (!to_replicate.empty()) {
          stored.push_back(to_replicate[i]);
          stored_at.push_back(i);
          continue;
        }
        answers_.Add(r.already_present ? "DUPLICATE" : "STORED");
      } else {
        const ErrorCode code = ProblemOf(r.status);
        answers_.Add(server::InfoOf(code).code);
        *item->mutable_problem() = server::ItemProblem(code, r.status.message());
      }
    }
    if (stored.empty()) return exchange->Reply(MessageReply(200, *reply, accept));
    hooks_.replicate(stored, [this, exchange, reply, slots, outcomes, stored_at,
                              accept](std::vector<Status> done) {
      for (size_t j = 0; j < done.size(); ++j) {
        const size_t i = stored_at[j];
        v1::StoredItem* item = reply->mutable_items(slots[i]);
        if (done[j].ok()) {
          answers_.Add(outcomes[i].already_present ? "DUPLICATE" : "STORED");
          continue;
        }
        const ErrorCode code = ReplicationProblemOf(done[j]);
        answers_.Add(server::InfoOf(code).code);
        *item->mutable_problem() =
            server::ItemProblem(code, "stored, not replicated: " + done[j].message());
      }
      exchange->Reply(MessageReply(200, *reply, accept));
    });
  };
  if (valid.empty()) return answer({});
  if (auto refused = Store(std::move(valid), std::move(answer), path)) {
    answers_.Add("UNAVAILABLE", slots.size());
    return exchange->Reply(std::move(*refused));
  }
  if (replicated) {
    return exchange->ReplyUnlessAnsweredWithin(options_.replicated_wait, batch_not_replicated_);
  }
  exchange->ReplyUnlessAnsweredWithin(options_.durable_wait, batch_not_durable_);
}

}  // namespace verdict::node
