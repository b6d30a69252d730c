// Rescue: delivers the replicated results of a node that is gone (its host and disk lost) to the
// lobby under that node's identity, and deletes each copy from etcd once the lobby's receipt for
// it came. The copies are first enqueued into a scratch outbox on the rescuer's disk, which the
// ordinary Deliverer drains (batches, per-room order, backoff, dead letter), so a rescue
// delivers exactly as the node would have; the scratch outbox is removed at the end, and a copy
// leaves etcd only with its receipt. A result the lobby refuses as terminal keeps its copy in
// etcd (and is reported) for an operator. Two deliveries of one result (the rescuer and a node
// that came back, or two rescuers) are harmless: the lobby answers the second `duplicate`.
//
// RescueWatcher is `verdict-node run --rescue`: it looks for nodes that have copies in etcd and
// no live lease, and rescues each one it holds a token for.
// RescueNode blocks; RescueWatcher's Start/Stop from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "delivery/deliverer.h"
#include "replication/options.h"

namespace verdict::replication {

struct RescueOptions {
  // The cluster holding the copies.
  EtcdOptions etcd;
  // How to reach the lobby: lobby_urls, tls_ca_file and tuning; the token is the rescued node's,
  // given per call.
  delivery::DelivererOptions delivery;
  // Where the scratch outboxes go (one per rescued node, removed after). Required.
  std::string work_dir;
  // How long one rescue may take; copies still undelivered then stay in etcd for the next.
  // Default: 5 min.
  std::chrono::milliseconds deadline{300'000};
};

struct RescueReport {
  uint64_t found = 0;        // copies of the node's results in etcd
  uint64_t delivered = 0;    // settled at the lobby (or answered duplicate); copy deleted
  uint64_t refused = 0;      // refused by the lobby as terminal; copy kept in etcd
  uint64_t left = 0;         // not delivered by the deadline; copy kept in etcd
  uint64_t undecodable = 0;  // keys under the node that do not hold a result; left alone
};

// Rescues `node_id` with `token` (a token the lobby accepts for that node). Returns early (with
// what was done so far) once `cancel` is set. UNAVAILABLE if etcd cannot be listed or the scratch
// outbox cannot be made; delivery failures are retried until the deadline and then reported as
// `left`, not as an error.
Result<RescueReport> RescueNode(const std::string& node_id, const std::string& token,
                                const RescueOptions& options,
                                const std::atomic<bool>* cancel = nullptr);

struct RescueWatcherOptions {
  RescueOptions rescue;
  // The watching node, never rescued by itself.
  std::string self_node_id;
  // node id → a token the lobby accepts for it (its rescue token).
  std::map<std::string, std::string> tokens;
  // How often etcd is looked at. Default: 5 s.
  std::chrono::milliseconds interval{5000};
  // Wait before rescuing again a node whose last rescue left copies behind. Default: 60 s.
  std::chrono::milliseconds retry_after{60'000};
};

class RescueWatcher {
 public:
  // `registry` may be null.
  RescueWatcher(RescueWatcherOptions options, metrics::Registry* registry);
  ~RescueWatcher();  // stops
  RescueWatcher(const RescueWatcher&) = delete;
  RescueWatcher& operator=(const RescueWatcher&) = delete;

  Status Start();
  void Stop();

 private:
  void Run();
  // One look at etcd, and the rescues it calls for.
  Status Look();

  const RescueWatcherOptions options_;
  metrics::Registry fallback_registry_;
  metrics::Counter& rescued_;
  metrics::Counter& rescues_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_attempt_;
  std::set<std::string> warned_no_token_;
  std::atomic<bool> cancel_{false};
  Mutex mu_;  // for cv_: Stop sets cancel_ under it (atomic, as RescueNode reads it too)
  CondVar cv_{&mu_};
  std::thread thread_;
};

}  // namespace verdict::replication
