#include "lobby/settlement_store.h"

#include <algorithm>
#include <map>
#include <pqxx/pqxx>
#include <random>
#include <sstream>
#include <string_view>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"
#include "common/mutex.h"
#include "lobby/settle_batch_call.h"
#include "proto/wire.h"
#include "sql/migrations.h"

namespace verdict::lobby {
namespace {

// The schema's version and whether the session only reads (a standby, a primary being demoted).
constexpr char kReadinessSql[] =
    "SELECT coalesce(max(version), 0), current_setting('transaction_read_only') = 'on' "
    "FROM verdict_schema_migrations";

// Every statement the lobby runs, prepared on each connection, with "settle_batch"
// (SettleBatchStatement; all but the test-only negative control's in SettleBattles). Nothing is
// ever built by string concatenation of input: arrays travel as array-literal parameters.
constexpr std::pair<const char*, const char*> kStatements[] = {
    {"allocate",
     "SELECT status, busy_player FROM verdict_allocate($1, $2, $3::bigint[], "
     "$4::smallint[])"},
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
    {"player",
     "SELECT player_id, elo, games, wins, losses, draws, in_battle_room FROM players "
     "WHERE player_id = $1"},
    {"receipt_expired_of_node",
     "SELECT EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = $1 "
     "AND node_tag = verdict_node_tag($2))"},
    {"receipt_expired_any", "SELECT EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = $1)"},
    {"room",
     "SELECT b.node_id, (extract(epoch FROM b.allocated_at) * 1000)::bigint, "
     "coalesce((extract(epoch FROM b.released_at) * 1000)::bigint, 0), s.player_id, s.team "
     "FROM battle_rooms b LEFT JOIN battle_room_seats s ON s.room_id = b.room_id "
     "WHERE b.room_id = $1 ORDER BY s.player_id"},
    {"release_rooms_older_than",
     "SELECT verdict_release_rooms_older_than(make_interval(secs => $1), $2)"},
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
    {"sequence_events", "SELECT verdict_sequence_events($1)"},
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
    {"readiness", kReadinessSql},
    // A transaction that writes WAL (a logical message, of no other consequence), so that its
    // commit waits for the synchronous standby (if any) to confirm the WAL up to it. (A
    // transaction id alone writes nothing before the commit, which then does not wait.)
    {"await_replication", "SELECT pg_logical_emit_message(true, 'verdict', 'replication barrier')"},
};

// The settlement, its call built from the parameter list (lobby/settle_batch_call.h); its
// parameters are SettleBatchArgs.
const std::string& SettleBatchStatement() {
  static const std::string statement =
      "SELECT room_id, status, match_id, outcome, settled_at_ms FROM " + SettleBatchPreparedCall();
  return statement;
}

constexpr long kMigrationLockKey = 0x7665726469637400;  // "verdict\0"

// PostgreSQL array literals, built up one element at a time. Text elements are always quoted
// and escaped, so no input can change the array's shape.
class ArrayLiteral {
 public:
  template <typename T>
  void Add(T value) {
    Separate();
    if constexpr (std::is_same_v<T, bool>) {
      out_ << (value ? 't' : 'f');
    } else {
      out_ << value;
    }
  }
  void AddText(const std::string& text) {
    Separate();
    out_ << '"';
    for (char c : text) {
      if (c == '"' || c == '\\') out_ << '\\';
      out_ << c;
    }
    out_ << '"';
  }
  // A bytea element from its hex digits ("\\x…" inside the quotes).
  void AddHexBytes(const std::string& hex) {
    Separate();
    out_ << "\"\\\\x" << hex << '"';
  }
  std::string str() const { return out_.str() + '}'; }

 private:
  void Separate() {
    if (!first_) out_ << ',';
    first_ = false;
  }
  std::ostringstream out_{"{", std::ios::ate};
  bool first_ = true;
};

// A random, non-zero id for one settlement attempt (0 marks receipts written before 004).
int64_t NewAttemptId() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  return static_cast<int64_t>(random() >> 1) | 1;
}

Status CancelledError() {
  return UnavailableError("the request was cancelled: its client went away");
}

// Asks the server to cancel what `conn` runs (a request whose client hung up). Runs on the
// lobby's cancel thread, not the one using `conn`; libpq connects to the server for it, which
// fails while the server is unreachable: that is logged, and the statement runs to its end.
void CancelQuery(pqxx::connection& conn) {
  try {
    conn.cancel_query();
  } catch (const std::exception& e) {
    spdlog::warn("cannot cancel the statement of a request whose client hung up: {}", e.what());
  }
}

const char* OutcomeName(v1::Outcome o) { return o == v1::ABORTED ? "ABORTED" : "SETTLED"; }
v1::Outcome OutcomeFromName(const std::string& s) {
  return s == "ABORTED" ? v1::ABORTED : v1::SETTLED;
}

// What every connection of the lobby runs first: its lock and statement timeouts (0 is none).
std::string SessionSettings(std::chrono::milliseconds lock_timeout,
                            std::chrono::milliseconds statement_timeout) {
  return "SET lock_timeout = " + std::to_string(lock_timeout.count()) +
         "; SET statement_timeout = " + std::to_string(statement_timeout.count());
}

// A fixed set of connections handed out one per call. A connection found broken is dropped
// and re-opened by the next caller, and so are the idle ones: they lead to the same server, which
// is most likely gone (a failover), and each would otherwise fail one more request before it is
// replaced. Each new connection gets the statements and the timeouts.
class ConnectionPool {
 public:
  explicit ConnectionPool(const StoreOptions& options)
      : conninfo_(ConnectionString(options)),
        session_settings_(SessionSettings(options.lock_timeout, options.statement_timeout)),
        free_slots_(options.pool_size),
        timeout_(options.acquire_timeout) {}

  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<pqxx::connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {
      other.pool_ = nullptr;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_) pool_->Return(std::move(conn_));
    }
    pqxx::connection& conn() { return *conn_; }
    bool open() const { return conn_ && conn_->is_open(); }
    // The connection is suspect (its state unknown): close it instead of reusing it.
    void Discard() { conn_.reset(); }
    // The connection was lost: close it and the pool's idle ones.
    void DiscardLost() {
      conn_.reset();
      if (pool_) pool_->CloseIdle();
    }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<pqxx::connection> conn_;
  };

  Result<Lease> Acquire() {
    std::unique_ptr<pqxx::connection> conn;
    {
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      while (free_slots_ <= 0) {
        if (cv_.WaitUntil(deadline)) break;
      }
      if (free_slots_ <= 0) {
        return UnavailableError("database pool exhausted: no connection free within " +
                                std::to_string(timeout_.count()) + " ms");
      }
      --free_slots_;
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!conn || !conn->is_open()) {
      try {
        conn = std::make_unique<pqxx::connection>(conninfo_);
        pqxx::nontransaction(*conn).exec(session_settings_);
        for (const auto& [name, text] : kStatements) conn->prepare(name, text);
        conn->prepare("settle_batch", SettleBatchStatement());
      } catch (const std::exception& e) {
        Return(nullptr);
        spdlog::warn("cannot connect to the database: {}", e.what());
        return UnavailableError("cannot connect to the database");
      }
    }
    return Lease(this, std::move(conn));
  }

 private:
  void CloseIdle() {
    std::vector<std::unique_ptr<pqxx::connection>> closing;
    {
      MutexLock lock(&mu_);
      closing.swap(idle_);
    }
  }

  void Return(std::unique_ptr<pqxx::connection> conn) {
    {
      MutexLock lock(&mu_);
      if (conn) idle_.push_back(std::move(conn));
      ++free_slots_;
    }
    cv_.Signal();
  }

  const std::string conninfo_;
  const std::string session_settings_;
  Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<std::unique_ptr<pqxx::connection>> idle_ GUARDED_BY(mu_);
  int free_slots_ GUARDED_BY(mu_);
  const std::chrono::milliseconds timeout_;
};

// Whether a statement that failed with `sqlstate` may succeed if run again unchanged: the
// connection or the server went away (class 08, 57P01-57P03), the transaction lost a race
// (40001 serialization failure, 40P01 deadlock), the server ran short (class 53), it waited
// too long or was stopped (55P03 is the lock timeout on a room another session holds, 57014 the
// statement timeout or the cancel of a request whose client hung up), or the server only reads
// (25006: a standby, or a primary being demoted; after a failover a new connection finds the
// new primary). Anything else (a data exception, a constraint violation, a missing function)
// fails the same way every time. An empty SQLSTATE (a failure on the client's side) is not
// known to be deterministic: retryable. (libpqxx 6 throws class 40 and some of 08 and 53 as
// other exceptions; RunDb sorts those.)
bool RetryableSqlState(const std::string& sqlstate) {
  if (sqlstate.empty()) return true;
  const std::string_view s = sqlstate;
  return s.starts_with("08") || s.starts_with("53") || s == "57P01" || s == "57P02" ||
         s == "57P03" || s == "40001" || s == "40P01" || s == "55P03" || s == "57014" ||
         s == "25006";
}

// Runs `body(lease)` translating libpqxx failures: a lost connection, or an SQL error that a
// retry may fix (RetryableSqlState), is UNAVAILABLE; any other error is INTERNAL, since the same
// call would fail again. The connection is not reused after either.
template <typename T, typename F>
Result<T> RunDb(ConnectionPool& pool, const char* what, F body) {
  auto lease = pool.Acquire();
  if (!lease.ok()) return lease.status();
  try {
    return body(*lease);
  } catch (const pqxx::broken_connection& e) {
    lease->DiscardLost();
    spdlog::warn("{}: database connection lost: {}", what, e.what());
    return UnavailableError(std::string(what) + ": database connection lost");
  } catch (const pqxx::transaction_rollback& e) {
    // libpqxx 6 reports class 40 apart from sql_error, without its SQLSTATE. A serialization
    // failure, a deadlock or a statement of unknown completion may succeed when run again (the
    // receipt makes a repeat harmless); another rollback, such as a deferred constraint
    // violated at commit (40002), fails the same way.
    lease->Discard();
    const bool retry = dynamic_cast<const pqxx::serialization_failure*>(&e) ||
                       dynamic_cast<const pqxx::deadlock_detected*>(&e) ||
                       dynamic_cast<const pqxx::statement_completion_unknown*>(&e);
    if (retry) {
      spdlog::warn("{}: transaction rolled back: {}", what, e.what());
      return UnavailableError(std::string(what) + ": transaction rolled back, retry it");
    }
    spdlog::error("{}: transaction rolled back, a retry would fail the same way: {}", what,
                  e.what());
    return InternalError(std::string(what) + ": transaction rolled back");
  } catch (const pqxx::sql_error& e) {
    const bool lost = !lease->open();
    lost ? lease->DiscardLost() : lease->Discard();
    if (lost || RetryableSqlState(e.sqlstate())) {
      spdlog::warn("{}: SQL error {}: {}", what, e.sqlstate(), e.what());
      return UnavailableError(std::string(what) + ": database error " + e.sqlstate());
    }
    spdlog::error("{}: SQL error {}, a retry would fail the same way: {}", what, e.sqlstate(),
                  e.what());
    return InternalError(std::string(what) + ": database error " + e.sqlstate());
  } catch (const std::exception& e) {
    // Not an error the server reported: a connection that broke in an unexpected way is
    // retried, anything else (a row that does not convert, a misuse of libpqxx) is a bug.
    const bool lost = !lease->open();
    lost ? lease->DiscardLost() : lease->Discard();
    spdlog::error("{}: {}", what, e.what());
    if (lost) return UnavailableError(std::string(what) + ": database connection lost");
    return InternalError(std::string(what) + ": " + e.what());
  }
}

v1::SettlementReceipt ReceiptFromRow(const pqxx::row& row) {
  v1::SettlementReceipt r;
  r.set_room_id(row[0].as<uint64_t>());
  r.set_match_id(row[1].as<uint64_t>());
  r.set_outcome(OutcomeFromName(row[2].as<std::string>()));
  r.set_settled_at_ms(row[3].as<int64_t>());
  return r;
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// The verdict of kReadinessSql's row: OK, UNAVAILABLE for a session that only reads,
// FAILED_PRECONDITION for a schema this binary does not know.
Status ReadinessOf(const pqxx::row& row) {
  if (row[1].as<bool>()) {
    return UnavailableError(
        "the database only reads (a standby, or a primary being demoted): no settlement can "
        "commit; a conninfo naming every node with target_session_attrs=read-write finds the "
        "primary");
  }
  const int version = row[0].as<int>();
  if (version != ExpectedSchemaVersion()) {
    return FailedPreconditionError("database schema is version " + std::to_string(version) +
                                   ", this lobby needs " + std::to_string(ExpectedSchemaVersion()) +
                                   "; run `verdict-lobby migrate`");
  }
  return Status::Ok();
}

class PgSettlementStore final : public SettlementStore {
 public:
  explicit PgSettlementStore(const StoreOptions& options) : options_(options), pool_(options) {}

  Result<AllocateOutcome> AllocateRoom(const v1::RoomAllocation& a) override {
    std::ostringstream ids, teams;
    ids << '{';
    teams << '{';
    for (int i = 0; i < a.seats_size(); ++i) {
      ids << (i ? "," : "") << a.seats(i).player_id();
      teams << (i ? "," : "") << a.seats(i).team();
    }
    ids << '}';
    teams << '}';
    auto allocated = RunDb<AllocateOutcome>(pool_, "allocate", [&](ConnectionPool::Lease& lease) {
      pqxx::work tx(lease.conn());
      pqxx::row row =
          tx.exec_prepared1("allocate", a.room_id(), a.node_id(), ids.str(), teams.str());
      auto status = AllocateStatusFromSql(row[0].as<std::string>());
      if (!status.ok()) {
        spdlog::error("room={}: {}; answering INTERNAL", a.room_id(), status.status().message());
        return Result<AllocateOutcome>(status.status());
      }
      // Only an allocation changes anything: a refused one (a busy player) must not keep the
      // new players it created before it found the busy one, so it rolls back.
      if (*status == AllocateStatus::kAllocated) tx.commit();
      return Result<AllocateOutcome>(AllocateOutcome{*status, row[1].as<uint64_t>()});
    });
    if (!allocated.ok()) return UnlessNotReady(allocated.status());
    return allocated;
  }

  std::vector<Result<SettleOutcome>> SettleBattles(const std::vector<SettleRequest>& requests,
                                                   bool wait, Cancellation* cancel) override {
    ArrayLiteral rooms, nodes, outcomes, winners, suspects, ended, replays, reasons, prints;
    ArrayLiteral player_rooms, ids, teams, kills, deaths, assists, scores, disconnected;
    for (const SettleRequest& q : requests) {
      const v1::BattleResult& r = *q.result;
      rooms.Add(r.room_id());
      nodes.AddText(q.node_id);
      outcomes.AddText(OutcomeName(r.outcome()));
      winners.Add(r.winner_team());
      suspects.Add(r.suspect());
      ended.Add(r.ended_at_ms());
      replays.AddText(r.replay_path());
      reasons.AddText(r.abort_reason());
      prints.AddHexBytes(Hex(q.fingerprint));
      for (const v1::PlayerResult& p : r.players()) {
        player_rooms.Add(r.room_id());
        ids.Add(p.player_id());
        teams.Add(p.team());
        kills.Add(p.kills());
        deaths.Add(p.deaths());
        assists.Add(p.assists());
        scores.Add(p.score());
        disconnected.Add(p.disconnected());
      }
    }
    // A random id for this call, stored in every receipt it writes: if the connection is lost
    // during COMMIT, the receipts read back say which rooms this call committed.
    const int64_t attempt_id = NewAttemptId();
    SettleBatchArgs args;
    args[SettleBatchArg("p_room_ids")] = rooms.str();
    args[SettleBatchArg("p_node_ids")] = nodes.str();
    args[SettleBatchArg("p_outcomes")] = outcomes.str();
    args[SettleBatchArg("p_winner_teams")] = winners.str();
    args[SettleBatchArg("p_suspects")] = suspects.str();
    args[SettleBatchArg("p_ended_at_ms")] = ended.str();
    args[SettleBatchArg("p_replay_paths")] = replays.str();
    args[SettleBatchArg("p_abort_reasons")] = reasons.str();
    args[SettleBatchArg("p_fingerprints")] = prints.str();
    args[SettleBatchArg("p_player_rooms")] = player_rooms.str();
    args[SettleBatchArg("p_player_ids")] = ids.str();
    args[SettleBatchArg("p_teams")] = teams.str();
    args[SettleBatchArg("p_kills")] = kills.str();
    args[SettleBatchArg("p_deaths")] = deaths.str();
    args[SettleBatchArg("p_assists")] = assists.str();
    args[SettleBatchArg("p_scores")] = scores.str();
    args[SettleBatchArg("p_disconnected")] = disconnected.str();
    args[SettleBatchArg("p_k_factor")] = std::to_string(options_.k_factor);
    args[SettleBatchArg("p_attempt_id")] = std::to_string(attempt_id);
    args[SettleBatchArg("p_wait")] = wait ? "true" : "false";
    bool commit_unknown = false;
    using Outcomes = std::vector<Result<SettleOutcome>>;
    auto settled =
        RunDb<Outcomes>(pool_, "settle", [&](ConnectionPool::Lease& lease) -> Result<Outcomes> {
          Outcomes out;
          bool lost = false;
          {
            // Armed only around the statement: a lost connection is closed after it (below),
            // so a cancel never reaches a connection that is gone.
            Cancellation::Scope cancellable(cancel, [&conn = lease.conn()] { CancelQuery(conn); });
            if (!cancellable.ok()) return CancelledError();
            if (options_.unsafe_release_before_commit_for_test) {
              pqxx::nontransaction early(lease.conn());
              early.exec_params(
                  "UPDATE players SET in_battle_room = 0 WHERE in_battle_room = ANY "
                  "($1::bigint[])",
                  rooms.str());
            }
            const auto settle = [&](pqxx::transaction_base& tx) {
              return FromSettleRows(
                  tx.exec_prepared("settle_batch", pqxx::prepare::make_dynamic_params(args)));
            };
            if (CheckFailpoint("settle.before_commit") == FailAction::kError) {
              // Injected fault: the same settlement in an explicit transaction whose backend
              // dies before COMMIT and takes the transaction with it: a lost connection, a 503.
              pqxx::work tx(lease.conn());
              settle(tx);
              tx.exec("SELECT pg_terminate_backend(pg_backend_pid())");
            }
            // One round trip: the function call is its own transaction, committed before it
            // returns.
            try {
              pqxx::nontransaction tx(lease.conn());
              out = settle(tx);
            } catch (const pqxx::broken_connection& e) {
              // Lost while the statement ran: it may or may not have committed.
              spdlog::warn("settlement of {} room(s) lost its connection, outcome unknown: {}",
                           requests.size(), e.what());
              lost = true;
            }
          }
          if (lost) {
            lease.DiscardLost();
            commit_unknown = true;
            return out;
          }
          if (out.size() != requests.size()) {
            return InternalError("the settlement returned " + std::to_string(out.size()) +
                                 " rows for " + std::to_string(requests.size()) + " rooms");
          }
          const bool any_settled = std::any_of(out.begin(), out.end(), [](const auto& o) {
            return o.ok() && o->status == SettleStatus::kSettled;
          });
          if (any_settled && CheckFailpoint("settle.commit_unknown") == FailAction::kError) {
            // As if the connection dropped right after COMMIT was sent: the reply is lost.
            lease.Discard();
            commit_unknown = true;
          }
          return out;
        });
    if (commit_unknown) return ResolveUnknownCommit(requests, attempt_id);
    if (!settled.ok()) {
      return {requests.size(), Result<SettleOutcome>(UnlessNotReady(settled.status()))};
    }
    std::vector<Result<SettleOutcome>> answers = std::move(*settled);
    // Rows this call settled were confirmed by its own commit, unless a cancel reached it: a
    // cancelled wait for the synchronous standby still commits locally, with only a warning. The
    // other rows were read from receipts that earlier transactions wrote.
    const bool cancelled = cancel != nullptr && cancel->cancelled();
    AwaitReplication(answers, [cancelled](const SettleOutcome& o) {
      return (cancelled && o.status == SettleStatus::kSettled) ||
             o.status == SettleStatus::kDuplicate || o.status == SettleStatus::kOutcomeConflict ||
             o.status == SettleStatus::kIdempotencyMismatch ||
             o.status == SettleStatus::kOriginalExpired;
    });
    return answers;
  }

  Result<std::optional<v1::SettlementReceipt>> GetReceipt(
      uint64_t room_id, const std::optional<std::string>& node_id) override {
    auto receipt = RunDb<std::optional<v1::SettlementReceipt>>(
        pool_, "get receipt", [&](ConnectionPool::Lease& lease) {
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
    return RunDb<bool>(pool_, "get receipt", [&](ConnectionPool::Lease& lease) {
      pqxx::nontransaction tx(lease.conn());
      const pqxx::row row = node_id
                                ? tx.exec_prepared1("receipt_expired_of_node", room_id, *node_id)
                                : tx.exec_prepared1("receipt_expired_any", room_id);
      return row[0].as<bool>();
    });
  }

  Result<std::optional<AllocatedRoom>> GetRoom(uint64_t room_id) override {
    return RunDb<std::optional<AllocatedRoom>>(pool_, "get room", [&](ConnectionPool::Lease& l) {
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
        seat.set_player_id(row[3].as<uint64_t>());
        seat.set_team(row[4].as<uint32_t>());
      }
      return std::optional<AllocatedRoom>(std::move(room));
    });
  }

  Result<ReleaseOutcome> ReleaseRoom(uint64_t room_id) override {
    return RunDb<ReleaseOutcome>(pool_, "release room", [&](ConnectionPool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = tx.exec_prepared1("release_room", room_id);
      return ReleaseOutcome{row[0].as<std::string>() == "released", row[1].as<int64_t>(),
                            row[2].as<uint32_t>()};
    });
  }

  Result<int> ReleaseRoomsOlderThan(int64_t older_than_s, int limit) override {
    return RunDb<int>(pool_, "release rooms", [&](ConnectionPool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return tx.exec_prepared1("release_rooms_older_than", older_than_s, limit)[0].as<int>();
    });
  }

  Result<double> OldestUnsettledAllocationAge() override {
    return RunDb<double>(pool_, "oldest allocation", [&](ConnectionPool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return tx.exec_prepared1("oldest_unsettled")[0].as<double>();
    });
  }

  Result<std::optional<v1::Player>> GetPlayer(uint64_t player_id) override {
    auto player =
        RunDb<std::optional<v1::Player>>(pool_, "get player", [&](ConnectionPool::Lease& lease) {
          pqxx::nontransaction tx(lease.conn());
          pqxx::result rows = tx.exec_prepared("player", player_id);
          if (rows.empty()) return std::optional<v1::Player>();
          v1::Player p;
          p.set_player_id(rows[0][0].as<uint64_t>());
          p.set_elo(rows[0][1].as<int32_t>());
          p.set_games(rows[0][2].as<uint32_t>());
          p.set_wins(rows[0][3].as<uint32_t>());
          p.set_losses(rows[0][4].as<uint32_t>());
          p.set_draws(rows[0][5].as<uint32_t>());
          p.set_in_battle_room(rows[0][6].as<uint64_t>());
          return std::optional<v1::Player>(p);
        });
    if (!player.ok()) return UnlessNotReady(player.status());
    return player;
  }

  Result<int> SequenceEvents(int limit) override {
    return RunDb<int>(pool_, "sequence events", [&](ConnectionPool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return std::max(0, tx.exec_prepared1("sequence_events", limit)[0].as<int>());
    });
  }

  Result<FeedPage> EventsAfter(int64_t after, const std::optional<std::string>& node_id,
                               size_t limit) override {
    return RunDb<FeedPage>(pool_, "events", [&](ConnectionPool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      return PageFromRows(node_id ? tx.exec_prepared("events_page_node", after, limit, *node_id)
                                  : tx.exec_prepared("events_page_all", after, limit),
                          after, limit);
    });
  }

  Result<FeedState> GetFeedState(const std::optional<std::string>& node_id) override {
    return RunDb<FeedState>(pool_, "events", [&](ConnectionPool::Lease& l) {
      pqxx::nontransaction tx(l.conn());
      const pqxx::row row = node_id ? tx.exec_prepared1("feed_state_node", *node_id)
                                    : tx.exec_prepared1("feed_state_all");
      return FeedState{row[0].as<std::string>(), row[1].as<int64_t>(), row[2].as<int64_t>(),
                       row[3].as<int64_t>()};
    });
  }

  Result<std::vector<PendingRoom>> RoomsWithoutReceipt(int64_t older_than_s) override {
    return RunDb<std::vector<PendingRoom>>(pool_, "reconcile", [&](ConnectionPool::Lease& l) {
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
    return RunDb<std::vector<ReceiptWithoutEvent>>(
        pool_, "reconcile", [&](ConnectionPool::Lease& l) {
          pqxx::nontransaction tx(l.conn());
          std::vector<ReceiptWithoutEvent> receipts;
          for (const auto& row : tx.exec_prepared("receipts_without_event", older_than_s)) {
            receipts.push_back({row[0].as<uint64_t>(), row[1].as<std::string>(),
                                row[2].as<uint64_t>(), row[3].as<int64_t>()});
          }
          return receipts;
        });
  }

 private:
  // Whether the database behind the pool is the one this lobby expects: ReadinessOf on a pooled
  // connection. A connection found lost (opened before a failover, say) is replaced, and the
  // check runs again on a new one.
  Status CheckReady() {
    Status verdict;
    const auto check = [&] {
      return RunDb<bool>(pool_, "readiness", [&](ConnectionPool::Lease& l) {
        pqxx::nontransaction tx(l.conn());
        verdict = ReadinessOf(tx.exec_prepared1("readiness"));
        return true;
      });
    };
    auto ran = check();
    if (!ran.ok() && ran.status().code() == StatusCode::kUnavailable) ran = check();
    return ran.ok() ? verdict : ran.status();
  }

  // One outcome per row; a row whose status this binary does not know is INTERNAL (logged by
  // SettleStatusFromSql).
  static std::vector<Result<SettleOutcome>> FromSettleRows(const pqxx::result& rows) {
    std::vector<Result<SettleOutcome>> outcomes;
    for (const auto& row : rows) {
      auto status = SettleStatusFromSql(row[1].as<std::string>());
      if (!status.ok()) {
        spdlog::error("room={}: {}; answering INTERNAL", row[0].as<uint64_t>(),
                      status.status().message());
        outcomes.push_back(status.status());
        continue;
      }
      SettleOutcome out;
      out.status = *status;
      out.receipt.set_room_id(row[0].as<uint64_t>());
      out.receipt.set_match_id(row[2].as<uint64_t>());
      out.receipt.set_outcome(OutcomeFromName(row[3].as<std::string>()));
      out.receipt.set_settled_at_ms(row[4].as<int64_t>());
      out.receipt.set_duplicate(out.status == SettleStatus::kDuplicate);
      outcomes.push_back(std::move(out));
    }
    return outcomes;
  }

  // Outcomes read from a receipt (those `from_receipt` picks) are answered only once that
  // receipt is on the synchronous standby, if there is one. The transaction that wrote it may
  // have committed on the primary alone: its own wait for the standby was cut short when its
  // client went away, its session was terminated or its lobby died. A failover would then lose
  // the receipt the answer vouches for. The commit of a transaction that writes WAL (the
  // "await_replication" statement's logical message) waits until the standby confirms all WAL
  // up to it, earlier commits included; without a synchronous standby it returns at once. If it
  // fails, those outcomes become UNAVAILABLE: the retry asks again.
  template <typename Pick>
  void AwaitReplication(std::vector<Result<SettleOutcome>>& outcomes, Pick from_receipt) {
    const auto read_from_receipt = [&](const Result<SettleOutcome>& o) {
      return o.ok() && from_receipt(*o);
    };
    if (std::none_of(outcomes.begin(), outcomes.end(), read_from_receipt)) return;
    auto confirmed = RunDb<bool>(pool_, "await replication", [&](ConnectionPool::Lease& lease) {
      pqxx::nontransaction tx(lease.conn());
      tx.exec_prepared("await_replication");
      return true;
    });
    if (confirmed.ok()) return;
    for (auto& o : outcomes) {
      if (read_from_receipt(o)) {
        o = UnavailableError("the receipt's replication is not confirmed: " +
                             confirmed.status().message());
      }
    }
  }

  // `failed` as it is, unless it is INTERNAL while the database is not the one this lobby
  // expects (not migrated yet, say): then the error is the deployment's, not the results', and
  // they wait (UNAVAILABLE) instead of being refused for good.
  Status UnlessNotReady(const Status& failed) {
    if (failed.code() != StatusCode::kInternal) return failed;
    Status ready = CheckReady();
    if (ready.ok()) return failed;
    return UnavailableError(failed.message() + " (the database is not ready: " + ready.message() +
                            ")");
  }

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

  // The COMMIT's fate is unknown: ask the database on a fresh connection, which after a failover
  // reaches the new primary. The receipts are the truth, room by room. A receipt this call wrote
  // (its attempt id) means settled by this very request, not a duplicate; one written earlier is
  // what it would have been answered anyway (duplicate, or a conflict); no receipt means the
  // transaction is gone and the room must be retried (UNAVAILABLE), never a 2xx.
  std::vector<Result<SettleOutcome>> ResolveUnknownCommit(
      const std::vector<SettleRequest>& requests, int64_t attempt_id) {
    ArrayLiteral rooms;
    for (const SettleRequest& q : requests) rooms.Add(q.result->room_id());
    auto found = RunDb<pqxx::result>(pool_, "resolve commit", [&](ConnectionPool::Lease& lease) {
      pqxx::nontransaction tx(lease.conn());
      return tx.exec_prepared("receipts_of_rooms", rooms.str());
    });
    if (!found.ok()) return {requests.size(), Result<SettleOutcome>(found.status())};
    std::vector<Result<SettleOutcome>> outcomes;
    for (const SettleRequest& q : requests) {
      const v1::BattleResult& r = *q.result;
      std::optional<pqxx::row> receipt;  // a copy: the loop's row is the iterator itself
      for (const auto& row : *found) {
        if (row[0].as<uint64_t>() == r.room_id() && row[6].as<std::string>() == q.node_id) {
          receipt = row;
        }
      }
      if (!receipt) {
        spdlog::warn("room={}: unknown commit did not land; asking for a retry", r.room_id());
        outcomes.push_back(UnavailableError("settlement commit outcome unknown and no receipt"));
        continue;
      }
      SettleOutcome out;
      out.receipt = ReceiptFromRow(*receipt);
      const bool ours = (*receipt)[5].as<int64_t>() == attempt_id;
      out.status = ours                                   ? SettleStatus::kSettled
                   : out.receipt.outcome() != r.outcome() ? SettleStatus::kOutcomeConflict
                   : (*receipt)[4].as<std::string>() != Hex(q.fingerprint)
                       ? SettleStatus::kIdempotencyMismatch
                       : SettleStatus::kDuplicate;
      out.receipt.set_duplicate(out.status == SettleStatus::kDuplicate);
      spdlog::info("room={}: unknown commit resolved from the receipt (match {}, {})", r.room_id(),
                   out.receipt.match_id(), ours ? "this attempt's" : "an earlier attempt's");
      outcomes.push_back(std::move(out));
    }
    // Even this attempt's receipt: its commit's wait for the standby is what was cut short.
    AwaitReplication(outcomes, [](const SettleOutcome&) { return true; });
    return outcomes;
  }

  const StoreOptions options_;
  ConnectionPool pool_;
};

// The readiness probe's connection and its one transaction. Its SQL errors keep the connection
// (the transaction is rolled back); a lost connection is opened again by the next probe.
class PgReadinessProbe final : public ReadinessProbe {
 public:
  PgReadinessProbe(const StoreOptions& options, std::chrono::milliseconds timeout)
      : conninfo_(ConnectionString(options)),
        session_settings_(SessionSettings(timeout, timeout)) {}

  Status Probe() override {
    try {
      if (!conn_ || !conn_->is_open()) {
        conn_.reset();
        conn_ = std::make_unique<pqxx::connection>(conninfo_);
        pqxx::nontransaction(*conn_).exec(session_settings_);
      }
      pqxx::work tx(*conn_);
      VERDICT_RETURN_IF_ERROR(ReadinessOf(tx.exec1(kReadinessSql)));
      // A settlement inserts rows, which take new pages as its tables grow; so does this, into
      // a table that lives for the transaction and is empty, so its one row needs a fresh page.
      // On a full data disk it fails as the settlements do (53100, disk full). Its commit waits
      // for a synchronous standby, if there is one, as theirs do.
      tx.exec("CREATE TEMP TABLE verdict_readiness_probe (probe text) ON COMMIT DROP");
      tx.exec("INSERT INTO verdict_readiness_probe VALUES ('probe')");
      tx.commit();
      last_logged_.clear();
      return Status::Ok();
    } catch (const pqxx::broken_connection& e) {
      conn_.reset();
      Log(std::string("cannot reach the database: ") + e.what());
      return UnavailableError("cannot reach the database");
    } catch (const pqxx::sql_error& e) {
      Log("SQL error " + e.sqlstate() + ": " + e.what());
      if (e.sqlstate() == "42P01") {
        return FailedPreconditionError(
            "the database has no verdict schema; run `verdict-lobby migrate`");
      }
      return UnavailableError("the database cannot commit a settlement now: SQLSTATE " +
                              e.sqlstate());
    } catch (const std::exception& e) {
      conn_.reset();
      Log(e.what());
      return UnavailableError("cannot reach the database");
    }
  }

 private:
  // The detail of a failed probe (libpq's text), logged once while it stays the same.
  void Log(const std::string& detail) {
    if (detail == last_logged_) return;
    spdlog::warn("readiness probe: {}", detail);
    last_logged_ = detail;
  }

  const std::string conninfo_;
  const std::string session_settings_;
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

std::unique_ptr<ReadinessProbe> OpenReadinessProbe(const StoreOptions& options,
                                                   std::chrono::milliseconds timeout) {
  return std::make_unique<PgReadinessProbe>(options, timeout);
}

Result<std::unique_ptr<SettlementStore>> OpenSettlementStore(const StoreOptions& options) {
  if (options.pool_size < 1) return InvalidArgumentError("the database pool needs a connection");
  return std::unique_ptr<SettlementStore>(std::make_unique<PgSettlementStore>(options));
}

std::string ConnectionString(const StoreOptions& options) {
  const std::string& user = options.conninfo;
  const bool uri = user.starts_with("postgresql://") || user.starts_with("postgres://");
  std::string ours = "connect_timeout=5";
  if (options.keepalive_idle_s > 0) {
    ours += " keepalives=1 keepalives_idle=" + std::to_string(options.keepalive_idle_s) +
            " keepalives_interval=" + std::to_string(options.keepalive_interval_s) +
            " keepalives_count=" + std::to_string(options.keepalive_count);
  }
  if (!uri) return ours + (user.empty() ? "" : " " + user);  // the user's later words win
  // A URI takes parameters after '?'; add ours only where the user set none of them.
  if (user.find("keepalives") != std::string::npos ||
      user.find("connect_timeout") != std::string::npos) {
    return user;
  }
  std::string query = ours;
  for (char& c : query) c = c == ' ' ? '&' : c;
  return user + (user.find('?') == std::string::npos ? "?" : "&") + query;
}

int ExpectedSchemaVersion() { return sql::Migrations().back().version; }

Result<MigrateReport> Migrate(const std::string& conninfo, const PartitionOptions& partitions) {
  try {
    pqxx::connection conn(conninfo);
    pqxx::work tx(conn);
    tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLockKey) + ")");
    tx.exec(
        "CREATE TABLE IF NOT EXISTS verdict_schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    tx.exec(
        "CREATE TABLE IF NOT EXISTS verdict_schema_functions ("
        " name text PRIMARY KEY, sha256 text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    int current = 0;
    for (const auto& row : tx.exec("SELECT version, name FROM verdict_schema_migrations")) {
      const int version = row[0].as<int>();
      current = std::max(current, version);
      if (version > ExpectedSchemaVersion()) continue;
      const auto known =
          std::find_if(sql::Migrations().begin(), sql::Migrations().end(),
                       [&](const sql::Migration& m) { return m.version == version; });
      if (known == sql::Migrations().end() || row[1].as<std::string>() != known->name) {
        return FailedPreconditionError(
            "the database's migration " + std::to_string(version) + " is '" +
            row[1].as<std::string>() +
            "', which this binary does not have: a schema of a pre-release build, which no "
            "migration leads from; make the database anew");
      }
    }
    if (current > ExpectedSchemaVersion()) {
      return FailedPreconditionError("database schema is version " + std::to_string(current) +
                                     ", newer than the " + std::to_string(ExpectedSchemaVersion()) +
                                     " this binary knows; refusing to touch it");
    }
    MigrateReport report;
    for (const auto& m : sql::Migrations()) {
      if (m.version <= current) continue;
      tx.exec(m.text);
      tx.exec_params("INSERT INTO verdict_schema_migrations (version, name) VALUES ($1, $2)",
                     m.version, m.name);
      ++report.migrations;
    }
    // The functions after the tables they use; each file again whenever its text changed.
    std::map<std::string, std::string> applied;
    for (const auto& row : tx.exec("SELECT name, sha256 FROM verdict_schema_functions")) {
      applied[row[0].as<std::string>()] = row[1].as<std::string>();
    }
    for (const auto& f : sql::Functions()) {
      const auto found = applied.find(f.name);
      if (found != applied.end() && found->second == f.checksum) continue;
      tx.exec(f.text);
      tx.exec_params(
          "INSERT INTO verdict_schema_functions (name, sha256) VALUES ($1, $2) "
          "ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()",
          f.name, f.checksum);
      ++report.functions;
    }
    // A file no longer embedded: its function, if dropped by a migration, is applied again
    // should the file come back.
    ArrayLiteral names;
    for (const auto& f : sql::Functions()) names.AddText(f.name);
    tx.exec_params("DELETE FROM verdict_schema_functions WHERE name <> ALL ($1::text[])",
                   names.str());
    tx.commit();
    // Partitions for the first rows, so that they do not wait in the DEFAULT partition for
    // `serve` to make them (which it retries, should this fail).
    if (auto made = EnsurePartitions(conninfo, partitions, std::chrono::seconds(5)); !made.ok()) {
      spdlog::warn("migrate: no partitions made ahead yet: {}", made.status().ToString());
    }
    return report;
  } catch (const pqxx::broken_connection& e) {
    return UnavailableError(std::string("cannot connect to the database: ") + e.what());
  } catch (const std::exception& e) {
    return InternalError(std::string("migration failed: ") + e.what());
  }
}

}  // namespace verdict::lobby
