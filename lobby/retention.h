// Retention: the lobby's data over time (docs/operating.md, "Retention"). Partitions of the event
// feed and of the match history are made ahead of the rows that will fill them (EnsurePartitions,
// which `verdict-lobby serve` runs all the time), and a retention pass (RetainOnce: `verdict-lobby
// retain`, or `serve` with --retain-every) drops whole partitions of events and history once all
// of a partition is older than its window, and expires old receipts into compact records of the
// rooms they settled (sql/001_baseline.sql, sql/functions/). A partition is detached in one short
// transaction, which costs the same however many rows it held, and its tables dropped in others
// that lock only them (docs/design.md §8); receipts go a batch per transaction.
//
// Each call opens a connection of its own (pg::Connect, with the lobby's connection defaults and
// session settings), and every transaction in it is short and runs under
// a lock timeout: a step that cannot get its locks in time (making or dropping a partition needs
// the family's tables to itself for a moment) gives up until the next pass instead of holding up
// settlements. It takes them parents first and waits for the first table of the family only
// (verdict_lock_partition_family), so a reader or a settlement is never deadlocked by it. Several
// lobby instances may run them at once; one at a time does the work (an advisory lock).
// Stateless; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "lobby/pg/connection.h"

namespace verdict::lobby {

struct PartitionOptions {
  // Event ids per partition of settlement_events. About 1.8 GB of events, and 20 minutes at the
  // design's 830 rooms/s; events stay for their window plus at most one partition.
  // Default: 1,000,000.
  int64_t events_per_partition = 1'000'000;
  // Matches per partition of the history (matches, match_players, replays): ten players a match.
  // Default: 1,000,000.
  int64_t matches_per_partition = 1'000'000;
  // Partitions kept ready beyond the next id. Default: 2.
  int ahead = 2;
};

struct RetentionOptions {
  PartitionOptions partitions;
  // Events are dropped once their whole partition is older than this; nullopt keeps them.
  // Default: 7 days.
  std::optional<std::chrono::milliseconds> events_older_than = std::chrono::hours(24 * 7);
  // Matches, match players and replays, likewise; nullopt keeps them. Default: kept.
  std::optional<std::chrono::milliseconds> history_older_than;
  // Receipts older than this become compact records (settled_rooms); nullopt keeps them.
  // Default: kept.
  std::optional<std::chrono::milliseconds> receipts_older_than;
  // Receipts expired per transaction. Default: 10,000.
  int receipts_per_batch = 10'000;
  // How long a step waits for its locks before it gives up until the next pass.
  // Default: 1 s.
  std::chrono::milliseconds lock_timeout{1000};
  // Test-only negative control, set by verdict-lobby-testing only: expire receipts without
  // keeping their compact records. Default: false.
  bool unsafe_expire_receipts_without_records_for_test = false;
};

// What one pass did.
struct RetentionReport {
  int partitions_created = 0;
  int event_partitions_dropped = 0;
  int history_partitions_dropped = 0;
  // Detached tables dropped: a partition of history is three (matches, match players, replays).
  int tables_dropped = 0;
  int64_t receipts_expired = 0;
  int steps_skipped = 0;  // steps that could not get their locks in time: the next pass does them
  // Steps that failed otherwise, each as "what: why". The others ran all the same.
  std::vector<std::string> steps_failed;
  std::string ToString() const;
};

// Creates the partitions the next rows need, and moves rows that landed in a DEFAULT partition
// into partitions of their own. Returns the number of partitions created. Failures as
// pg/errors.h translates them: UNAVAILABLE when the database cannot be reached or the locks were
// not granted in time.
Result<int> EnsurePartitions(const pg::ConnectionOptions& connection,
                             const PartitionOptions& options,
                             std::chrono::milliseconds lock_timeout);

// One retention pass: EnsurePartitions, then each kind of data older than its window. Each step
// stands alone, so that one window's failure never stops another's: a step whose locks are not
// granted in time is skipped (counted in steps_skipped), one that fails otherwise is listed in
// steps_failed, and the pass goes on with the next. UNAVAILABLE when the database cannot be
// reached (what was done before stays done).
Result<RetentionReport> RetainOnce(const pg::ConnectionOptions& connection,
                                   const RetentionOptions& options);

// Gives the event feed a new random epoch (the restore procedure); returns it.
Result<std::string> NewEpoch(const pg::ConnectionOptions& connection);

}  // namespace verdict::lobby
