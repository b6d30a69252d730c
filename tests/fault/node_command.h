// The `verdict-node run` command line both fault suites start their node with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace verdict::testing {

// node-a with token-a over 4 shards of `outbox`, delivering to `lobbies` (comma-separated URLs),
// its metrics on `metrics_port`, every stored result logged to `stored_log`, progress lines
// quiet, and the outbox not preallocated (so that a filled disk fails writes at once).
inline std::vector<std::string> FaultNodeCommand(const std::string& program,
                                                 const std::string& outbox,
                                                 const std::string& lobbies, uint16_t metrics_port,
                                                 const std::string& stored_log) {
  return {program,
          "--log-level",
          "warn",
          "run",
          "--node-id",
          "node-a",
          "--token",
          "token-a",
          "--outbox",
          outbox,
          "--shards",
          "4",
          "--lobby",
          lobbies,
          "--metrics-listen",
          "127.0.0.1:" + std::to_string(metrics_port),
          "--stored-log",
          stored_log,
          "--progress-ms",
          "60000",
          "--outbox-no-preallocate"};
}

}  // namespace verdict::testing
