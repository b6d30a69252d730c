// Child process of the outbox crash test: enqueues one new result after another and, after
// each Enqueue returns, writes "ROOM SEQUENCE\n" to stdout, the promise being tested. It runs
// until killed.
//   outbox_crash_child DIR FIRST_ROOM [--unsafe-no-wal]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "storage/outbox.h"
#include "tests/support/results.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR FIRST_ROOM [--unsafe-no-wal]\n", argv[0]);
    return 2;
  }
  verdict::storage::OutboxOptions options;
  options.unsafe_disable_wal_for_test = argc > 3 && std::strcmp(argv[3], "--unsafe-no-wal") == 0;
  auto opened = verdict::storage::OpenOutbox(argv[1], options);
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  auto& outbox = *opened.value();
  for (uint64_t room = std::strtoull(argv[2], nullptr, 10);; ++room) {
    const auto result = verdict::testing::MakeResult(room);
    auto out = outbox.Enqueue(std::span(&result, 1));
    if (!out.ok() || !out->front().status.ok()) {
      std::fprintf(
          stderr, "enqueue: %s\n",
          out.ok() ? out->front().status.ToString().c_str() : out.status().ToString().c_str());
      return 1;
    }
    const std::string line =
        std::to_string(room) + " " + std::to_string(out->front().sequence) + "\n";
    if (::write(STDOUT_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return 1;
    }
  }
}
