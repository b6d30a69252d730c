// Partition maintenance beside readers and settlements, against a real PostgreSQL: a step that
// creates a partition (and moves rows out of the DEFAULT one) takes its locks in one order,
// parents first, so that a transaction which read the family's tables and goes on to another
// statement is never deadlocked by it (sql/020, verdict_lock_partition_family). Each test holds
// a reader's locks open in one session, runs the step in another, waits until the step is
// blocked or done (an event, not a pause), and then lets the reader go on.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <pqxx/pqxx>
#include <string>

#include "lobby/retention.h"
#include "lobby/schema.h"
#include "lobby/settlement_store.h"
#include "tests/support/test_database.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;

// Ten ids a partition, two ahead.
lobby::PartitionOptions SmallPartitions() {
  lobby::PartitionOptions options;
  options.events_per_partition = 10;
  options.matches_per_partition = 10;
  options.ahead = 2;
  return options;
}

// Far beyond PostgreSQL's deadlock_timeout (1 s), so that a deadlock is always found and broken
// by the server rather than ended by the step's own lock timeout.
constexpr auto kLongLockTimeout = 60s;

class PartitionLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VERDICT_NEED_DATABASE();
    db_ = std::make_unique<TestDatabase>();
    const auto migrated = lobby::Migrate(
        {.conninfo = db_->conninfo(), .statement_timeout = std::chrono::milliseconds(0)},
        SmallPartitions());
    ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
  }

  // The id where the family's partitions end: a row there has no partition but the DEFAULT one.
  int64_t PartitionsEnd(const std::string& family) {
    return std::stoll(db_->Scalar("SELECT max(upper_id) FROM verdict_partitions WHERE family = '" +
                                  family + "'"));
  }

  // The partition that holds the row of `table` whose `key` is `id`.
  std::string PartitionOf(const std::string& table, const std::string& key, int64_t id) {
    return db_->Scalar("SELECT tableoid::regclass::text FROM " + table + " WHERE " + key + " = " +
                       std::to_string(id));
  }

  // Sessions of the database waiting for a lock.
  int LockWaiters() {
    return std::stoi(
        db_->Scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"));
  }

  // Runs EnsurePartitions in another session; returns once it is waiting for a lock or done.
  std::future<Result<int>> EnsureInTheBackground() {
    auto step = std::async(std::launch::async, [conninfo = db_->conninfo()] {
      return lobby::EnsurePartitions(
          {.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)},
          SmallPartitions(), kLongLockTimeout);
    });
    EXPECT_TRUE(WaitUntil(
        [&] { return step.wait_for(0s) == std::future_status::ready || LockWaiters() > 0; }, 30s))
        << "the step neither finished nor waited for a lock";
    return step;
  }

  std::unique_ptr<TestDatabase> db_;
};

// A settlement reads the events (locking the parent, then every partition) before it writes one.
// A new partition of events waits for it instead of locking the DEFAULT partition under it; the
// settlement's write goes through, and the partition is made after its commit, with the row that
// had landed in the DEFAULT partition moved into it.
TEST_F(PartitionLockTest, ASettlementThatReadsBeforeItWritesIsNotDeadlockedByANewPartition) {
  const int64_t stray = PartitionsEnd("events") + 3;
  db_->Exec(
      "INSERT INTO settlement_events (event_id, room_id, match_id, payload, node_id) "
      "OVERRIDING SYSTEM VALUE VALUES (" +
      std::to_string(stray) + ", 1, 1, '{}', 'node-a')");
  ASSERT_EQ(PartitionOf("settlement_events", "event_id", stray), "settlement_events_default");

  auto settlement_conn = db_->Connect();
  pqxx::work settlement(*settlement_conn);
  settlement.exec("SELECT count(*) FROM settlement_events");
  auto step = EnsureInTheBackground();
  try {
    settlement.exec(
        "INSERT INTO settlement_events (room_id, match_id, payload, node_id) "
        "VALUES (2, 2, '{}', 'node-a')");
    settlement.commit();
  } catch (const pqxx::sql_error& e) {
    ADD_FAILURE() << "the settlement failed: SQLSTATE " << e.sqlstate() << ": " << e.what();
  }
  const Result<int> created = step.get();
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_GT(*created, 0);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM settlement_events"), "2");
  EXPECT_NE(PartitionOf("settlement_events", "event_id", stray), "settlement_events_default");
}

// A reader of the history that read match_players and goes on to matches (an order no step can
// share with every reader): the step takes the family's first parent, does not wait for a second
// while holding it, and gives up for the next pass (UNAVAILABLE) instead of deadlocking. The
// reader finishes, and the next pass makes the partition with nothing lost.
TEST_F(PartitionLockTest, AReaderOfTwoHistoryTablesIsNotDeadlockedByANewPartition) {
  const int64_t stray = PartitionsEnd("history") + 3;
  db_->Exec(
      "INSERT INTO matches (match_id, room_id, node_id, outcome, winner_team, suspect, "
      "ended_at_ms) OVERRIDING SYSTEM VALUE VALUES (" +
      std::to_string(stray) + ", 1, 'node-a', 'SETTLED', 1, false, 0)");
  db_->Exec("INSERT INTO match_players VALUES (" + std::to_string(stray) +
            ", 7, 1, 0, 0, 0, 0, false, 'win', 1500, 1516)");
  ASSERT_EQ(PartitionOf("matches", "match_id", stray), "matches_default");

  auto reader_conn = db_->Connect();
  pqxx::work reader(*reader_conn);
  reader.exec("SELECT count(*) FROM match_players");
  auto step = EnsureInTheBackground();
  try {
    EXPECT_EQ(reader.exec1("SELECT count(*) FROM matches")[0].as<int>(), 1);
    reader.commit();
  } catch (const pqxx::sql_error& e) {
    ADD_FAILURE() << "the reader failed: SQLSTATE " << e.sqlstate() << ": " << e.what();
  }
  const Result<int> first = step.get();
  EXPECT_TRUE(first.ok() || first.status().code() == StatusCode::kUnavailable)
      << first.status().ToString();

  const Result<int> next = lobby::EnsurePartitions(
      {.conninfo = db_->conninfo(), .statement_timeout = std::chrono::milliseconds(0)},
      SmallPartitions(), 10s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM matches"), "1");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM match_players"), "1");
  EXPECT_NE(PartitionOf("matches", "match_id", stray), "matches_default");
  EXPECT_NE(PartitionOf("match_players", "match_id", stray), "match_players_default");
}

// Dropping history beside the same reader: the drop takes matches, does not wait for
// match_players while holding it, and leaves the partition for the next pass, which drops it.
TEST_F(PartitionLockTest, AReaderOfTwoHistoryTablesIsNotDeadlockedByADrop) {
  lobby::RetentionOptions options;
  options.partitions = SmallPartitions();
  options.events_older_than = std::nullopt;
  options.history_older_than = 0ms;  // the legacy partition, empty and complete, is due
  options.lock_timeout = kLongLockTimeout;

  auto reader_conn = db_->Connect();
  pqxx::work reader(*reader_conn);
  reader.exec("SELECT count(*) FROM match_players");
  auto pass = std::async(std::launch::async, [&, conninfo = db_->conninfo()] {
    return lobby::RetainOnce(
        {.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)}, options);
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return pass.wait_for(0s) == std::future_status::ready || LockWaiters() > 0; }, 30s))
      << "the pass neither finished nor waited for a lock";
  try {
    EXPECT_EQ(reader.exec1("SELECT count(*) FROM matches")[0].as<int>(), 0);
    reader.commit();
  } catch (const pqxx::sql_error& e) {
    ADD_FAILURE() << "the reader failed: SQLSTATE " << e.sqlstate() << ": " << e.what();
  }
  const auto first = pass.get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->history_partitions_dropped + first->steps_skipped, 1) << first->ToString();

  if (first->history_partitions_dropped == 0) {
    const auto next = lobby::RetainOnce(
        {.conninfo = db_->conninfo(), .statement_timeout = std::chrono::milliseconds(0)}, options);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_EQ(next->history_partitions_dropped, 1) << next->ToString();
  }
}

}  // namespace
}  // namespace verdict::testing
