// Child process of the delivery kill test: delivers an outbox to a lobby and exits 0 once the
// outbox is empty. The test SIGKILLs it at random moments and starts it again.
//   deliver_child OUTBOX_DIR LOBBY_URL TOKEN [--unsafe-ack-before-send]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "delivery/deliverer.h"
#include "storage/outbox.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s OUTBOX_DIR LOBBY_URL TOKEN [--unsafe-ack-before-send]\n",
                 argv[0]);
    return 2;
  }
  auto outbox = verdict::storage::OpenOutbox(argv[1], {});
  if (!outbox.ok()) {
    std::fprintf(stderr, "open: %s\n", outbox.status().ToString().c_str());
    return 1;
  }
  verdict::delivery::DelivererOptions options;
  options.lobby_urls = {argv[2]};
  options.token = argv[3];
  options.initial_backoff = std::chrono::milliseconds(100);
  options.unsafe_ack_before_send_for_test =
      argc > 4 && std::strcmp(argv[4], "--unsafe-ack-before-send") == 0;
  verdict::delivery::Deliverer deliverer(**outbox, options, nullptr);
  if (auto s = deliverer.Start(); !s.ok()) {
    std::fprintf(stderr, "start: %s\n", s.ToString().c_str());
    return 1;
  }
  for (;;) {
    auto stats = (*outbox)->Stats();
    if (stats.ok() && stats->records == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  deliverer.Stop();
  return 0;
}
