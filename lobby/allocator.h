// The lobby process's allocator settings: set once at start, by verdict-lobby serve and by the
// benchmark's in-process lobby (bench/backlog.h), so that the benchmark measures the lobby as it
// runs deployed.
#pragma once

#include <malloc.h>

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
inline void SetLobbyAllocator() {
  mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);
}

}  // namespace verdict::lobby
