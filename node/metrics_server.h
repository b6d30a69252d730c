// MetricsServer: the node's small HTTP endpoint — GET /metrics (Prometheus text from a
// Registry) and GET /healthz (from a health callback). One I/O thread, one request per
// connection. Start/Stop from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/status.h"

namespace verdict::node {

class MetricsServer {
 public:
  // `health` returns OK when healthy; otherwise /healthz answers 503 with the message.
  MetricsServer(metrics::Registry& registry, std::function<Status()> health);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on "HOST:PORT" (port 0 picks one); returns the bound port.
  Result<uint16_t> Start(const std::string& listen);
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::node
