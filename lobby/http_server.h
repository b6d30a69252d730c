// HttpServer: the lobby's front end on the shared server core (server/http_server.h), which
// owns the connections, the I/O threads and the limits every listener keeps. Here: routing to
// the settlement service, the DB worker pool (every request that touches the database runs
// there, never on an I/O thread), cancelling requests whose clients hung up, and the
// /v1/events WebSocket sessions. Start/Stop from one thread; the rest is internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "lobby/event_hub.h"
#include "lobby/settlement_service.h"
#include "server/http_server.h"

namespace verdict::lobby {

struct ServerOptions {
  // Address to listen on; port 0 picks a free port (Start returns it).
  // Default: 127.0.0.1:8080.
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  // The connections: I/O threads, the connection cap, the read deadline and idle limit, the
  // header limit and TLS (see server::HttpServerOptions for each default). Its `listen` and
  // `name` are set from the above. Default: the core's, with 2 I/O threads.
  server::HttpServerOptions http = [] {
    server::HttpServerOptions o;
    o.io_threads = 2;
    return o;
  }();
  // DB worker threads; match the store's pool size (verdict-lobby serve gives its workers()).
  // Default: 8, StoreOptions's pool size.
  int db_threads = 8;
  // Requests waiting for a DB worker beyond which new ones get 503 at once. A connection has at
  // most one request waiting, so this binds only when set below http.max_connections.
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
