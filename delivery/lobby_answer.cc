#include "delivery/lobby_answer.h"

#include <string_view>

#include "proto/problem.h"
#include "proto/wire.h"

namespace verdict::delivery {
namespace {

// A Retry-After of more digits than this (over eleven days) is not believed, and ignored.
constexpr size_t kMaxRetryAfterDigits = 6;
// How much of a Content-Type, and of a decoder's error, a log line quotes.
constexpr size_t kQuotedContentTypeChars = 64;
constexpr size_t kQuotedErrorChars = 200;

bool IsSuccess(int status) { return status >= 200 && status < 300; }

std::string CauseOfStatus(int64_t status) { return "http_" + std::to_string(status); }

// The lobby's Retry-After in ms, 0 if absent or not a small number of seconds.
int64_t RetryAfterMs(const HttpResponse& res) {
  const std::string& value = res.retry_after;
  if (value.empty() || value.size() > kMaxRetryAfterDigits ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  return std::stoll(value) * 1000;
}

// Decodes a 2xx body as `message` per its Content-Type; false (and why) if it is not one: an
// HTML page from a proxy, an empty body.
bool DecodeAnswer(const HttpResponse& res, google::protobuf::Message* message, std::string* why) {
  const auto format = wire::FormatOfContentType(res.content_type);
  if (!format) {
    *why = "Content-Type '" + res.content_type.substr(0, kQuotedContentTypeChars) + "' is not a " +
           message->GetTypeName();
    return false;
  }
  std::string error;
  if (!wire::DecodeBody(res.body, *format, message, &error)) {
    *why = "body is not a " + message->GetTypeName() + ": " + error.substr(0, kQuotedErrorChars);
    return false;
  }
  return true;
}

// Whether `receipt` is the lobby's receipt for `result`: same room and outcome. Another room's
// receipt is not, and says why in `why`.
bool ReceiptMatches(const v1::SettlementReceipt& receipt, const v1::BattleResult& result,
                    std::string* why) {
  if (receipt.room_id() != result.room_id() || receipt.outcome() != result.outcome()) {
    *why = "receipt is for room " + std::to_string(receipt.room_id()) + " outcome " +
           std::to_string(receipt.outcome());
    return false;
  }
  return true;
}

// The lobby's answer to a result whose room it settled so long ago that only a compact record of
// the settlement is left: the result was delivered then.
constexpr std::string_view kOriginalExpired = "ORIGINAL_EXPIRED";

// Acts on a problem (of a whole reply, or of a batch item): its detail explains `a`;
// ORIGINAL_EXPIRED is a delivery; with `retryable: false` the refusal is terminal, with the
// problem's code (or the cause if it has none). Anything else leaves `a` to be retried.
void ApplyProblem(const v1::Problem& problem, Attempt* a) {
  if (!problem.detail().empty()) a->message = problem.detail();
  if (problem.code() == kOriginalExpired) {
    a->kind = Attempt::Kind::kDelivered;
    a->expired = true;
    return;
  }
  if (problem.retryable()) return;
  a->kind = Attempt::Kind::kTerminal;
  a->code = problem.code().empty() ? a->cause : problem.code();
}

// What one item of a batch reply means for its record: the same as the single endpoint's
// answer would (a matching receipt acks, a problem with retryable: false is terminal with its
// code, anything else is retried).
Attempt ItemAttempt(const v1::SettlementItem& item, const v1::BattleResult& result,
                    int64_t retry_after_ms) {
  Attempt a;  // kRetryRoom
  if (item.has_receipt()) {
    if (!ReceiptMatches(item.receipt(), result, &a.message)) {
      a.cause = "bad_receipt";
      return a;
    }
    a.kind = Attempt::Kind::kDelivered;
    a.duplicate = item.receipt().duplicate();
    return a;
  }
  if (!item.has_problem()) {
    a.cause = "bad_receipt";
    a.message = "batch item holds neither a receipt nor a problem";
    return a;
  }
  a.cause = CauseOfStatus(item.problem().status());
  a.retry_after_ms = retry_after_ms;
  // A refused token is about the node, not the result (as for a whole reply): never terminal.
  if (item.problem().status() == 401 || item.problem().status() == 403) return a;
  ApplyProblem(item.problem(), &a);
  return a;
}

}  // namespace

Attempt AttemptOfFailure(const HttpError& error) {
  switch (error.failure) {
    case HttpFailure::kTimeout:
      return {Attempt::Kind::kRetryRoom, "timeout", "", error.message};
    case HttpFailure::kConnect:
      return {Attempt::Kind::kConnectionFailed, "connect", "", error.message};
    case HttpFailure::kWrite:
      return {Attempt::Kind::kConnectionFailed, "write", "", error.message};
    case HttpFailure::kRead:
      return {Attempt::Kind::kConnectionFailed, "read", "", error.message};
    case HttpFailure::kStale:
      return {Attempt::Kind::kConnectionFailed, "stale", "", error.message};
  }
  return {Attempt::Kind::kConnectionFailed, "unknown", "", error.message};
}

Attempt Classify(const HttpResponse& res, const v1::BattleResult& result) {
  Attempt a;
  if (IsSuccess(res.status)) {
    v1::SettlementReceipt receipt;
    if (!DecodeAnswer(res, &receipt, &a.message) || !ReceiptMatches(receipt, result, &a.message)) {
      a.kind = Attempt::Kind::kRetryRoom;
      a.cause = "bad_receipt";
      return a;
    }
    a.kind = Attempt::Kind::kDelivered;
    a.duplicate = receipt.duplicate();
    return a;
  }
  a.kind = Attempt::Kind::kRetryRoom;
  a.cause = CauseOfStatus(res.status);
  a.message = res.reason;
  a.retry_after_ms = RetryAfterMs(res);
  // About the node, not the result: never terminal for the record.
  if (res.status == 401 || res.status == 403) {
    a.kind = Attempt::Kind::kAuthRejected;
    return a;
  }
  // Only a problem body can make the refusal terminal; a proxy's bare 404 is retried.
  if (auto problem = wire::ParseProblem(res.body, res.content_type)) ApplyProblem(*problem, &a);
  return a;
}

std::vector<Attempt> ClassifyBatch(const HttpResponse& res,
                                   const std::vector<storage::OutboxRecord>& records,
                                   bool ack_whole) {
  if (res.status == 404 || res.status == 405) {
    return {Attempt{Attempt::Kind::kNoBatchEndpoint, CauseOfStatus(res.status), "", res.reason}};
  }
  if (!IsSuccess(res.status)) {
    Attempt a = Classify(res, records.front().result);
    if (a.kind == Attempt::Kind::kAuthRejected) return {a};
    a.kind = Attempt::Kind::kRetryRoom;
    a.code.clear();
    a.expired = false;
    a.request_refused =
        res.status >= 400 && res.status < 500 && res.status != 408 && res.status != 429;
    return std::vector<Attempt>(records.size(), a);
  }
  if (ack_whole) {
    return std::vector<Attempt>(records.size(), Attempt{Attempt::Kind::kDelivered, "", "", ""});
  }
  v1::SettlementBatchReply reply;
  std::string why;
  if (DecodeAnswer(res, &reply, &why) && reply.items_size() != static_cast<int>(records.size())) {
    why = std::to_string(reply.items_size()) + " items for " + std::to_string(records.size()) +
          " results";
  }
  if (!why.empty()) {
    return std::vector<Attempt>(records.size(),
                                Attempt{Attempt::Kind::kRetryRoom, "bad_receipt", "", why});
  }
  std::vector<Attempt> out;
  const int64_t retry_after_ms = RetryAfterMs(res);
  for (size_t i = 0; i < records.size(); ++i) {
    out.push_back(ItemAttempt(reply.items(static_cast<int>(i)), records[i].result, retry_after_ms));
  }
  return out;
}

}  // namespace verdict::delivery
