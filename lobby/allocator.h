// The lobby process's allocator settings: set once at start, by verdict-lobby serve and by the
// benchmark's in-process lobby (bench/backlog.h), so that the benchmark measures the lobby as it
// runs deployed; and the FreeMemoryReturner that serve runs, which gives the heap's free memory
// back to the system once settlements go quiet. Thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

#include "common/mutex.h"

namespace verdict::lobby {

// Request bodies (up to 4 MiB) and the buffers of their decoding are freed when answered, but
// glibc raises its mmap threshold to the size of each large block freed, up to 32 MiB, and from
// then on serves such blocks from its arenas, which keep them: bursts of 4 MiB bodies left the
// lobby 100 MiB larger after four bursts, and larger after each (tests/lobby/
// lobby_memory_test.cc). A fixed threshold keeps large blocks in mappings of their own, returned
// to the system when freed: the RSS is back at idle after every burst.
// The threshold is 1 MiB, not glibc's initial 128 KiB, and an arena keeps up to 4 MiB free at its
// top: a settlement's write builds arguments of some hundreds of kilobytes each call, and each
// block in a mapping of its own, or grown anew after a trim, was faulted in page by page (a
// seventh of the lobby's CPU in a drain, bench/RESULTS.md "The write's arguments in binary").
void SetLobbyAllocator();

// Gives the heap's free memory back to the system (malloc_trim) once the settlements have been
// quiet for `quiet`: glibc's arenas (one per thread that allocates at once, up to eight per core)
// keep what a burst freed in their middle, which trimming at their top never returns. Batches of
// 256 rooms of 200 players left the lobby at 379 MiB after ten of them, from 16 MiB idle, and
// larger with each DB worker (bench: verdict-bench lobby-memory). Trimming waits for quiet, so a
// drain does not fault its memory in again after every transaction. Its own thread; thread-safe.
class FreeMemoryReturner {
 public:
  // Default `quiet`: 1 s.
  explicit FreeMemoryReturner(std::chrono::milliseconds quiet = std::chrono::seconds(1));
  // Stops its thread; returns nothing more.
  ~FreeMemoryReturner();
  FreeMemoryReturner(const FreeMemoryReturner&) = delete;
  FreeMemoryReturner& operator=(const FreeMemoryReturner&) = delete;

  // Work that freed memory just ended (the settlement scheduler went idle): the memory goes back
  // once `quiet` has passed without another call.
  void Quiet();

 private:
  void Run();

  const std::chrono::milliseconds quiet_;
  Mutex mu_;
  CondVar changed_{&mu_};
  std::optional<std::chrono::steady_clock::time_point> due_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace verdict::lobby
