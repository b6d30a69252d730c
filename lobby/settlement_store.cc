#include "lobby/settlement_store.h"

#include <algorithm>
#include <map>
#include <pqxx/pqxx>
#include <random>
#include <sstream>
#include <string_view>

#include <spdlog/spdlog.h>

#include "lobby/ladder_store.h"
#include "lobby/pg/array_literal.h"
#include "lobby/pg/errors.h"
#include "lobby/pg/pool.h"
#include "lobby/pg/schema.h"
#include "lobby/settle_transaction.h"
#include "proto/wire.h"

namespace verdict::lobby {
namespace {

// Every statement the store runs, prepared on each connection of its pool with the settlement's
// (SettleStatements; all but the test-only negative control's). Nothing is ever built by string
// concatenation of input: arrays travel as array-literal parameters.
constexpr std::pair<const char*, const char*> kStatements[] = {
    {"allocate",
     "SELECT status, busy_player, detail FROM verdict_allocate($1, $2, $3, $4::text[], "
     "$5::smallint[])"},
    {"receipts_of_rooms",
     "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint, "
     "encode(fingerprint, 'hex'), attempt_id, node_id FROM settlement_receipts "
     "WHERE room_id = ANY ($1::bigint[])"},
    {"receipt_of_node",
     "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint, "
     "encode(fingerprint, 'hex'), attempt_id FROM settlement_receipts "
     "WHERE room_id = $1 AND node_id = $2"},
    {"receipt_any",
     "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint, "
     "encode(fingerprint, 'hex'), attempt_id FROM settlement_receipts WHERE room_id = $1"},
    {"receipt_expired_of_node",
     "SELECT EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = $1 "
     "AND node_tag = verdict_node_tag($2))"},
    {"receipt_expired_any", "SELECT EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = $1)"},
    {"room",
     "SELECT b.node_id, (extract(epoch FROM b.allocated_at) * 1000)::bigint, "
     "coalesce((extract(epoch FROM b.released_at) * 1000)::bigint, 0), s.player_id, s.team "
     "FROM battle_rooms b LEFT JOIN battle_room_seats s ON s.room_id = b.room_id "
     "WHERE b.room_id = $1 ORDER BY s.player_id"},
    // Due for release (`serve --release-after`), oldest first, by battle_rooms' allocation index.
    {"rooms_due_for_release",
     "SELECT room_id FROM battle_rooms WHERE released_at IS NULL "
     "AND allocated_at < now() - make_interval(secs => $1) ORDER BY allocated_at, room_id "
     "LIMIT $2"},
    {"release_room_unless_busy", "SELECT status FROM verdict_release_room($1, p_wait => false)"},
    {"oldest_unsettled",
     "SELECT coalesce(extract(epoch FROM now() - min(allocated_at)), 0)::float8 FROM battle_rooms"},
    {"release_room",
     "SELECT status, coalesce((extract(epoch FROM released_at) * 1000)::bigint, 0), "
     "players_released FROM verdict_release_room($1)"},
    // One statement, so one snapshot: the page, the feed's head, trim mark and epoch as of the
    // same moment.
    {"events_page_all",
     "WITH feed AS (SELECT verdict_feed_head() AS top, trimmed_through, epoch FROM verdict_feed) "
     "SELECT e.seq, e.node_id, e.payload::text, feed.top, feed.trimmed_through, feed.epoch "
     "FROM feed LEFT JOIN LATERAL ("
     "SELECT seq, node_id, payload FROM settlement_events WHERE seq > $1 ORDER BY seq LIMIT $2"
     ") e ON true ORDER BY e.seq"},
    {"events_page_node",
     "WITH feed AS (SELECT verdict_feed_head() AS top, trimmed_through, epoch FROM verdict_feed) "
     "SELECT e.seq, e.node_id, e.payload::text, feed.top, feed.trimmed_through, feed.epoch "
     "FROM feed LEFT JOIN LATERAL ("
     "SELECT seq, node_id, payload FROM settlement_events WHERE node_id = $3 AND seq > $1 "
     "ORDER BY seq LIMIT $2) e ON true ORDER BY e.seq"},
    {"sequence_events", "SELECT verdict_sequence_events($1), pg_backend_pid()"},
    {"feed_state_all", "SELECT * FROM verdict_feed_state(NULL)"},
    {"feed_state_node", "SELECT * FROM verdict_feed_state($1)"},
    {"pending_rooms",
     "SELECT room_id, node_id, (extract(epoch FROM allocated_at) * 1000)::bigint, "
     "extract(epoch FROM now() - allocated_at)::bigint, "
     "coalesce((extract(epoch FROM released_at) * 1000)::bigint, 0) FROM battle_rooms "
     "WHERE allocated_at < now() - make_interval(secs => $1) ORDER BY allocated_at, room_id"},
    // Receipts settled after the newest event retention dropped (with a minute's margin: an
    // event is created when its transaction starts) must have their event.
    {"receipts_without_event",
     "SELECT r.room_id, r.node_id, r.match_id, (extract(epoch FROM r.settled_at) * 1000)::bigint "
     "FROM settlement_receipts r CROSS JOIN verdict_feed f "
     "WHERE r.settled_at < now() - make_interval(secs => $1) "
     "AND (f.trimmed_at IS NULL OR r.settled_at > f.trimmed_at + interval '1 minute') "
     "AND NOT EXISTS (SELECT 1 FROM settlement_events e WHERE e.room_id = r.room_id) "
     "ORDER BY r.settled_at, r.room_id"},
    // A transaction that writes WAL (a logical message, of no other consequence), so that its
    // commit waits for the synchronous standby (if any) to confirm the WAL up to it. (A
    // transaction id alone writes nothing before the commit, which then does not wait.)
    {"await_replication", "SELECT pg_logical_emit_message(true, 'verdict', 'replication barrier')"},
};

class PgSettlementStore final : public SettlementStore {
 public:
  PgSettlementStore(const StoreOptions& options, std::unique_ptr<pg::Pool> pool)
      : options_(options), pool_(std::move(pool)), settle_(*pool_, options_) {}

  int workers() const override { return pool_->workers(); }

  Result<AllocateOutcome> AllocateRoom(const v1::RoomAllocation& a) override {
    pg::ArrayLiteral ids, teams;
    for (const v1::Seat& seat : a.seats()) {
      ids.AddText(seat.player_id());
      teams.Add(seat.team());
    }
    auto allocated = pool_->Run<AllocateOutcome>("allocate", [&](pg::Pool::Lease& lease) {
      pqxx::work tx(lease.conn());
      pqxx::row row =
          tx.exec_prepared1("allocate", a.room_id(), a.node_id(), a.mode(), ids.str(), teams.str());
      auto status = AllocateStatusFromSql(row[0].as<std::string>());
      if (!status.ok()) {
        spdlog::error("room={}: {}; answering INTERNAL", a.room_id(), status.status().message());
        return Result<AllocateOutcome>(status.status());
      }
      // Only an allocation changes anything: a refused one (a busy player) must not keep the
      // new players it created before it found the busy one, so it rolls back.
      if (*status == AllocateStatus::kAllocated) tx.commit();
      return Result<AllocateOutcome>(
          AllocateOutcome{*status, row[1].is_null() ? "" : row[1].as<std::string>(),
                          row[2].is_null() ? "" : row[2].as<std::string>()});
    });
    if (!allocated.ok()) return UnlessNotReady(allocated.status());
    return allocated;
  }

  std::vector<Result<SettleOutcome>> SettleBattles(const std::vector<SettleRequest>& requests,
                                                   bool wait, Cancellation* cancel) override {
    return settle_.Settle(requests, wait, cancel);
  }

  Result<std::optional<v1::SettlementReceipt>> GetReceipt(
      uint64_t room_id, const std::optional<std::string>& node_id) override {
    auto receipt = pool_->Run<std::optional<v1::SettlementReceipt>>(
        "get receipt", [&](pg::Pool::Lease& lease) {
          pqxx::nontransaction tx(lease.conn());
          pqxx::result rows = node_id ? tx.exec_prepared("receipt_of_node", room_id, *node_id)
                                      : tx.exec_prepared("receipt_any", room_id);
          if (rows.empty()) return std::optional<v1::SettlementReceipt>();
          return std::optional<v1::SettlementReceipt>(ReceiptFromRow(rows[0]));
        });
    if (!receipt.ok()) return UnlessNotReady(receipt.status());
    return receipt;
  }

  Result<bool> ReceiptExpired(uint64_t room_id,
                              const std::optional<std::string>& node_id) override {
    return pool_->Run<bool>("get receipt", [&](pg::Pool::Lease& lease) {
      pqxx::nontransaction tx(lease.conn());
      const pqxx::row row = node_id
                                ? tx.exec_prepared1("receipt_expired_of_node", room_id, *node_id)
                                : tx.exec_prepared1("receipt_expired_any", room_id);
      return row[0].as<bool>();
    });
  }

  Result<std::optional<AllocatedRoom>> GetRoom(uint64_t room_id) override {
    return pool_->Run<std::optional<AllocatedRoom>>("get room", [&](pg::Pool::Lease& l) {
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
    return pool_->Run<ReleaseOutcome>("release room", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = tx.exec_prepared1("release_room", room_id);
      return ReleaseOutcome{row[0].as<std::string>() == "released", row[1].as<int64_t>(),
                            row[2].as<uint32_t>()};
    });
  }

  Result<int> ReleaseRoomsOlderThan(int64_t older_than_s, int limit) override {
    // Room by room, each its own short statement, so that no one room's players (a player's row
    // locked elsewhere, say) hold up the others: a busy room is passed over until the next call.
    return pool_->Run<int>("release rooms", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      int released = 0;
      for (const auto& due : tx.exec_prepared("rooms_due_for_release", older_than_s, limit)) {
        const uint64_t room = due[0].as<uint64_t>();
        const std::string status =
            tx.exec_prepared1("release_room_unless_busy", room)[0].as<std::string>();
        if (status == "released") {
          ++released;
        } else if (status == "busy") {
          spdlog::info("room={}: not released now: another transaction holds it or a player", room);
        }
      }
      return released;
    });
  }

  Result<double> OldestUnsettledAllocationAge() override {
    return pool_->Run<double>("oldest allocation", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return tx.exec_prepared1("oldest_unsettled")[0].as<double>();
    });
  }

  Result<std::optional<v1::Player>> GetPlayer(const std::string& player_id) override {
    auto player = GetPlayerIn(*pool_, player_id);
    if (!player.ok()) return UnlessNotReady(player.status());
    return player;
  }

  Result<DeclareOutcome> DeclareMode(const v1::Mode& mode) override {
    auto declared = DeclareModeIn(*pool_, mode);
    if (!declared.ok()) return UnlessNotReady(declared.status());
    return declared;
  }

  Result<std::optional<v1::Mode>> GetMode(const std::string& mode) override {
    auto found = GetModeIn(*pool_, mode);
    if (!found.ok()) return UnlessNotReady(found.status());
    return found;
  }

  Result<std::optional<v1::Leaderboard>> GetLeaderboard(
      const std::string& mode, size_t limit, const std::optional<LadderCursor>& after) override {
    auto page = GetLeaderboardIn(*pool_, mode, limit, after);
    if (!page.ok()) return UnlessNotReady(page.status());
    return page;
  }

  Result<ImportOutcome> ImportRating(const std::string& player_id, const std::string& mode,
                                     const v1::RatingImport& rating, double displayed) override {
    auto imported = ImportRatingIn(*pool_, player_id, mode, rating, displayed);
    if (!imported.ok()) return UnlessNotReady(imported.status());
    return imported;
  }

  Result<Sequenced> SequenceEvents(int limit) override {
    return pool_->Run<Sequenced>("sequence events", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = tx.exec_prepared1("sequence_events", limit);
      return Sequenced{std::max(0, row[0].as<int>()), row[1].as<int>()};
    });
  }

  Result<FeedPage> EventsAfter(int64_t after, const std::optional<std::string>& node_id,
                               size_t limit) override {
    return pool_->Run<FeedPage>("events", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return PageFromRows(node_id ? tx.exec_prepared("events_page_node", after, limit, *node_id)
                                  : tx.exec_prepared("events_page_all", after, limit),
                          after, limit);
    });
  }

  Result<FeedState> GetFeedState(const std::optional<std::string>& node_id) override {
    return pool_->Run<FeedState>("events", [&](pg::Pool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = node_id ? tx.exec_prepared1("feed_state_node", *node_id)
                                    : tx.exec_prepared1("feed_state_all");
      return FeedState{row[0].as<std::string>(), row[1].as<int64_t>(), row[2].as<int64_t>(),
                       row[3].as<int64_t>()};
    });
  }

  Result<std::vector<PendingRoom>> RoomsWithoutReceipt(int64_t older_than_s) override {
    return pool_->Run<std::vector<PendingRoom>>("reconcile", [&](pg::Pool::Lease& l) {
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
    return pool_->Run<std::vector<ReceiptWithoutEvent>>("reconcile", [&](pg::Pool::Lease& l) {
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
  Status UnlessNotReady(const Status& failed) { return UnlessSchemaReady(*pool_, failed); }

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

  const StoreOptions options_;
  const std::unique_ptr<pg::Pool> pool_;
  SettleTransaction settle_;
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

Result<AllocateStatus> AllocateStatusFromSql(std::string_view status) {
  static constexpr std::pair<std::string_view, AllocateStatus> kNames[] = {
      {"allocated", AllocateStatus::kAllocated},
      {"duplicate", AllocateStatus::kDuplicate},
      {"room_exists", AllocateStatus::kRoomExists},
      {"player_busy", AllocateStatus::kPlayerBusy},
      {"room_id_reused", AllocateStatus::kRoomIdReused},
      {"mode_unknown", AllocateStatus::kModeUnknown},
      {"shape_refused", AllocateStatus::kShapeRefused},
  };
  for (const auto& [name, value] : kNames) {
    if (status == name) return value;
  }
  return InternalError("the allocation answered status '" + wire::ValidUtf8(status) +
                       "', which this lobby does not know");
}

Result<SettleStatus> SettleStatusFromSql(std::string_view status) {
  static constexpr std::pair<std::string_view, SettleStatus> kNames[] = {
      {"settled", SettleStatus::kSettled},
      {"duplicate", SettleStatus::kDuplicate},
      {"room_unknown", SettleStatus::kRoomUnknown},
      {"outcome_conflict", SettleStatus::kOutcomeConflict},
      {"idempotency_mismatch", SettleStatus::kIdempotencyMismatch},
      {"roster_mismatch", SettleStatus::kRosterMismatch},
      {"busy", SettleStatus::kBusy},
      {"original_expired", SettleStatus::kOriginalExpired},
  };
  for (const auto& [name, value] : kNames) {
    if (status == name) return value;
  }
  return InternalError("the settlement answered status '" + wire::ValidUtf8(status) +
                       "', which this lobby does not know");
}

std::unique_ptr<ReadinessProbe> OpenReadinessProbe(const pg::ConnectionOptions& connection,
                                                   std::chrono::milliseconds timeout) {
  return std::make_unique<PgReadinessProbe>(connection, timeout);
}

Result<std::unique_ptr<SettlementStore>> OpenSettlementStore(const StoreOptions& options) {
  pg::PoolOptions pool;
  pool.connection = options.connection;
  pool.workers = options.pool_size;
  pool.acquire_timeout = options.acquire_timeout;
  for (const auto& [name, text] : kStatements) pool.statements.emplace_back(name, text);
  for (auto& statement : SettleStatements()) pool.statements.push_back(std::move(statement));
  for (auto& statement : LadderStatements()) pool.statements.push_back(std::move(statement));
  auto opened = pg::Pool::Open(std::move(pool));
  if (!opened.ok()) return opened.status();
  return std::unique_ptr<SettlementStore>(
      std::make_unique<PgSettlementStore>(options, std::move(*opened)));
}

}  // namespace verdict::lobby
