// EtcdClient: the few etcd v3 calls the replicated tier makes, spoken as JSON to etcd's gateway
// (POST /v3/kv/txn, /v3/kv/range, /v3/lease/grant, /v3/lease/keepalive, /v3/maintenance/alarm,
// /v3/auth/authenticate)
// over the node's own HTTP client (delivery/http_client.h: keep-alive, TLS, client
// certificates). A request that cannot reach an endpoint, or that an endpoint answers with "no
// leader" or a timeout, is tried on the next endpoint, each at most once per call; every call
// the tier makes is idempotent, so a retried write that had been applied is harmless.
// Not thread-safe: one caller at a time (each thread of the tier has its own client).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "replication/options.h"

namespace verdict::replication {

struct KeyValue {
  std::string key;
  std::string value;  // empty when listed with keys_only
  int64_t mod_revision = 0;
};

// What a create-if-absent write found for one key.
enum class CreateOutcome {
  kCreated,   // the key did not exist; it holds the value now
  kPresent,   // the key existed with this very value (written before): nothing changed
  kConflict,  // the key exists with another value: nothing changed
};

// A page of keys in key order, and whether more follow.
struct RangePage {
  std::vector<KeyValue> kvs;
  bool more = false;
};

class EtcdClient {
 public:
  // Loads the TLS material the options name (INVALID_ARGUMENT if it cannot) and checks the
  // endpoints; connects lazily, on the first call.
  static Result<std::unique_ptr<EtcdClient>> Create(const EtcdOptions& options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Writes each value under its key unless the key exists, in one transaction (at most
  // --max-txn-ops keys), and says per key what it found. Errors of every call:
  //   UNAVAILABLE: no endpoint answered, or etcd could not act now (no leader, a timeout, a
  //     refused token); nothing or all of a transaction happened: retry the same call.
  //   RESOURCE_EXHAUSTED: etcd is out of its storage quota (the NOSPACE alarm): it takes no
  //     writes (reads and deletes still work) until an operator frees space and disarms it.
  //   INVALID_ARGUMENT / INTERNAL: etcd refused the request (too many operations, too large) or
  //     answered something that is not etcd's JSON.
  Result<std::vector<CreateOutcome>> CreateIfAbsent(std::span<const KeyValue> kvs);

  // Deletes the keys (absent ones are no error) in one transaction (at most --max-txn-ops).
  Status Delete(std::span<const std::string> keys);

  // Up to `limit` keys in [from, end), in key order, with their values unless `keys_only`.
  Result<RangePage> Range(const std::string& from, const std::string& end, int64_t limit,
                          bool keys_only);

  // Grants a lease of `ttl_s` seconds and returns its id.
  Result<int64_t> GrantLease(int64_t ttl_s);
  // Renews the lease; returns its remaining time to live, 0 if it has expired (or never was).
  Result<int64_t> KeepAlive(int64_t lease_id);
  // Puts a key attached to a lease (0: none).
  Status Put(const std::string& key, const std::string& value, int64_t lease_id);

  // Whether a member of the cluster has the NOSPACE alarm raised (etcd's alarm list).
  Result<bool> NoSpaceAlarmRaised();

 private:
  struct State;
  explicit EtcdClient(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace verdict::replication
