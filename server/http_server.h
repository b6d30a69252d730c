// HttpServer: the one HTTP/1.1 server core of verdict, used by the lobby and by the node (its
// metrics and ingest listeners). It owns listeners (TCP, optionally TLS, and Unix sockets), the
// I/O threads and one session per connection; what a request means is the HttpHandler's.
// It enforces what must hold before a handler sees anything: a connection cap per listener (so a
// flood on one cannot starve another), a budget for the request bodies held at once, a header
// size limit, one Host header (none only on HTTP/1.0), a deadline on every read (so idle
// keep-alive connections close), the handler's verdict
// on the header alone (a bad token is refused before a byte of the body is read), a body limit
// checked against Content-Length before reading, `Expect: 100-continue`, a pause after a failed
// accept (out of descriptors) instead of a spin, and a watch for clients that hang up while
// their answer is pending. A handler may also take a request over as a WebSocket. Start/Stop
// from one thread; handlers run on the I/O threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "server/http_types.h"

namespace verdict::server {

// Where a listener listens: "HOST:PORT" (IPv6 as "[::1]:8080"; port 0 picks one) or
// "unix:PATH".
struct ListenAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;   // kTcp
  uint16_t port = 0;  // kTcp
  std::string path;   // kUnix

  // INVALID_ARGUMENT naming `text` if it is neither form (or the Unix path is empty or too long
  // for a socket address).
  static Result<ListenAddress> Parse(const std::string& text);
  // The form Parse reads.
  std::string ToString() const;
};

// The part of a request the server has read before it decides whether to read the body.
struct RequestHead {
  std::string method;
  std::string target;  // path and query
  std::string path;    // target without the query
  std::string content_type;
  std::string authorization;
  bool local = false;    // arrived on a Unix socket (its file mode is the access control)
  bool upgrade = false;  // asks to become a WebSocket
  size_t listener = 0;   // index of its listener in HttpServerOptions::listen
};

// What to do with a request once its header is read.
struct HeaderVerdict {
  // Answer this without reading the body (401, 404, 405, 413…); the connection then closes if
  // a body was announced, so that it is never read.
  std::optional<HttpReply> reply;
  // Otherwise the body is read, up to this many bytes; a larger one is answered 413
  // (PAYLOAD_TOO_LARGE) from its Content-Length, before it is read, or as soon as it passes the
  // limit.
  size_t max_body_bytes = 0;
};

// A WebSocket connection a handler accepted (Exchange::AcceptWebSocket). Write and Close are
// called on its strand: from a WebSocketSession callback, a Write's `done`, or inside Post.
class WebSocket {
 public:
  virtual ~WebSocket() = default;
  // Runs `fn` on the connection's strand. Any thread.
  virtual void Post(std::function<void()> fn) = 0;
  // Sends `text` as one text message and runs `done(ok)` on the strand once it is written (ok is
  // false when the peer is gone). One write at a time; `text` must stay valid until `done`.
  virtual void Write(const std::string& text, std::function<void(bool ok)> done) = 0;
  // Sends a close frame; never while a write is in progress.
  virtual void Close(uint16_t code, const std::string& reason) = 0;
};

// The handler's side of an accepted WebSocket; both run on the connection's strand. Messages
// from the peer are read and discarded (the server keeps the session alive while it reads).
class WebSocketSession {
 public:
  virtual ~WebSocketSession() = default;
  // The upgrade is complete: the session may write.
  virtual void OnOpen() = 0;
  // The peer closed, sent a message over the limit, or the connection failed: write no more.
  virtual void OnGone() = 0;
};

// One request being answered. Reply may be called from any thread, once; later calls are
// ignored. Holding an Exchange keeps its connection's session alive.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void Reply(HttpReply reply) = 0;
  // If Reply has not been called within `wait`, `fallback` is sent instead (and a later Reply is
  // dropped). Call it before returning from OnRequest.
  virtual void ReplyUnlessAnsweredWithin(std::chrono::milliseconds wait, HttpReply fallback) = 0;
  // `on_hang_up` runs once, on an I/O thread (it must not block), if the client closes its
  // connection while the answer is pending. Call it before returning from OnRequest.
  virtual void OnHangUp(std::function<void()> on_hang_up) = 0;
  // Answers an upgrade request (RequestHead::upgrade) by accepting it as a WebSocket, instead
  // of Reply: once accepted, `make` is called on the connection's strand with the connection
  // and returns the session that takes it over (and holds it). A message from the peer over
  // `max_message_bytes` ends the connection. Any thread, once, like Reply.
  using SessionMaker = std::function<std::shared_ptr<WebSocketSession>(std::shared_ptr<WebSocket>)>;
  virtual void AcceptWebSocket(size_t max_message_bytes, SessionMaker make) = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // The header alone, on an I/O thread: must not block.
  virtual HeaderVerdict OnHeader(const RequestHead& head) = 0;
  // The whole request, on an I/O thread: must not block. Answer through `exchange`, now or
  // later from another thread.
  virtual void OnRequest(const RequestHead& head, HttpRequest request,
                         std::shared_ptr<Exchange> exchange) = 0;
};

// Descriptors the connection caps leave to the rest of the process, beyond those it had open at
// Start: its database's files, outgoing connections, logs, and a host's own sockets and files.
inline constexpr uint64_t kReservedDescriptors = 256;

struct HttpServerOptions {
  // Where to listen; at least one. Default: none.
  std::vector<ListenAddress> listen;
  // I/O threads. Default: 1.
  int io_threads = 1;
  // Open connections on one listener beyond which new ones on it get 503 and are closed. Each
  // listener has its own, so that connections nobody has authenticated yet (a metrics port, a
  // TCP port whose token is read with the header) cannot crowd out a Unix socket's. Start
  // lowers each cap (with a warning) so that all the listeners' connections fit in the soft
  // limit on open descriptors together, beside those open at Start and kReservedDescriptors
  // more that are left to the process (its files, outgoing connections, a host's own sockets):
  // a process that wants more connections raises the limit first. Default: 1024.
  size_t max_connections = 1024;
  // Bytes of request bodies held at once, over every connection: each request reserves its
  // Content-Length (or its body limit when it has none) from the header, before its body is read,
  // until it is answered. A request that does not fit is answered 503 with Retry-After, unread.
  // So memory is bounded by this, not by connections x body limit. Default: 0, no budget.
  uint64_t max_body_bytes_in_flight = 0;
  // Time allowed to receive a whole request (headers and body), and the keep-alive idle limit,
  // so a slow or silent client cannot hold a connection forever. Default: 10 s.
  std::chrono::milliseconds read_timeout{10'000};
  // Largest request header block. Default: 16 KiB.
  uint32_t max_header_bytes = 16 * 1024;
  // PEM files of the certificate (chain) and private key: when set, the TCP listeners speak TLS
  // only. Default: empty, plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // The Server header of every reply, and the prefix of the server's metrics
  // (PREFIX_http_requests_total by status, PREFIX_open_connections,
  // PREFIX_http_body_bytes_in_flight). Default: "verdict".
  std::string name = "verdict";
  // Test-only negative control: after a failed accept, stop accepting (the node's old metrics
  // server did). Default: false. Never set it outside tests.
  bool unsafe_stop_accepting_on_failure_for_test = false;
};

class HttpServer {
 public:
  // `handler` and `registry` must outlive the server; `registry` may be null.
  HttpServer(HttpServerOptions options, HttpHandler& handler, metrics::Registry* registry);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds every listener and starts the I/O threads. A Unix socket left by a process that died
  // is replaced; one that another process still answers on is refused (UNAVAILABLE), as is a
  // path that exists and is not a socket. Sockets are created with mode 0660. Returns the bound
  // TCP ports, in the order of options.listen (0 for a Unix socket).
  Result<std::vector<uint16_t>> Start();
  // Stops accepting, closes connections, joins the I/O threads and removes the Unix sockets it
  // created. Idempotent.
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::server
