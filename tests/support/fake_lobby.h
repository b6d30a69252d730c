// FakeLobby: an in-process HTTP server on 127.0.0.1:0 that plays the lobby for delivery tests.
// A test scripts its answers with a handler; the fake records every request, counts requests
// in flight, and by default answers 200 with a SettlementReceipt. It serves the batch path too:
// each result of a batch is recorded and answered by the same handler, as one item of the
// reply, unless a batch handler scripts the whole answer. One thread per connection, so a
// handler may hold a request (delay) without blocking others. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "verdict/v1/verdict.pb.h"

namespace verdict::testing {

struct FakeRequest {
  v1::BattleResult result;  // decoded body (default if undecodable)
  bool decoded = false;
  std::string authorization;
  int attempt = 0;  // 1 for the first request with this (room_id, ended_at_ms), 2 for the next…
  // 0 for POST /v1/settlements; for POST /v1/settlements:batch, the number of that batch
  // request (1, 2, …), one FakeRequest per result in it.
  int batch = 0;
};

struct FakeReply {
  int status = 200;
  std::string content_type = "application/x-protobuf";
  std::string body;  // for a 2xx with an empty body the fake writes a SettlementReceipt
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds delay{0};  // hold the request this long before answering
  bool close_after_reply = false;      // drop the connection after answering, unannounced
  // Set by ProblemReply: what a batch item carries for it.
  std::string code;
  bool retryable = false;
};

// A terminal (retryable: false) or retryable problem reply, as the lobby writes them.
FakeReply ProblemReply(int status, const std::string& code, bool retryable);

// A lobby URL where nothing listens (a port that was just free).
std::string UnreachableUrl();

class FakeLobby {
 public:
  using Handler = std::function<FakeReply(const FakeRequest&)>;
  // Answers a whole batch request (its results, in order) verbatim, or nullopt to answer it
  // item by item with the handler: a 2xx is a receipt item (the fake's own, or the reply's body
  // parsed as a receipt), a problem is a problem item, and 401, 403 or any other non-2xx
  // answers the whole request.
  using BatchHandler = std::function<std::optional<FakeReply>(const std::vector<FakeRequest>&)>;

  FakeLobby();
  ~FakeLobby();
  FakeLobby(const FakeLobby&) = delete;
  FakeLobby& operator=(const FakeLobby&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void SetHandler(Handler handler);
  void SetBatchHandler(BatchHandler handler);

  // Every request so far, in arrival order.
  std::vector<FakeRequest> requests() const;
  // Results answered with 2xx, in the order they were answered.
  std::vector<v1::BattleResult> accepted() const;
  int max_in_flight() const { return max_in_flight_.load(); }
  // Connections accepted so far.
  int connections() const { return connections_.load(); }
  // Waits (bounded) until at least `n` requests have arrived / `n` results were accepted.
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;
  bool WaitForAccepted(size_t n, std::chrono::milliseconds timeout) const;

 private:
  void AcceptLoop();
  void Serve(int fd);
  // Records the results of one request (one, or a batch's) and picks the handlers for them.
  std::vector<FakeRequest> Record(const std::string& target, const std::string& body,
                                  const std::string& authorization, Handler* handler,
                                  BatchHandler* batch_handler);
  FakeReply AnswerBatch(const std::vector<FakeRequest>& requests, const Handler& handler,
                        const BatchHandler& batch_handler, std::vector<bool>* accepted);

  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  Handler handler_;
  BatchHandler batch_handler_;
  int batches_ = 0;
  std::vector<FakeRequest> requests_;
  std::vector<v1::BattleResult> accepted_;
  std::vector<int> connection_fds_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::atomic<int> connections_{0};
};

}  // namespace verdict::testing
