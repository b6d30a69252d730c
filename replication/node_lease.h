// NodeLease: keeps an etcd lease alive for a node, with the node's liveness key (keys.h)
// attached to it, so that a rescuer can tell a node that stopped renewing (its key is gone once
// the lease's time to live passes) from one that is alive. It renews every third of the time to
// live; a lease that expired anyway (etcd was away longer) is replaced by a new one. It never
// revokes: a node that stops, cleanly or not, is rescued once its lease runs out, and a node
// started again on the same outbox simply redelivers (answered `duplicate`).
// Owned by BattleNode; Start/Stop from one thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "replication/options.h"

namespace verdict::replication {

class EtcdClient;

class NodeLease {
 public:
  NodeLease(std::string node_id, ReplicationOptions options, metrics::Registry* registry);
  ~NodeLease();  // stops
  NodeLease(const NodeLease&) = delete;
  NodeLease& operator=(const NodeLease&) = delete;

  // INVALID_ARGUMENT for options that cannot work; etcd need not be up.
  Status Start();
  void Stop();
  // Whether the node's liveness key was in place at the last renewal.
  bool alive() const { return alive_.load(); }

 private:
  void Run();
  // One step: grant and attach a lease if there is none, renew it otherwise.
  Status Renew();

  const std::string node_id_;
  const ReplicationOptions options_;
  std::unique_ptr<EtcdClient> client_;
  int64_t lease_id_ = 0;  // the worker thread's
  std::atomic<bool> alive_{false};
  Mutex mu_;
  CondVar cv_{&mu_};
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace verdict::replication
