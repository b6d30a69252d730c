// HttpServer: the lobby's Boost.Beast front end. I/O threads accept connections, read and
// write HTTP/1.1 (keep-alive) and WebSocket frames; every request that touches the database
// runs on a separate DB worker pool, never on an I/O thread. This is the only translation unit
// of the lobby that includes Beast. Start/Stop from one thread; the rest is internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "lobby/event_hub.h"
#include "lobby/settlement_service.h"

namespace verdict::lobby {

struct ServerOptions {
  // Address to listen on; port 0 picks a free port (Start returns it).
  // Default: 127.0.0.1:8080.
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  // I/O threads. Default: 2.
  int io_threads = 2;
  // DB worker threads; match the store's pool size. Default: 8.
  int db_threads = 8;
  // Open connections (HTTP and WebSocket) beyond which new ones get 503 and are closed.
  // Default: 1024.
  size_t max_connections = 1024;
  // Requests waiting for a DB worker beyond which new ones get 503 at once. A connection has at
  // most one request waiting, so this binds only when set below max_connections.
  // Default: 4096, above the default max_connections: by default the connection cap bounds the
  // queue.
  size_t max_queued_requests = 4096;
  // Open /v1/events subscriptions beyond which new ones get 503.
  // Default: 64.
  size_t max_subscribers = 64;
  // Bytes of events queued for one subscriber's socket. A subscriber catching up reads the next
  // page from the database only below half of it; a live one that falls further behind is
  // closed (1013, try again later) and resumes with ?after=. The lobby's memory for events is
  // at most max_subscribers × this, plus one page each.
  // Default: 4 MiB.
  size_t subscriber_buffer_bytes = size_t{4} << 20;
  // Events per catch-up page read from the database.
  // Default: 256.
  size_t catch_up_page_events = 256;
  // Time allowed to receive a whole request (headers and body), and the keep-alive idle limit,
  // so a slow or silent client cannot hold a connection forever.
  // Default: 10 s.
  std::chrono::milliseconds read_timeout{10'000};
  // Largest request body; larger ones get 413 and the connection is closed. (The service
  // holds single settlements to 1 MiB; this is the batch endpoint's limit.)
  // Default: 4 MiB.
  size_t max_body_bytes = size_t{4} << 20;
  // Largest request header block. Default: 16 KiB.
  uint32_t max_header_bytes = 16 * 1024;
  // PEM files of the certificate (chain) and private key: when set, the listener speaks TLS
  // only (HTTPS, and WSS for /v1/events). Default: empty, plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
};

class HttpServer {
 public:
  // `service`, `hub` and `registry` must outlive the server.
  HttpServer(ServerOptions options, SettlementService& service, EventHub& hub,
             metrics::Registry& registry);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the threads. Returns the bound port.
  Result<uint16_t> Start();
  // Stops accepting, closes connections and joins all threads. Idempotent.
  void Stop();

  class Impl;  // defined in http_server.cc, together with its sessions

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::lobby
