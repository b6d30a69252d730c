#include "replication/node_lease.h"

#include "common/log.h"
#include "replication/etcd_client.h"
#include "replication/keys.h"

namespace verdict::replication {

NodeLease::NodeLease(std::string node_id, ReplicationOptions options, metrics::Registry* registry)
    : node_id_(std::move(node_id)), options_(std::move(options)) {
  if (registry) {
    registry->AddGauge("verdict_node_replication_lease_alive",
                       "1 while this node's etcd lease is kept alive (0: a rescuer may deliver "
                       "this node's replicated results).",
                       [this] { return alive_.load() ? 1.0 : 0.0; });
  }
}

NodeLease::~NodeLease() { Stop(); }

Status NodeLease::Start() {
  if (options_.lease_ttl.count() < 2) {
    return InvalidArgumentError("the node's lease needs a time to live of at least 2 s");
  }
  auto client = EtcdClient::Create(options_.etcd);
  if (!client.ok()) return client.status();
  client_ = std::move(client).value();
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void NodeLease::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status NodeLease::Renew() {
  if (lease_id_ != 0) {
    auto ttl = client_->KeepAlive(lease_id_);
    if (!ttl.ok()) return ttl.status();
    if (*ttl > 0) return Status::Ok();
    Log().warn(
        "this node's etcd lease expired (etcd was out of reach for longer than {} s); "
        "taking a new one",
        options_.lease_ttl.count());
    lease_id_ = 0;
  }
  auto id = client_->GrantLease(options_.lease_ttl.count());
  if (!id.ok()) return id.status();
  VERDICT_RETURN_IF_ERROR(
      client_->Put(NodeLivenessKey(options_.etcd.key_prefix, node_id_), node_id_, *id));
  lease_id_ = *id;
  Log().info("node {} holds etcd lease {:x} ({} s)", node_id_, lease_id_,
             options_.lease_ttl.count());
  return Status::Ok();
}

void NodeLease::Run() {
  const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_ttl) / 3;
  MutexLock lock(&mu_);
  bool logged = false;
  while (!stopping_) {
    lock.Unlock();
    Status s = Renew();
    lock.Lock();
    alive_ = s.ok();
    if (!s.ok() && !logged) Log().warn("cannot keep this node's etcd lease: {}", s.ToString());
    logged = !s.ok();
    const auto deadline =
        std::chrono::steady_clock::now() + (s.ok() ? period : options_.retry_interval);
    while (!stopping_) {
      if (cv_.WaitUntil(deadline)) break;
    }
  }
}

}  // namespace verdict::replication
