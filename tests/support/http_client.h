// Blocking HTTP and WebSocket clients for tests, talking to a server on 127.0.0.1. Each call
// opens its own connection. Not thread-safe per object; create one per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace verdict::testing {

struct HttpResponse {
  int status = 0;  // 0: no response (connection failed or closed)
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error;                           // transport error, if status is 0
};

// One request on a fresh connection. `headers` may include Content-Type, Authorization, ….
HttpResponse HttpCall(uint16_t port, const std::string& method, const std::string& target,
                      const std::map<std::string, std::string>& headers = {},
                      const std::string& body = "",
                      std::chrono::milliseconds timeout = std::chrono::seconds(20));

// The value of `series` (the text before the value, labels included) in a /metrics text, or
// `absent` when no line has it.
double MetricValue(const std::string& metrics, const std::string& series, double absent = 0);

// A WebSocket text-message reader.
class WsClient {
 public:
  WsClient();
  ~WsClient();
  // Connects and upgrades; returns false (with the reason in error()) on failure.
  bool Connect(uint16_t port, const std::string& target, const std::string& bearer_token);
  // The next text message, or nullopt if none arrives within `timeout` or the peer closed.
  std::optional<std::string> Read(std::chrono::milliseconds timeout);
  const std::string& error() const { return error_; }
  // After Read returned nullopt because the peer closed: its close code (0 if it closed without
  // a close frame) and reason.
  int close_code() const { return close_code_; }
  const std::string& close_reason() const { return close_reason_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string error_;
  int close_code_ = 0;
  std::string close_reason_;
};

}  // namespace verdict::testing
