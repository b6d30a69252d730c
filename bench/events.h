// The events benchmark (see events.cc): a subscriber catching up a deep settlement history, and
// what that costs the lobby's memory.
#pragma once

#include <cstdint>
#include <string>

#include "bench/report.h"

namespace verdict::bench {

struct EventsOptions {
  uint64_t events = 1'000'000;  // settlement events in the history
  size_t payload = 1000;        // bytes of padding per event (a ten-player event is ~1.1 KB)
  size_t buffer_bytes = 0;      // the lobby's --subscriber-buffer-bytes; 0: its default
  std::string db;               // libpq conninfo; empty: the PG* environment
  std::string lobby_binary;     // verdict-lobby to run; empty: the one built with this bench
  OutputOptions output;
};

int RunEvents(const EventsOptions& options);

}  // namespace verdict::bench
