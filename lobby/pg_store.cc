#include "lobby/pg_store.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "lobby/pg/array_literal.h"
#include "lobby/pg/errors.h"
#include "lobby/pg/pool.h"
#include "lobby/pg/run.h"
#include "lobby/pg/schema.h"
#include "lobby/pg_ladder.h"
#include "lobby/pg_statuses.h"
#include "lobby/settle_transaction.h"
#include "lobby/void_transaction.h"
#include "proto/wire.h"

namespace verdict::lobby {
namespace {

using Statements = std::vector<std::pair<std::string, std::string>>;

// The statements of the rooms', receipts' and reconciliation's calls, prepared on each connection
// of PgStore's pool with the settlement's (SettleStatements) and the ladder's (LadderStatements).
// Nothing is ever built by string concatenation of input: arrays travel as array-literal
// parameters.
Statements StoreStatements() {
  return {
      {"allocate",
       "SELECT status, busy_player, detail FROM verdict_allocate($1, $2, $3, $4::text[], "
       "$5::smallint[])"},
      {"receipt_of_node",
       "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint "
       "FROM settlement_receipts WHERE room_id = $1 AND node_id = $2"},
      {"receipt_any",
       "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint "
       "FROM settlement_receipts WHERE room_id = $1"},
      {"receipt_expired_of_node",
       "SELECT EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = $1 "
       "AND node_tag = verdict_node_tag($2))"},
      {"receipt_expired_any", "SELECT EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = $1)"},
      {"room",
       "SELECT b.node_id, (extract(epoch FROM b.allocated_at) * 1000)::bigint, "
       "coalesce((extract(epoch FROM b.released_at) * 1000)::bigint, 0), s.player_id, s.team "
       "FROM battle_rooms b LEFT JOIN battle_room_seats s ON s.room_id = b.room_id "
       "WHERE b.room_id = $1 ORDER BY s.player_id"},
      // Due for release (`serve --release-after`), oldest first, by battle_rooms' allocation
      // index.
      {"rooms_due_for_release",
       "SELECT room_id FROM battle_rooms WHERE released_at IS NULL "
       "AND allocated_at < now() - make_interval(secs => $1) ORDER BY allocated_at, room_id "
       "LIMIT $2"},
      {"release_room_unless_busy", "SELECT status FROM verdict_release_room($1, p_wait => false)"},
      {"oldest_unsettled",
       "SELECT coalesce(extract(epoch FROM now() - min(allocated_at)), 0)::float8 "
       "FROM battle_rooms"},
      {"release_room",
       "SELECT status, coalesce((extract(epoch FROM released_at) * 1000)::bigint, 0), "
       "players_released FROM verdict_release_room($1)"},
      {"pending_rooms",
       "SELECT room_id, node_id, (extract(epoch FROM allocated_at) * 1000)::bigint, "
       "extract(epoch FROM now() - allocated_at)::bigint, "
       "coalesce((extract(epoch FROM released_at) * 1000)::bigint, 0) FROM battle_rooms "
       "WHERE allocated_at < now() - make_interval(secs => $1) ORDER BY allocated_at, room_id"},
      // Receipts settled after the newest event retention dropped (with a minute's margin: an
      // event is created when its transaction starts) must have their event.
      {"receipts_without_event",
       "SELECT r.room_id, r.node_id, r.match_id, "
       "(extract(epoch FROM r.settled_at) * 1000)::bigint "
       "FROM settlement_receipts r CROSS JOIN verdict_feed f "
       "WHERE r.settled_at < now() - make_interval(secs => $1) "
       "AND (f.trimmed_at IS NULL OR r.settled_at > f.trimmed_at + interval '1 minute') "
       "AND NOT EXISTS (SELECT 1 FROM settlement_events e WHERE e.room_id = r.room_id) "
       "ORDER BY r.settled_at, r.room_id"},
  };
}

// The feed's statements: all PgFeedStore prepares.
Statements FeedStatements() {
  // One statement, so one snapshot: the page, the feed's head, trim mark and epoch as of the
  // same moment.
  const auto page = [](const char* node_filter) {
    return std::string(
               "WITH feed AS (SELECT verdict_feed_head() AS top, trimmed_through, epoch "
               "FROM verdict_feed) "
               "SELECT e.seq, e.node_id, e.payload::text, feed.top, feed.trimmed_through, "
               "feed.epoch FROM feed LEFT JOIN LATERAL ("
               "SELECT seq, node_id, payload FROM settlement_events WHERE ") +
           node_filter + "seq > $1 ORDER BY seq LIMIT $2) e ON true ORDER BY e.seq";
  };
  return {
      {"events_page_all", page("")},
      {"events_page_node", page("node_id = $3 AND ")},
      {"sequence_events", "SELECT verdict_sequence_events($1), pg_backend_pid()"},
      {"feed_state_all", "SELECT * FROM verdict_feed_state(NULL)"},
      {"feed_state_node", "SELECT * FROM verdict_feed_state($1)"},
  };
}

Result<std::unique_ptr<pg::Pool>> OpenPool(const StoreOptions& options, Statements statements) {
  pg::PoolOptions pool;
  pool.connection = options.connection;
  pool.workers = options.pool_size;
  pool.acquire_timeout = options.acquire_timeout;
  pool.statements = std::move(statements);
  return pg::Pool::Open(std::move(pool));
}

class PgStoreImpl final : public PgStore {
 public:
  PgStoreImpl(const StoreOptions& options, std::unique_ptr<pg::Pool> pool)
      : pool_(std::move(pool)),
        settle_(*pool_, options.unsafe_release_before_commit_for_test),
        void_(*pool_) {}

  int workers() const override { return pool_->workers(); }

  std::vector<Result<SettleOutcome>> SettleBattles(const std::vector<SettleRequest>& requests,
                                                   bool wait, Cancellation* cancel) override {
    return settle_.Settle(requests, wait, cancel);
  }

  Result<AllocateOutcome> AllocateRoom(const v1::RoomAllocation& a) override {
    pg::ArrayLiteral ids, teams;
    for (const v1::Seat& seat : a.seats()) {
      ids.AddText(seat.player_id());
      teams.Add(seat.team());
    }
    return pg::Run<AllocateOutcome>(*pool_, "allocate", [&](pg::Pool::Lease& lease) {
      pqxx::work tx(lease.conn());
      pqxx::row row =
          tx.exec_prepared1("allocate", a.room_id(), a.node_id(), a.mode(), ids.str(), teams.str());
      auto status = StatusFromSql(kAllocateStatuses, "allocation", row[0].as<std::string>());
      if (!status.ok()) {
        spdlog::error("room={}: {}; answering INTERNAL", a.room_id(), status.status().message());
        return Result<AllocateOutcome>(status.status());
      }
      // Only an allocation changes anything: a refused one (a busy player) must not keep the
      // new players it created before it found the busy one, so it rolls back. A season's first
      // ratings are seeded under the allocation's locks, before its commit (docs/modes.md,
      // "Seasons").
      if (*status == AllocateStatus::kAllocated) {
        if (Status seeded = SeedSeasonRatings(tx, a.room_id(), a.mode()); !seeded.ok()) {
          return Result<AllocateOutcome>(seeded);
        }
        tx.commit();
      }
      return Result<AllocateOutcome>(
          AllocateOutcome{*status, row[1].is_null() ? "" : row[1].as<std::string>(),
                          row[2].is_null() ? "" : row[2].as<std::string>()});
    });
  }

  Result<std::optional<AllocatedRoom>> GetRoom(uint64_t room_id) override {
    return pg::Run<std::optional<AllocatedRoom>>(*pool_, "get room", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::result rows = tx.exec_prepared("room", room_id);
      if (rows.empty()) return std::optional<AllocatedRoom>();
      AllocatedRoom room{room_id,
                         rows[0][0].as<std::string>(),
                         rows[0][1].as<int64_t>(),
                         rows[0][2].as<int64_t>(),
                         {}};
      for (const auto& row : rows) {
        if (row[3].is_null()) continue;
        v1::Seat& seat = room.seats.emplace_back();
        seat.set_player_id(row[3].as<std::string>());
        seat.set_team(row[4].as<uint32_t>());
      }
      return std::optional<AllocatedRoom>(std::move(room));
    });
  }

  Result<ReleaseOutcome> ReleaseRoom(uint64_t room_id) override {
    return pg::Run<ReleaseOutcome>(
        *pool_, "release room", [&](pg::Pool::Lease& l) -> Result<ReleaseOutcome> {
          pqxx::nontransaction tx(l.conn());
          const pqxx::row row = tx.exec_prepared1("release_room", room_id);
          auto status = StatusFromSql(kReleaseStatuses, "release", row[0].as<std::string>());
          if (!status.ok()) return status.status();
          return ReleaseOutcome{*status, row[1].as<int64_t>(), row[2].as<uint32_t>()};
        });
  }

  Result<int> ReleaseRoomsOlderThan(int64_t older_than_s, int limit) override {
    // Room by room, each its own short statement, so that no one room's players (a player's row
    // locked elsewhere, say) hold up the others: a busy room is passed over until the next call.
    return pg::Run<int>(*pool_, "release rooms", [&](pg::Pool::Lease& l) -> Result<int> {
      pqxx::nontransaction tx(l.conn());
      int released = 0;
      for (const auto& due : tx.exec_prepared("rooms_due_for_release", older_than_s, limit)) {
        const uint64_t room = due[0].as<uint64_t>();
        auto status =
            StatusFromSql(kReleaseStatuses, "release",
                          tx.exec_prepared1("release_room_unless_busy", room)[0].as<std::string>());
        if (!status.ok()) return status.status();
        if (*status == ReleaseStatus::kReleased) {
          ++released;
        } else if (*status == ReleaseStatus::kBusy) {
          spdlog::info("room={}: not released now: another transaction holds it or a player", room);
        }
      }
      return released;
    });
  }

  Result<double> OldestUnsettledAllocationAge() override {
    return pg::Run<double>(*pool_, "oldest allocation", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return tx.exec_prepared1("oldest_unsettled")[0].as<double>();
    });
  }

  Result<std::optional<v1::SettlementReceipt>> GetReceipt(
      uint64_t room_id, const std::optional<std::string>& node_id) override {
    return pg::Run<std::optional<v1::SettlementReceipt>>(
        *pool_, "get receipt", [&](pg::Pool::Lease& lease) {
          pqxx::nontransaction tx(lease.conn());
          pqxx::result rows = node_id ? tx.exec_prepared("receipt_of_node", room_id, *node_id)
                                      : tx.exec_prepared("receipt_any", room_id);
          if (rows.empty()) return std::optional<v1::SettlementReceipt>();
          return std::optional<v1::SettlementReceipt>(ReceiptFromRow(rows[0]));
        });
  }

  Result<bool> ReceiptExpired(uint64_t room_id,
                              const std::optional<std::string>& node_id) override {
    return pg::Run<bool>(*pool_, "get receipt", [&](pg::Pool::Lease& lease) {
      pqxx::nontransaction tx(lease.conn());
      const pqxx::row row = node_id
                                ? tx.exec_prepared1("receipt_expired_of_node", room_id, *node_id)
                                : tx.exec_prepared1("receipt_expired_any", room_id);
      return row[0].as<bool>();
    });
  }

  Result<std::optional<v1::Player>> GetPlayer(const std::string& player_id) override {
    return GetPlayerIn(*pool_, player_id);
  }

  Result<DeclareOutcome> DeclareMode(const v1::Mode& mode) override {
    return DeclareModeIn(*pool_, mode);
  }

  Result<std::optional<v1::Mode>> GetMode(const std::string& mode) override {
    return GetModeIn(*pool_, mode);
  }

  Result<std::optional<v1::Leaderboard>> GetLeaderboard(const std::string& mode, size_t limit,
                                                        const std::optional<LadderCursor>& after,
                                                        bool include_provisional) override {
    return GetLeaderboardIn(*pool_, mode, limit, after, include_provisional);
  }

  Result<AgingPass> AgeIdleRatings(const AgingPlace& from, int limit) override {
    return AgeIdleRatingsIn(*pool_, from, limit);
  }

  Result<ImportOutcome> ImportRating(const std::string& player_id, const std::string& mode,
                                     const v1::RatingImport& rating, double displayed) override {
    return ImportRatingIn(*pool_, player_id, mode, rating, displayed);
  }

  Result<VoidOutcome> VoidMatch(const VoidRequest& request) override { return void_.Void(request); }

  Result<std::vector<PendingRoom>> RoomsWithoutReceipt(int64_t older_than_s) override {
    return pg::Run<std::vector<PendingRoom>>(*pool_, "reconcile", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      std::vector<PendingRoom> rooms;
      for (const auto& row : tx.exec_prepared("pending_rooms", older_than_s)) {
        rooms.push_back({row[0].as<uint64_t>(), row[1].as<std::string>(), row[2].as<int64_t>(),
                         row[3].as<int64_t>(), row[4].as<int64_t>()});
      }
      return rooms;
    });
  }

  Result<std::vector<ReceiptWithoutEvent>> ReceiptsWithoutEvent(int64_t older_than_s) override {
    return pg::Run<std::vector<ReceiptWithoutEvent>>(*pool_, "reconcile", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      std::vector<ReceiptWithoutEvent> receipts;
      for (const auto& row : tx.exec_prepared("receipts_without_event", older_than_s)) {
        receipts.push_back({row[0].as<uint64_t>(), row[1].as<std::string>(), row[2].as<uint64_t>(),
                            row[3].as<int64_t>()});
      }
      return receipts;
    });
  }

 private:
  const std::unique_ptr<pg::Pool> pool_;
  SettleTransaction settle_;
  VoidTransaction void_;
};

class PgFeedStoreImpl final : public PgFeedStore {
 public:
  explicit PgFeedStoreImpl(std::unique_ptr<pg::Pool> pool) : pool_(std::move(pool)) {}

  Result<Sequenced> SequenceEvents(int limit) override {
    return pg::Run<Sequenced>(*pool_, "sequence events", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = tx.exec_prepared1("sequence_events", limit);
      return Sequenced{std::max(0, row[0].as<int>()), row[1].as<int>()};
    });
  }

  Result<FeedPage> EventsAfter(int64_t after, const std::optional<std::string>& node_id,
                               size_t limit) override {
    return pg::Run<FeedPage>(*pool_, "events", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return PageFromRows(node_id ? tx.exec_prepared("events_page_node", after, limit, *node_id)
                                  : tx.exec_prepared("events_page_all", after, limit),
                          after, limit);
    });
  }

  Result<FeedState> GetFeedState(const std::optional<std::string>& node_id) override {
    return pg::Run<FeedState>(*pool_, "events", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = node_id ? tx.exec_prepared1("feed_state_node", *node_id)
                                    : tx.exec_prepared1("feed_state_all");
      return FeedState{row[0].as<std::string>(), row[1].as<int64_t>(), row[2].as<int64_t>(),
                       row[3].as<int64_t>()};
    });
  }

 private:
  // Rows of events_page_*: (seq, node_id, payload, head, trimmed_through, epoch), one row of
  // NULLs and the feed's columns when the page is empty.
  static FeedPage PageFromRows(const pqxx::result& rows, int64_t after, size_t limit) {
    FeedPage page;
    page.after = after;
    int64_t head = after;
    for (const auto& row : rows) {
      page.head = row[3].as<int64_t>();
      head = std::max(head, page.head);
      page.trimmed_through = row[4].as<int64_t>();
      page.epoch = row[5].as<std::string>();
      if (row[0].is_null()) continue;
      page.events.push_back(
          {row[0].as<int64_t>(), row[1].as<std::string>(), row[2].as<std::string>()});
    }
    // A full page may stop short of the head; a short one saw every event up to it.
    page.last = page.events.size() == limit ? page.events.back().seq : head;
    return page;
  }

  const std::unique_ptr<pg::Pool> pool_;
};

// The readiness probe's connection and its one transaction. Its SQL errors keep the connection
// (the transaction is rolled back); a lost connection is opened again by the next probe.
class PgReadinessProbe final : public ReadinessProbe {
 public:
  PgReadinessProbe(const pg::ConnectionOptions& connection, std::chrono::milliseconds timeout)
      : connection_(connection) {
    connection_.lock_timeout = timeout;
    connection_.statement_timeout = timeout;
  }

  Status Probe() override {
    if (!conn_ || !conn_->is_open()) {
      conn_.reset();
      auto opened = pg::Connect(connection_);
      if (!opened.ok()) return UnavailableError("cannot reach the database");
      conn_ = std::move(*opened);
    }
    try {
      pqxx::work tx(*conn_);
      VERDICT_RETURN_IF_ERROR(pg::CheckSchema(tx));
      // A settlement inserts rows, which take new pages as its tables grow; so does this, into
      // a table that lives for the transaction and is empty, so its one row needs a fresh page.
      // On a full data disk it fails as the settlements do (53100, disk full). Its commit waits
      // for a synchronous standby, if there is one, as theirs do.
      tx.exec("CREATE TEMP TABLE verdict_readiness_probe (probe text) ON COMMIT DROP");
      tx.exec("INSERT INTO verdict_readiness_probe VALUES ('probe')");
      tx.commit();
      last_logged_.clear();
      return Status::Ok();
    } catch (const std::exception& e) {
      const pg::Failure failure = pg::Classify(e, conn_.get(), /*committing=*/false);
      Log(failure.summary + ": " + failure.detail);
      if (failure.connection_lost) {
        conn_.reset();
        return UnavailableError("cannot reach the database");
      }
      if (failure.sqlstate == "42P01") {
        return FailedPreconditionError(
            "the database has no verdict schema; run `verdict-lobby migrate`");
      }
      return UnavailableError("the database cannot commit a settlement now: " + failure.summary);
    }
  }

 private:
  // The detail of a failed probe (libpq's text), logged once while it stays the same.
  void Log(const std::string& detail) {
    if (detail == last_logged_) return;
    spdlog::warn("readiness probe: {}", detail);
    last_logged_ = detail;
  }

  pg::ConnectionOptions connection_;
  std::unique_ptr<pqxx::connection> conn_;
  std::string last_logged_;
};

}  // namespace

Status UnknownSqlStatus(std::string_view call, std::string_view name) {
  return InternalError("the " + std::string(call) + " answered status '" + wire::ValidUtf8(name) +
                       "', which this lobby does not know");
}

std::unique_ptr<ReadinessProbe> OpenReadinessProbe(const pg::ConnectionOptions& connection,
                                                   std::chrono::milliseconds timeout) {
  return std::make_unique<PgReadinessProbe>(connection, timeout);
}

Result<std::unique_ptr<PgStore>> PgStore::Open(const StoreOptions& options) {
  Statements statements = StoreStatements();
  for (auto& statement : SettleStatements()) statements.push_back(std::move(statement));
  for (auto& statement : LadderStatements()) statements.push_back(std::move(statement));
  for (auto& statement : VoidStatements()) statements.push_back(std::move(statement));
  auto pool = OpenPool(options, std::move(statements));
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<PgStore>(std::make_unique<PgStoreImpl>(options, std::move(*pool)));
}

Result<std::unique_ptr<PgFeedStore>> PgFeedStore::Open(const StoreOptions& options) {
  auto pool = OpenPool(options, FeedStatements());
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<PgFeedStore>(std::make_unique<PgFeedStoreImpl>(std::move(*pool)));
}

}  // namespace verdict::lobby
