// FeedReader: a subscriber of the lobby's settlement feed (GET /v1/events, a WebSocket), as a game
// service follows it, for the benchmarks that read the feed (`events` catching up a history,
// `latency` timing each settlement to its event). Blocking. Not thread-safe: one reader thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace verdict::bench {

class FeedReader {
 public:
  // Subscribes to the feed of the lobby at 127.0.0.1:`port` with the bearer `token`, from the
  // event after `after` (0: the feed's beginning). With `quick_ack`, each segment the lobby sends
  // is acknowledged at once (TCP_QUICKACK), not after the kernel's delayed-ACK wait: a sender that
  // holds small writes until its last one is acknowledged (Nagle's algorithm) then stalls no
  // longer. UNAVAILABLE if the connection or the upgrade fails (a cursor the lobby refuses among
  // them).
  static Result<std::unique_ptr<FeedReader>> Open(uint16_t port, const std::string& token,
                                                  uint64_t after, bool quick_ack = false);
  ~FeedReader();  // closes the subscription
  FeedReader(const FeedReader&) = delete;
  FeedReader& operator=(const FeedReader&) = delete;

  // The next message, as the lobby sent it ({"event_id":"N",…,"event":{…}}). UNAVAILABLE if none
  // comes within `stall` (a feed that stops short, a stuck lobby: a reason, not a hang), or the
  // subscription ends or fails.
  Result<std::string> Next(std::chrono::milliseconds stall);

  struct Impl;

 private:
  explicit FeedReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The number in `member` of an event's message, as the lobby prints it ("room_id": "N",
// "settled_at_ms": "N"); 0 if the message has no such member. The first such member counts (an
// event's players have no room_id or settled_at_ms of their own).
uint64_t EventNumber(const std::string& message, std::string_view member);

}  // namespace verdict::bench
