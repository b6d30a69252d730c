// The lobby's store on PostgreSQL (lobby/settlement_store.h's roles): allocation and settlement
// run as the functions of sql/functions/ on a pool of connections (lobby/pg/pool.h, one per DB
// worker), every call through pg::Run (lobby/pg/run.h), so that a database not migrated yet
// answers UNAVAILABLE from every role alike. What each failure means is pg/errors.h's table. Every
// statement runs under a lock timeout and a statement timeout on a connection with TCP keepalives
// (lobby/pg/connection.h), so no call can hold its worker indefinitely. Every failed call answers
// with a message fit for any client: what failed, and a SQLSTATE where there is one; libpq's own
// text, which names the database's host, port or socket path, goes to the log only. Thread-safe.
#pragma once

#include <chrono>
#include <memory>

#include "common/status.h"
#include "lobby/pg/connection.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

struct StoreOptions {
  // The database, and the connection defaults and session settings of every connection
  // (lobby/pg/connection.h).
  pg::ConnectionOptions connection;
  // Connections in the pool, one per DB worker: the number of DB workers (workers()).
  // Default: 8.
  int pool_size = 8;
  // How long a call waits for a free connection before answering UNAVAILABLE.
  // Default: 2 s.
  std::chrono::milliseconds acquire_timeout{2000};
  // Test-only negative control, set by verdict-lobby-testing only: release the players'
  // in_battle in a transaction of its own before settling (P5 off).
  // Default: false.
  bool unsafe_release_before_commit_for_test = false;
};

// Every role but the feed's, on one pool: what `verdict-lobby serve` settles and answers with,
// and `reconcile` repairs with.
class PgStore : public BatchSettler,
                public RoomStore,
                public ReceiptStore,
                public LadderStore,
                public InactivityStore,
                public ReconcileStore,
                public GovernanceStore {
 public:
  // Opens the pool and prepares the statements of these roles on each connection.
  static Result<std::unique_ptr<PgStore>> Open(const StoreOptions& options);
};

// The feed's role alone, on a pool of its own that prepares only the feed's statements: the event
// hub's, so that subscribers never take the settlements' connections.
class PgFeedStore : public FeedStore {
 public:
  static Result<std::unique_ptr<PgFeedStore>> Open(const StoreOptions& options);
};

// Whether settlements can commit now, asked on a database connection of the probe's own (opened
// when first needed, and again after it is lost), never one of a store's pool. Its caller owns it;
// one thread at a time.
class ReadinessProbe {
 public:
  virtual ~ReadinessProbe() = default;
  // OK if the database takes writes (not a standby), serves the schema this binary needs (its
  // version and every function file's checksum, pg::CheckSchema), and
  // commits a transaction that needs a fresh page of storage in the database's default
  // tablespace: a full data disk fails it, as it fails settlements. Otherwise UNAVAILABLE (or
  // FAILED_PRECONDITION for the schema) saying why, in words fit for any client.
  virtual Status Probe() = 0;
};

// A probe on `connection`'s database whose statements each run under `timeout` (as lock and
// statement timeout), so that none outlasts it by much.
std::unique_ptr<ReadinessProbe> OpenReadinessProbe(const pg::ConnectionOptions& connection,
                                                   std::chrono::milliseconds timeout);

}  // namespace verdict::lobby
