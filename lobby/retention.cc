#include "lobby/retention.h"

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "lobby/pg/errors.h"

namespace verdict::lobby {
namespace {

// Runs `body` on a new connection (pg::Connect: the lobby's connection defaults and session
// settings), translating libpqxx failures by pg/errors.h's table.
template <typename T, typename F>
Result<T> WithConnection(const pg::ConnectionOptions& connection, const char* what, F body) {
  auto conn = pg::Connect(connection);
  if (!conn.ok()) return Status(conn.status().code(), what + (": " + conn.status().message()));
  try {
    return body(**conn);
  } catch (const std::exception& e) {
    const pg::Failure failure = pg::Classify(e, conn->get(), /*committing=*/false);
    pg::Log(failure, what);
    return pg::StatusOf(failure, what);
  }
}

// One short transaction: `sql` under the lock timeout, its one value.
template <typename T>
std::optional<T> Step(pqxx::connection& conn, std::chrono::milliseconds lock_timeout,
                      const std::string& sql) {
  pqxx::work tx(conn);
  tx.exec("SET LOCAL lock_timeout = " + std::to_string(lock_timeout.count()));
  const pqxx::row row = tx.exec1(sql);
  tx.commit();
  return row[0].is_null() ? std::nullopt : std::optional<T>(row[0].as<T>());
}

std::string Seconds(std::chrono::milliseconds d) {
  return std::to_string(static_cast<double>(d.count()) / 1000.0);
}

int EnsureOn(pqxx::connection& conn, const PartitionOptions& options,
             std::chrono::milliseconds lock_timeout) {
  int created = 0;
  for (const auto& [family, size] :
       {std::pair<std::string, int64_t>{"events", options.events_per_partition},
        {"history", options.matches_per_partition}}) {
    const auto n = Step<int>(conn, lock_timeout,
                             "SELECT verdict_ensure_partitions('" + family + "', " +
                                 std::to_string(size) + ", " + std::to_string(options.ahead) + ")");
    if (n && *n > 0) {
      spdlog::info("partitions: created {} {} partition{} ahead", *n, family, *n == 1 ? "" : "s");
      created += *n;
    }
  }
  return created;
}

// Detaches the family's partitions older than `older_than`, oldest first, a few per transaction,
// counting them in `dropped` (which stays right when a step throws). Their tables go afterwards,
// in DropDetached, out of the family's locks.
void DetachOlderThan(pqxx::connection& conn, const std::string& family,
                     std::chrono::milliseconds older_than, std::chrono::milliseconds lock_timeout,
                     int& dropped) {
  // Enough that a deployment's pass needs one transaction, few enough that a first pass over a
  // long history holds the family's locks for a moment each time.
  constexpr int kPerTransaction = 16;
  for (;;) {
    const int n = Step<int>(conn, lock_timeout,
                            "SELECT verdict_detach_old_partitions('" + family +
                                "', now() - make_interval(secs => " + Seconds(older_than) + "), " +
                                std::to_string(kPerTransaction) + ")")
                      .value_or(0);
    if (n > 0) spdlog::info("retention: detached {} {} partition{}", n, family, n == 1 ? "" : "s");
    dropped += n;
    if (n < kPerTransaction) return;
  }
}

// Drops the detached tables, each in a transaction that locks it alone: this pass's, and any a
// pass that ended between detaching and dropping left behind.
void DropDetached(pqxx::connection& conn, std::chrono::milliseconds lock_timeout, int& dropped) {
  while (const auto name =
             Step<std::string>(conn, lock_timeout, "SELECT verdict_drop_detached_partition()")) {
    ++dropped;
    spdlog::info("retention: dropped the detached table {}", *name);
  }
}

// Expires receipts older than the window, a batch per transaction, counting them in `expired`.
void ExpireReceipts(pqxx::connection& conn, const RetentionOptions& o, int64_t& expired) {
  const std::string cutoff =
      "now() - make_interval(secs => " + Seconds(*o.receipts_older_than) + ")";
  const std::string batch = std::to_string(o.receipts_per_batch);
  const std::string sql =
      o.unsafe_expire_receipts_without_records_for_test
          ? "WITH gone AS (DELETE FROM settlement_receipts WHERE room_id IN (SELECT room_id FROM "
            "settlement_receipts WHERE settled_at < " +
                cutoff + " ORDER BY match_id LIMIT " + batch +
                ") RETURNING 1) SELECT count(*) FROM gone"
          : "SELECT verdict_expire_receipts(" + cutoff + ", " + batch + ")";
  for (;;) {
    const int64_t n = Step<int64_t>(conn, o.lock_timeout, sql).value_or(0);
    expired += n;
    if (n < o.receipts_per_batch) return;
  }
}

}  // namespace

std::string RetentionReport::ToString() const {
  return std::to_string(partitions_created) + " partitions created, " +
         std::to_string(event_partitions_dropped) + " event partitions and " +
         std::to_string(history_partitions_dropped) + " history partitions dropped (" +
         std::to_string(tables_dropped) + " tables), " + std::to_string(receipts_expired) +
         " receipts expired" +
         (steps_skipped > 0 ? ", " + std::to_string(steps_skipped) + " steps left for next time"
                            : "") +
         (steps_failed.empty() ? "" : ", " + std::to_string(steps_failed.size()) + " steps failed");
}

Result<int> EnsurePartitions(const pg::ConnectionOptions& connection,
                             const PartitionOptions& options,
                             std::chrono::milliseconds lock_timeout) {
  return WithConnection<int>(connection, "partitions", [&](pqxx::connection& conn) {
    return EnsureOn(conn, options, lock_timeout);
  });
}

Result<RetentionReport> RetainOnce(const pg::ConnectionOptions& connection,
                                   const RetentionOptions& o) {
  if (o.unsafe_expire_receipts_without_records_for_test) {
    spdlog::error("UNSAFE test switch is on: receipts expire without their compact records");
  }
  return WithConnection<RetentionReport>(connection, "retention", [&](pqxx::connection& conn) {
    RetentionReport report;
    // A step whose locks are not granted in time is left for the next pass; one that fails
    // otherwise is reported, and the next step runs all the same. A lost connection ends the pass.
    const auto step = [&](const char* what, auto&& run) {
      try {
        run();
      } catch (const std::exception& e) {
        const pg::Failure failure = pg::Classify(e, &conn, /*committing=*/false);
        if (failure.connection_lost) throw;
        if (failure.sqlstate == "55P03") {  // the lock timeout: a step for the next pass
          ++report.steps_skipped;
          spdlog::warn("retention: {} skipped, its locks were not granted: {}", what,
                       failure.detail);
          return;
        }
        spdlog::warn("retention: {} failed: {}: {}", what, failure.summary, failure.detail);
        report.steps_failed.push_back(std::string(what) + ": " + failure.summary);
      }
    };
    step("creating partitions",
         [&] { report.partitions_created = EnsureOn(conn, o.partitions, o.lock_timeout); });
    if (o.events_older_than) {
      step("detaching events", [&] {
        DetachOlderThan(conn, "events", *o.events_older_than, o.lock_timeout,
                        report.event_partitions_dropped);
      });
    }
    if (o.history_older_than) {
      step("detaching history", [&] {
        DetachOlderThan(conn, "history", *o.history_older_than, o.lock_timeout,
                        report.history_partitions_dropped);
      });
    }
    // Whether or not this pass detached anything: a pass that ended in between leaves tables.
    step("dropping detached tables",
         [&] { DropDetached(conn, o.lock_timeout, report.tables_dropped); });
    if (o.receipts_older_than) {
      step("expiring receipts", [&] { ExpireReceipts(conn, o, report.receipts_expired); });
    }
    return report;
  });
}

Result<std::string> NewEpoch(const pg::ConnectionOptions& connection) {
  return WithConnection<std::string>(connection, "new epoch", [&](pqxx::connection& conn) {
    pqxx::work tx(conn);
    const std::string epoch =
        tx.exec1("UPDATE verdict_feed SET epoch = verdict_new_epoch() RETURNING epoch")[0]
            .as<std::string>();
    tx.commit();
    return epoch;
  });
}

}  // namespace verdict::lobby
