// LatencyProxy: a TCP proxy on 127.0.0.1 that delays every chunk by half the given round-trip
// time in each direction, so a lobby on this machine behaves like one across a network. Runs
// its own thread; bytes keep their order. Start/Stop from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

namespace verdict::bench {

class LatencyProxy {
 public:
  LatencyProxy(uint16_t upstream_port, std::chrono::microseconds round_trip);
  ~LatencyProxy();
  // Listens on a free port and returns it (0 on failure).
  uint16_t Start();
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::bench
