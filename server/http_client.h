// BlockingHttpClient: a small synchronous HTTP/1.1 client for the server core's listeners, TCP
// ("HOST:PORT") or Unix socket ("unix:PATH"): what `verdict-node enqueue --to`, the benchmark
// and the tests use to post to a running node. It keeps its connection alive between calls and
// opens a new one after a failure. Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <memory>

#include "common/status.h"
#include "server/http_server.h"
#include "server/http_types.h"

namespace verdict::server {

class BlockingHttpClient {
 public:
  // `timeout` bounds each call, connecting included. Default: 30 s.
  explicit BlockingHttpClient(ListenAddress to,
                              std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~BlockingHttpClient();
  BlockingHttpClient(const BlockingHttpClient&) = delete;
  BlockingHttpClient& operator=(const BlockingHttpClient&) = delete;

  // Sends `request` (its content type, accept and authorization become headers) and returns the
  // answer, whatever its status; reply.headers hold every header with its name in lower case.
  // UNAVAILABLE if it could not connect, send or read within the timeout (the request may or may
  // not have been acted on); the connection is then closed.
  Result<HttpReply> Call(const HttpRequest& request);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::server
