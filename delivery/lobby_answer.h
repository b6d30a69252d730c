// What the lobby's answer to a delivery means for the records it was about (docs/design.md §3): ack
// on the lobby's receipt, ack on ORIGINAL_EXPIRED (the room settled long ago and its receipt is
// past retention: the result was delivered), dead-letter on a problem that says `retryable:
// false`, pause every shard on a refused token, fall back to single requests where the batch path
// is missing, and retry anything else. Pure functions of the answer, used by the deliverer's shard
// loops. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "delivery/http_client.h"
#include "storage/outbox.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::delivery {

// What one attempt came to, for one record or for a whole request.
struct Attempt {
  enum class Kind {
    kDelivered,         // 2xx with the record's receipt, or ORIGINAL_EXPIRED: ack
    kTerminal,          // problem with retryable: false: dead-letter
    kRetryRoom,         // anything else the lobby (or a timeout) said: back the room off
    kConnectionFailed,  // could not talk to the lobby at all: back the shard off
    kAuthRejected,      // 401/403: the node's token is refused; pause every shard
    kStopped,           // the deliverer is stopping
    kNoBatchEndpoint,   // 404/405 on the batch path: the lobby predates it; send singly
  };
  Kind kind = Kind::kRetryRoom;
  std::string cause;  // short label for metrics and logs: "http_503", "timeout", "connect", …
  std::string code;   // the lobby's error code (terminal)
  std::string message;
  int64_t retry_after_ms = 0;
  bool duplicate = false;
  bool expired = false;  // delivered long ago: the lobby answered ORIGINAL_EXPIRED
  // The lobby refused a batch request as a whole with a 4xx (400, 413, 415…, not a refused
  // token, a missing path, 408 or 429): about what this node sends, not about a result. Every
  // record is kept and retried; the node reports itself unhealthy until a request gets through.
  bool request_refused = false;
};

// A request that got no answer: a timeout after the request was sent retries the room (the
// lobby may be slow on this one); every other failure means the lobby could not be reached.
Attempt AttemptOfFailure(const HttpError& error);

// The lobby's answer to the delivery of `result` alone (POST /v1/settlements): its receipt, a
// terminal problem, a refused token, or something to retry (with the lobby's Retry-After).
Attempt Classify(const HttpResponse& res, const v1::BattleResult& result);

// The lobby's answer to a batch of `records` (POST /v1/settlements:batch): one Attempt per
// record, in order, or one Attempt about the whole request (a refused token, no batch
// endpoint). A 200 whose items do not decode or do not match the records in number acks
// nothing (bad_receipt); a receipt acks only the record of its room and outcome. Whole-request
// refusals (400, 413, 415, 503, a proxy's 502) are about the request, not one result: every
// record is retried, none is dead-lettered; a 4xx among them is marked request_refused. `ack_whole`
// is the test-only negative control that skips reading the items.
std::vector<Attempt> ClassifyBatch(const HttpResponse& res,
                                   const std::vector<storage::OutboxRecord>& records,
                                   bool ack_whole);

}  // namespace verdict::delivery
