// The node's HTTP client for talking to a lobby: POST over one keep-alive HTTP/1.1 connection,
// plain or TLS. HttpConnection is the asynchronous form, awaited by the deliverer's shard loops
// (one connection each); BlockingHttpClient runs the same code to completion on a private
// io_context for callers without one (the simulator's room allocations, the benchmark's serial
// baseline). Only http_client.cc sees Boost.Beast. Neither class is thread-safe: one caller at a
// time, an HttpConnection only from its executor.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <variant>

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/host_port.h"
#include "common/status.h"

namespace verdict::delivery {

// Every request is a POST.
struct HttpRequest {
  std::string target;        // e.g. "/v1/settlements"
  std::string bearer_token;  // sent as "Authorization: Bearer …"; empty: no Authorization
  // Sent as the Authorization header as it is, when bearer_token is empty (etcd's gateway
  // wants its token bare). Empty: none.
  std::string authorization;
  std::string content_type;
  std::string accept;  // empty: no Accept header
  std::string body;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  std::string content_type;
  std::string retry_after;  // the Retry-After header as sent; empty if absent
  std::string body;
};

// Where a request that got no answer failed.
enum class HttpFailure {
  kConnect,  // resolving, connecting or the TLS handshake failed or timed out
  kWrite,    // sending the request failed or timed out
  kRead,     // the connection broke before the answer was read
  kTimeout,  // the request was sent but no answer came within the timeout
  kStale,    // a reused connection broke, and so did a fresh one
};

struct HttpError {
  HttpFailure failure = HttpFailure::kConnect;
  std::string message;  // the transport's words, for logs
};

// The answer, or why there is none.
using HttpOutcome = std::variant<HttpResponse, HttpError>;

// The certificate authorities an https connection trusts; the certificate must also name the
// host the connection asked for. Shared by connections on any thread.
class TlsTrust;

// Loads a PEM file of certificate authorities, or the system's when `ca_file` is empty, and,
// when `cert_file` is given, the client certificate (chain) and its key (`key_file`) that every
// connection presents. INVALID_ARGUMENT if they cannot be loaded.
Result<std::shared_ptr<TlsTrust>> LoadTlsTrust(const std::string& ca_file,
                                               const std::string& cert_file = "",
                                               const std::string& key_file = "");

struct HttpConnectionOptions {
  // Limit for each of connect (with the TLS handshake), write and read. Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  // Needed to reach an https URL; without it such a request fails to connect. Default: none.
  std::shared_ptr<TlsTrust> tls;
  // The User-Agent header. Default: "verdict".
  std::string user_agent = "verdict";
  // A failpoint (common/failpoint.h) checked before each write of a request, so that a test
  // can crash the process with a request begun and not sent. Default: empty (none).
  std::string failpoint_before_write;
};

class HttpConnection {
 public:
  // Operations and their completions run on `executor` (a strand for a multi-threaded pool).
  HttpConnection(boost::asio::any_io_executor executor, HttpConnectionOptions options);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Posts `request` to `url` and reads the answer, reusing the open connection when it goes to
  // `url` and connecting otherwise. A reused connection that turns out to be closed (the server
  // dropped an idle keep-alive connection) costs a retry on a fresh one, not a failure; a
  // timeout is never retried. The connection is closed after a failure, and after an answer
  // that does not keep it alive. Any status is an answer: reading it is the caller's part.
  boost::asio::awaitable<HttpOutcome> Post(HttpUrl url, HttpRequest request);

  // Closes the connection at once. A Post in progress ends with the failure of the operation
  // it was in, without retrying; the next Post connects again.
  void Close();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class BlockingHttpClient {
 public:
  explicit BlockingHttpClient(HttpConnectionOptions options = {});
  ~BlockingHttpClient();
  BlockingHttpClient(const BlockingHttpClient&) = delete;
  BlockingHttpClient& operator=(const BlockingHttpClient&) = delete;

  // HttpConnection::Post, waited for: one keep-alive connection across calls.
  HttpOutcome Post(const HttpUrl& url, HttpRequest request);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace verdict::delivery
