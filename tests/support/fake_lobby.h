// FakeLobby: an in-process HTTP server on 127.0.0.1:0 that plays the lobby for delivery tests.
// A test scripts its answers with a handler; the fake records every request, counts requests
// in flight, and by default answers 200 with a SettlementReceipt. One thread per connection,
// so a handler may hold a request (delay) without blocking others. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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
};

struct FakeReply {
  int status = 200;
  std::string content_type = "application/x-protobuf";
  std::string body;  // for a 2xx with an empty body the fake writes a SettlementReceipt
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds delay{0};  // hold the request this long before answering
  bool close_after_reply = false;      // drop the connection after answering, unannounced
};

// A terminal (retryable: false) or retryable problem reply, as the lobby writes them.
FakeReply ProblemReply(int status, const std::string& code, bool retryable);

// A lobby URL where nothing listens (a port that was just free).
std::string UnreachableUrl();

class FakeLobby {
 public:
  using Handler = std::function<FakeReply(const FakeRequest&)>;

  FakeLobby();
  ~FakeLobby();
  FakeLobby(const FakeLobby&) = delete;
  FakeLobby& operator=(const FakeLobby&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void SetHandler(Handler handler);

  // Every request so far, in arrival order.
  std::vector<FakeRequest> requests() const;
  // Results answered with 2xx, in the order they were answered.
  std::vector<v1::BattleResult> accepted() const;
  int max_in_flight() const { return max_in_flight_.load(); }
  // Waits (bounded) until at least `n` requests have arrived / `n` results were accepted.
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;
  bool WaitForAccepted(size_t n, std::chrono::milliseconds timeout) const;

 private:
  void AcceptLoop();
  void Serve(int fd);

  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  Handler handler_;
  std::vector<FakeRequest> requests_;
  std::vector<v1::BattleResult> accepted_;
  std::vector<int> connection_fds_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
};

}  // namespace verdict::testing
