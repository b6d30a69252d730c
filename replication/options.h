// Options of the replicated tier: where the etcd cluster is and how to reach it (EtcdOptions),
// and how a node copies its stored results there (ReplicationOptions). Plain values, filled
// from flags in main only; a battle host that embeds the node sets them in NodeOptions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "verdict/common/status.h"

namespace verdict::replication {

struct EtcdOptions {
  // The cluster's client endpoints, "HOST:PORT" each, tried in order until one answers. Empty:
  // no etcd (a node does not replicate). Default: empty.
  std::vector<std::string> endpoints;
  // Talk TLS (https) to every endpoint. Implied by ca_file and cert_file. Default: false.
  bool tls = false;
  // PEM file of the certificate authorities that sign the members' certificates. Default: empty,
  // meaning the system's.
  std::string ca_file;
  // PEM client certificate (chain) and its private key, for a cluster started with
  // --client-cert-auth. Default: empty (none).
  std::string cert_file;
  std::string key_file;
  // etcd user and password, for a cluster with authentication on: a token is obtained from
  // /v3/auth/authenticate and obtained again when etcd says it expired. Default: empty (none).
  std::string user;
  std::string password;
  // Limit for each of connect, write and read of one request to one endpoint. Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  // Every key verdict writes starts with this, so clusters can be shared. Default: "verdict/".
  std::string key_prefix = "verdict/";
};

// Parses "etcd://HOST:PORT,HOST:PORT,..." (IPv6 hosts in brackets) into `options->endpoints`.
// INVALID_ARGUMENT for another scheme, an empty list or a malformed endpoint.
Status ParseEtcdUrl(std::string_view url, EtcdOptions* options);

struct ReplicationOptions {
  // The cluster; replication is off while etcd.endpoints is empty.
  EtcdOptions etcd;
  // Most records one transaction writes or deletes: etcd refuses more than --max-txn-ops
  // operations in one transaction (128 by default). Default: 128.
  size_t max_batch = 128;
  // Most value bytes one transaction carries: etcd refuses requests over --max-request-bytes
  // (1.5 MiB by default), and one record may be 1 MiB. A record alone may exceed it.
  // Default: 1 MiB.
  size_t max_batch_bytes = size_t{1} << 20;
  // Create-if-absent transactions in flight at once, each on its own connection: etcd commits
  // the proposals that arrive together in one Raft round, so a second and third transaction
  // ride the fsync of the first instead of waiting for the next. Default: 4.
  size_t max_in_flight = 4;
  // Bytes of stored records kept in memory while they wait for etcd. Beyond it the node keeps
  // only their count, and reads them back from the outbox once etcd takes writes again, so an
  // etcd outage costs no memory beyond this. Default: 64 MiB.
  size_t max_buffered_bytes = size_t{64} << 20;
  // Wait between attempts while etcd is away or refuses writes. Default: 1 s.
  std::chrono::milliseconds retry_interval{1000};
  // Time to live of the node's lease, kept alive every third of it. A node whose lease expired
  // (it stopped, or lost etcd for this long) is rescued by `verdict-node run --rescue`.
  // Default: 10 s.
  std::chrono::seconds lease_ttl{10};
};

// What replication came to for one result (NodeOptions::on_replicated): OK once its copy is in
// etcd (or once the lobby's receipt made it unnecessary), ALREADY_EXISTS if etcd holds a
// different result under its key.
struct ReplicatedResult {
  uint64_t room_id = 0;
  int64_t ended_at_ms = 0;
  Status status;
};

}  // namespace verdict::replication
