#include "lobby/settle_transaction.h"

#include <algorithm>
#include <optional>
#include <random>

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"
#include "common/log_rate_limit.h"
#include "lobby/modes.h"
#include "lobby/pg/binary_array.h"
#include "lobby/pg/errors.h"
#include "lobby/pg/run.h"
#include "lobby/pg_statuses.h"
#include "lobby/settle_calls.h"
#include "lobby/settled_event.h"
#include "lobby/settlement_ratings.h"
#include "proto/validation.h"

namespace verdict::lobby {
namespace {

constexpr char kPrepareStatement[] = "settle_prepare";
constexpr char kWriteStatement[] = "settle_write";
// A write's arguments above this many bytes retire their connection after the transaction
// (Pool::Lease::Retire): libpq would keep its output buffer at twice their size, for every
// connection that ever sent such a call. 256 rooms of 200 players make some 25 MB, and each DB
// worker kept 32 MiB (verdict-bench lobby-memory); 256 rooms of 10 make about 1.2 MB.
constexpr size_t kRetireConnectionAboveBytes = size_t{4} << 20;

// A random, non-zero id for one settlement attempt, written into every receipt it writes: if the
// connection is lost during COMMIT, the receipts read back say which rooms this attempt committed.
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
    static LogRateLimit limit(RepeatedFaultLimit());
    LogLimited(*spdlog::default_logger(), limit, spdlog::level::warn,
               "cannot cancel the statement of a request whose client hung up: {}", e.what());
  }
}

const char* OutcomeName(v1::Outcome o) { return o == v1::ABORTED ? "ABORTED" : "SETTLED"; }
v1::Outcome OutcomeFromName(const std::string& s) {
  return s == "ABORTED" ? v1::ABORTED : v1::SETTLED;
}

// A call's arguments as libpqxx sends them in binary: each copied once, into a binarystring.
template <size_t N>
std::vector<pqxx::binarystring> BinaryParams(const std::array<std::string, N>& args) {
  std::vector<pqxx::binarystring> params;
  params.reserve(N);
  for (const std::string& a : args) params.emplace_back(a.data(), a.size());
  return params;
}

std::string_view View(const pqxx::field& field) { return {field.c_str(), field.size()}; }

// What verdict_settle_prepare said of one room: its status and, for a status read from a
// receipt, that receipt; for a room to settle, its mode, the mode's system, and the match id and
// time the write is to record.
struct RoomRow {
  std::string status;
  uint64_t match_id = 0;
  std::string outcome;
  int64_t settled_at_ms = 0;
  std::string mode;
  const rating::RatingSystem* system = nullptr;
  bool rated = true;
};

// What verdict_settle_prepare read: every room, in request order; the rooms to settle, by their
// index in `rooms`; and the seats of those rooms.
struct Prepared {
  std::vector<RoomRow> rooms;
  std::vector<size_t> settle;
  std::vector<SeatRatings> seats;
};

// The columns of one rating in verdict_settle_prepare's result.
struct RatingColumns {
  pqxx::row::size_type value, deviation, volatility;
};

// verdict_settle_prepare's columns (sql/functions/verdict_settle_prepare.sql), each found by its
// name once per result. A room's row has no player_id; a seat's row is its room id, its player
// and the player's two ratings.
struct PrepareColumns {
  explicit PrepareColumns(const pqxx::result& r)
      : room_id(r.column_number("room_id")),
        status(r.column_number("status")),
        match_id(r.column_number("match_id")),
        outcome(r.column_number("outcome")),
        settled_at_ms(r.column_number("settled_at_ms")),
        mode(r.column_number("mode")),
        system(r.column_number("system")),
        model(r.column_number("model")),
        parameters(r.column_number("parameters")),
        rated(r.column_number("rated")),
        player_id(r.column_number("player_id")),
        current{r.column_number("rating"), r.column_number("deviation"),
                r.column_number("volatility")},
        allocation{r.column_number("rated_rating"), r.column_number("rated_deviation"),
                   r.column_number("rated_volatility")},
        idle_since_ms(r.column_number("idle_since_ms")) {}
  pqxx::row::size_type room_id, status, match_id, outcome, settled_at_ms, mode, system, model,
      parameters, rated, player_id;
  RatingColumns current, allocation;
  pqxx::row::size_type idle_since_ms;
};

// The rating in `columns` of `row`, or none. A seat recorded before ratings had deviations
// (migration 003) has a value only: its deviation and volatility are 0, Elo's.
std::optional<rating::Rating> RatingIn(const pqxx::row& row, const RatingColumns& columns) {
  if (row[columns.value].is_null()) return std::nullopt;
  const auto or_zero = [&row](pqxx::row::size_type at) {
    return row[at].is_null() ? 0.0 : row[at].as<double>();
  };
  return rating::Rating{row[columns.value].as<double>(), or_zero(columns.deviation),
                        or_zero(columns.volatility)};
}

SeatRatings SeatIn(const pqxx::row& row, const PrepareColumns& c) {
  return {row[c.room_id].as<uint64_t>(), row[c.player_id].as<std::string>(),
          RatingIn(row, c.current), RatingIn(row, c.allocation),
          row[c.idle_since_ms].is_null()
              ? std::nullopt
              : std::optional<int64_t>(row[c.idle_since_ms].as<int64_t>())};
}

// A room's row, but its system.
RoomRow RoomIn(const pqxx::row& row, const PrepareColumns& c) {
  RoomRow room;
  room.status = row[c.status].as<std::string>();
  if (!row[c.match_id].is_null()) room.match_id = row[c.match_id].as<uint64_t>();
  if (!row[c.outcome].is_null()) room.outcome = row[c.outcome].as<std::string>();
  if (!row[c.settled_at_ms].is_null()) room.settled_at_ms = row[c.settled_at_ms].as<int64_t>();
  if (room.status == kSettleToWrite) {
    room.mode = row[c.mode].as<std::string>();
    room.rated = row[c.rated].as<bool>();
  }
  return room;
}

// The rows of verdict_settle_prepare for a call of `requests` rooms, each room to settle with its
// mode's system; INTERNAL for a mode this lobby cannot rate by, or a count of rooms that is not
// the call's.
Result<Prepared> ReadPrepared(const pqxx::result& read, size_t requests, RatingSystems& systems) {
  const PrepareColumns columns(read);
  Prepared out;
  out.rooms.reserve(requests);
  out.seats.reserve(read.size());  // a row a seat, but for the rooms' own
  for (const auto& row : read) {
    if (!row[columns.player_id].is_null()) {
      out.seats.push_back(SeatIn(row, columns));
      continue;
    }
    RoomRow room = RoomIn(row, columns);
    if (room.status == kSettleToWrite) {
      auto system = systems.Of(View(row[columns.system]), View(row[columns.model]),
                               View(row[columns.parameters]));
      if (!system.ok()) return system.status();
      room.system = *system;
      out.settle.push_back(out.rooms.size());
    }
    out.rooms.push_back(std::move(room));
  }
  if (out.rooms.size() != requests) {
    return InternalError("the settlement returned " + std::to_string(out.rooms.size()) +
                         " rooms for " + std::to_string(requests));
  }
  return out;
}

// The team placed first alone, or 0: matches.winner_team (a two-team result's own winner_team).
uint32_t WinnerOf(const v1::BattleResult& r) {
  const std::vector<uint32_t> ranks = wire::RanksOf(r);
  uint32_t winner = 0;
  for (size_t t = 0; t < ranks.size(); ++t) {
    if (ranks[t] != 1) continue;
    if (winner != 0) return 0;
    winner = static_cast<uint32_t>(t + 1);
  }
  return winner;
}

// Orders seats by room id, and finds a room's among them.
struct ByRoom {
  bool operator()(const RatedSeat& s, uint64_t room) const { return s.room_id < room; }
  bool operator()(uint64_t room, const RatedSeat& s) const { return room < s.room_id; }
};

// The rooms to settle as verdict_settle_write records them, each with its battle.settled event's
// players from its seats in `rated` (which lists them room by room in room-id order).
std::vector<SettleWriteRoom> WriteRooms(const std::vector<SettleRequest>& requests,
                                        const Prepared& prepared, const RatedCall& rated) {
  std::vector<SettleWriteRoom> rooms;
  rooms.reserve(prepared.settle.size());
  for (size_t i : prepared.settle) {
    const v1::BattleResult& r = *requests[i].result;
    const auto [first, last] =
        std::equal_range(rated.seats.begin(), rated.seats.end(), r.room_id(), ByRoom{});
    std::vector<const RatedSeat*> seats;
    seats.reserve(static_cast<size_t>(last - first));
    for (auto s = first; s != last; ++s) seats.push_back(&*s);
    const RoomRow& room = prepared.rooms[i];
    const SettledEvent event{.mode = room.mode,
                             .outcome = OutcomeName(r.outcome()),
                             .room_id = r.room_id(),
                             .match_id = room.match_id,
                             .winner_team = WinnerOf(r),
                             .suspect = r.suspect(),
                             .settled_at_ms = room.settled_at_ms};
    // A room id and a match id are at most 2^63 - 1, a team at most kMaxTeams (proto/wire.h,
    // validation.h; matches.match_id is a bigint).
    rooms.push_back({
        .room_id = static_cast<int64_t>(r.room_id()),
        .node_id = requests[i].node_id,
        .outcome = event.outcome,
        .winner_team = static_cast<int16_t>(event.winner_team),
        .suspect = r.suspect(),
        .ended_at_ms = r.ended_at_ms(),
        .replay_path = r.replay_path(),
        .abort_reason = r.abort_reason(),
        .fingerprint = pg::Bytea{requests[i].fingerprint},
        .mode = room.mode,
        .match_id = static_cast<int64_t>(room.match_id),
        .event = SettledEventJson(
            event, EventPlayersJson(std::move(seats), room.system->ReportsIntegerElo())),
    });
  }
  return rooms;
}

std::vector<SettleWriteSeat> WriteSeats(const RatedCall& rated) {
  std::vector<SettleWriteSeat> seats;
  seats.reserve(rated.seats.size());
  for (const RatedSeat& s : rated.seats) {
    const v1::PlayerResult& p = *s.player;
    // Teams and ranks at most kMaxTeams, the counts at most 2^31 - 1 (proto/wire.h,
    // proto/validation.h).
    seats.push_back({
        .room_id = static_cast<int64_t>(s.room_id),
        .player_id = p.player_id(),
        .team = static_cast<int16_t>(p.team()),
        .rank = static_cast<int16_t>(s.rank),
        .kills = static_cast<int32_t>(p.kills()),
        .deaths = static_cast<int32_t>(p.deaths()),
        .assists = static_cast<int32_t>(p.assists()),
        .score = p.score(),
        .disconnected = p.disconnected(),
        .result = s.result,
        .rating_before = s.before.value,
        .rating_after = s.after.value,
        .deviation_before = s.before.deviation,
        .deviation_after = s.after.deviation,
        .volatility_before = s.before.volatility,
        .volatility_after = s.after.volatility,
    });
  }
  return seats;
}

std::vector<SettleWriteTotals> WriteTotals(const RatedCall& rated) {
  std::vector<SettleWriteTotals> totals;
  totals.reserve(rated.players.size());
  for (const PlayerTotals& t : rated.players) {
    // One call's counts: at most its rooms, and its ranks summed at most rooms * kMaxTeams.
    totals.push_back({
        .mode = t.mode,
        .player_id = t.player_id,
        .rating = t.rating.value,
        .deviation = t.rating.deviation,
        .volatility = t.rating.volatility,
        .displayed = t.displayed,
        .games = t.games,
        .wins = t.wins,
        .losses = t.losses,
        .draws = t.draws,
        .placements = static_cast<int32_t>(t.placements),
    });
  }
  return totals;
}

// Rates the rooms `prepared` settles and writes them in `tx` (verdict_settle_write): the rating
// step of lobby/settlement_ratings.h, then one statement. Returns the write's size in bytes;
// INTERNAL if the write wrote other than every room it was given.
Result<size_t> RateAndWrite(pqxx::work& tx, const std::vector<SettleRequest>& requests,
                            Prepared& prepared, int64_t attempt_id) {
  std::vector<RoomToRate> rate;
  rate.reserve(prepared.settle.size());
  for (size_t i : prepared.settle) {
    const RoomRow& room = prepared.rooms[i];
    rate.push_back({requests[i].result, room.mode, room.system, room.rated, room.settled_at_ms});
  }
  const RatedCall rated = RateRooms(rate, prepared.seats);
  // Every room to settle carries the call's one time (verdict_settle_prepare).
  const int64_t settled_at_ms = prepared.rooms[prepared.settle.front()].settled_at_ms;
  const std::vector<pqxx::binarystring> args = BinaryParams(SettleWriteCall::Encode(
      {.attempt_id = attempt_id, .settled_at_ms = settled_at_ms},
      WriteRooms(requests, prepared, rated), WriteSeats(rated), WriteTotals(rated)));
  size_t bytes = 0;
  for (const pqxx::binarystring& a : args) bytes += a.size();
  const auto written =
      tx.exec_prepared1(kWriteStatement, pqxx::prepare::make_dynamic_params(args))[0].as<size_t>();
  if (written != prepared.settle.size()) {
    return InternalError("the settlement wrote " + std::to_string(written) + " rooms of " +
                         std::to_string(prepared.settle.size()));
  }
  for (size_t i : prepared.settle) {
    prepared.rooms[i].outcome = OutcomeName(requests[i].result->outcome());
  }
  return bytes;
}

// StoreOptions's negative control: the rooms (`room_ids`, a bigint[] in binary) released before
// their settlement commits.
void ReleaseBeforeCommit(pqxx::connection& conn, const pqxx::binarystring& room_ids) {
  pqxx::nontransaction early(conn);
  early.exec_params(
      "UPDATE battle_rooms SET released_at = clock_timestamp() "
      "WHERE room_id = ANY ($1::bigint[]) AND released_at IS NULL",
      room_ids);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SettleStatements() {
  return {
      // Read by column name (PrepareColumns): the function's result is declared once, in SQL.
      {kPrepareStatement, "SELECT * FROM " + kSettlePrepare.PreparedCall()},
      {kWriteStatement, "SELECT " + kSettleWrite.PreparedCall()},
      // The receipts a commit of unknown fate is resolved from (ResolveUnknownCommit); its first
      // columns are ReceiptFromRow's.
      {"receipts_of_rooms",
       "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint, "
       "encode(fingerprint, 'hex') AS fingerprint_hex, attempt_id, node_id "
       "FROM settlement_receipts WHERE room_id = ANY ($1::bigint[])"},
      // A transaction that writes WAL (a logical message, of no other consequence), so that its
      // commit waits for the synchronous standby (if any) to confirm the WAL up to it. (A
      // transaction id alone writes nothing before the commit, which then does not wait.)
      {"await_replication",
       "SELECT pg_logical_emit_message(true, 'verdict', 'replication barrier')"},
  };
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

struct SettleTransaction::Marshalled {
  std::vector<pqxx::binarystring> prepare;  // verdict_settle_prepare's arguments
  int64_t attempt_id = 0;
};

struct SettleTransaction::Executed {
  enum class State { kCommitted, kFailed, kCommitUnknown };
  State state = State::kFailed;
  Status failure;              // kFailed: why, for every request alike
  std::vector<RoomRow> rooms;  // kCommitted: one per request, in request order
  int64_t attempt_id = 0;
};

// How far the transaction went: what a failure means, and what to do with its connection.
struct SettleTransaction::Attempt {
  bool committing = false;  // COMMIT was sent: a lost connection leaves the outcome unknown
  bool any_settled = false;
  size_t write_bytes = 0;
};

Result<const rating::RatingSystem*> RatingSystems::Of(std::string_view system,
                                                      std::string_view model,
                                                      std::string_view parameters_json) {
  MutexLock lock(&mu_);
  auto found = made_.find(DeclarationView{system, model, parameters_json});
  if (found != made_.end()) return found->second.get();
  Declaration declaration{system, model, parameters_json};
  auto parameters = ParametersFromStored(std::get<2>(declaration));
  if (!parameters.ok()) return parameters.status();
  auto made = rating::MakeRatingSystem(
      {std::get<0>(declaration), std::get<1>(declaration), std::move(*parameters)},
      rating::Declaration::kStored);
  if (!made.ok()) {
    return InternalError("a mode's declaration is not one this lobby can rate by: " +
                         made.status().message());
  }
  return made_.emplace(std::move(declaration), std::move(*made)).first->second.get();
}

SettleTransaction::SettleTransaction(pg::Pool& pool, bool unsafe_release_before_commit_for_test)
    : pool_(pool), unsafe_release_before_commit_(unsafe_release_before_commit_for_test) {}

std::vector<Result<SettleOutcome>> SettleTransaction::Settle(
    const std::vector<SettleRequest>& requests, bool wait, Cancellation* cancel) {
  const Marshalled call = Marshal(requests, wait);
  return Resolve(requests, Execute(requests, call, cancel), cancel);
}

SettleTransaction::Marshalled SettleTransaction::Marshal(const std::vector<SettleRequest>& requests,
                                                         bool wait) const {
  size_t seats = 0;
  for (const SettleRequest& q : requests) seats += static_cast<size_t>(q.result->players_size());
  std::vector<SettlePrepareRoom> rooms;
  rooms.reserve(requests.size());
  std::vector<SettlePreparePlayer> players;
  players.reserve(seats);
  for (const SettleRequest& q : requests) {
    const v1::BattleResult& r = *q.result;
    // A room id is at most 2^63 - 1, a team at most kMaxTeams (proto/wire.h, validation.h).
    const auto room_id = static_cast<int64_t>(r.room_id());
    rooms.push_back({room_id, q.node_id, OutcomeName(r.outcome()), pg::Bytea{q.fingerprint}});
    for (const v1::PlayerResult& p : r.players()) {
      players.push_back({room_id, p.player_id(), static_cast<int16_t>(p.team())});
    }
  }
  Marshalled call;
  call.prepare = BinaryParams(SettlePrepareCall::Encode({.wait = wait}, rooms, players));
  call.attempt_id = NewAttemptId();
  return call;
}

Status SettleTransaction::Transact(pqxx::connection& conn,
                                   const std::vector<SettleRequest>& requests,
                                   const Marshalled& call, Attempt& attempt, Executed& out) {
  if (unsafe_release_before_commit_) {
    ReleaseBeforeCommit(conn, call.prepare[kSettlePrepare["p_room_ids"]]);
  }
  pqxx::work tx(conn);
  auto prepared = ReadPrepared(
      tx.exec_prepared(kPrepareStatement, pqxx::prepare::make_dynamic_params(call.prepare)),
      requests.size(), systems_);
  if (!prepared.ok()) return prepared.status();  // `tx` rolls back as it ends
  if (!prepared->settle.empty()) {
    const auto written = RateAndWrite(tx, requests, *prepared, call.attempt_id);
    if (!written.ok()) return written.status();
    attempt.write_bytes = *written;
    attempt.any_settled = true;
  }
  if (CheckFailpoint("settle.before_commit") == FailAction::kError) {
    // Injected fault: the backend dies before COMMIT and takes the transaction with it: a lost
    // connection, a 503.
    tx.exec("SELECT pg_terminate_backend(pg_backend_pid())");
  }
  attempt.committing = true;
  tx.commit();
  out.rooms = std::move(prepared->rooms);
  return Status::Ok();
}

SettleTransaction::Executed SettleTransaction::Execute(const std::vector<SettleRequest>& requests,
                                                       const Marshalled& call,
                                                       Cancellation* cancel) {
  Executed out;
  out.attempt_id = call.attempt_id;
  auto leased = pool_.Acquire();
  if (!leased.ok()) {
    out.failure = leased.status();
    return out;
  }
  std::optional<pg::Pool::Lease> lease(std::move(*leased));
  pqxx::connection& conn = lease->conn();
  Attempt attempt;
  std::optional<pg::Failure> failure;
  Status refused;
  {
    // Armed only around the transaction: a lost connection is closed after it (below), so a
    // cancel never reaches a connection that is gone.
    Cancellation::Scope cancellable(cancel, [&conn] { CancelQuery(conn); });
    if (!cancellable.ok()) {
      out.failure = CancelledError();
      return out;
    }
    try {
      refused = Transact(conn, requests, call, attempt, out);
    } catch (const std::exception& e) {
      failure = pg::Classify(e, &conn, attempt.committing);
    }
  }
  if (failure || !refused.ok()) {
    Fail(failure, refused, requests.size(), lease, out);
    return out;
  }
  out.state = Executed::State::kCommitted;
  if (attempt.write_bytes > kRetireConnectionAboveBytes) lease->Retire();
  if (attempt.any_settled && CheckFailpoint("settle.commit_unknown") == FailAction::kError) {
    // As if the connection dropped right after COMMIT was sent: the reply is lost.
    lease->Drop(pg::Failure{pg::FailureKind::kCommitUnknown, "", true, "failpoint", ""});
    out.state = Executed::State::kCommitUnknown;
  }
  return out;
}

void SettleTransaction::Fail(const std::optional<pg::Failure>& failure, const Status& refused,
                             size_t rooms, std::optional<pg::Pool::Lease>& lease, Executed& out) {
  if (!failure) {
    spdlog::error("settle: {}; the transaction is rolled back", refused.message());
    lease.reset();  // back to the pool before the schema is asked about on another
    out.failure = pg::UnlessSchemaReady(pool_, InternalError("settle: " + refused.message()));
    return;
  }
  pg::Log(*failure, "settle");
  lease->Drop(*failure);
  lease.reset();  // as above
  if (failure->kind == pg::FailureKind::kCommitUnknown) {
    static LogRateLimit limit(RepeatedFaultLimit());
    LogLimited(*spdlog::default_logger(), limit, spdlog::level::warn,
               "settlement of {} room(s) lost its connection during COMMIT, outcome unknown",
               rooms);
    out.state = Executed::State::kCommitUnknown;
  } else {
    out.failure = pg::UnlessSchemaReady(pool_, pg::StatusOf(*failure, "settle"));
  }
}

std::vector<Result<SettleOutcome>> SettleTransaction::Resolve(
    const std::vector<SettleRequest>& requests, Executed executed, Cancellation* cancel) {
  using State = Executed::State;
  if (executed.state == State::kCommitUnknown) {
    return ResolveUnknownCommit(requests, executed.attempt_id);
  }
  if (executed.state == State::kFailed) {
    return {requests.size(), Result<SettleOutcome>(executed.failure)};
  }
  std::vector<Result<SettleOutcome>> outcomes;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RoomRow& row = executed.rooms[i];
    auto status = StatusFromSql(kSettleStatuses, "settlement", row.status);
    if (!status.ok()) {
      spdlog::error("room={}: {}; answering INTERNAL", requests[i].result->room_id(),
                    status.status().message());
      outcomes.push_back(status.status());
      continue;
    }
    SettleOutcome out;
    out.status = *status;
    out.receipt.set_room_id(requests[i].result->room_id());
    out.receipt.set_match_id(row.match_id);
    if (!row.outcome.empty()) out.receipt.set_outcome(OutcomeFromName(row.outcome));
    out.receipt.set_settled_at_ms(row.settled_at_ms);
    out.receipt.set_duplicate(out.status == SettleStatus::kDuplicate);
    outcomes.push_back(std::move(out));
  }
  // Rows this call settled were confirmed by its own commit, unless a cancel reached it: a
  // cancelled wait for the synchronous standby still commits locally, with only a warning. The
  // other rows were read from receipts that earlier transactions wrote.
  const bool cancelled = cancel != nullptr && cancel->cancelled();
  AwaitReplication(outcomes, [cancelled](const SettleOutcome& o) {
    return (cancelled && o.status == SettleStatus::kSettled) ||
           o.status == SettleStatus::kDuplicate || o.status == SettleStatus::kOutcomeConflict ||
           o.status == SettleStatus::kIdempotencyMismatch ||
           o.status == SettleStatus::kOriginalExpired;
  });
  return outcomes;
}

// Outcomes read from a receipt (those `from_receipt` picks) are answered only once that receipt is
// on the synchronous standby, if there is one. The transaction that wrote it may have committed on
// the primary alone: its own wait for the standby was cut short when its client went away, its
// session was terminated or its lobby died. A failover would then lose the receipt the answer
// vouches for. The commit of a transaction that writes WAL (the "await_replication" statement's
// logical message) waits until the standby confirms all WAL up to it, earlier commits included;
// without a synchronous standby it returns at once. If it fails, those outcomes become
// UNAVAILABLE: the retry asks again.
template <typename Pick>
void SettleTransaction::AwaitReplication(std::vector<Result<SettleOutcome>>& outcomes,
                                         Pick from_receipt) {
  const auto read_from_receipt = [&](const Result<SettleOutcome>& o) {
    return o.ok() && from_receipt(*o);
  };
  if (std::none_of(outcomes.begin(), outcomes.end(), read_from_receipt)) return;
  auto confirmed = pool_.Run<bool>("await replication", [&](pg::Pool::Lease& lease) {
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

// The COMMIT's fate is unknown: ask the database on a fresh connection, which after a failover
// reaches the new primary. The receipts are the truth, room by room. A receipt this call wrote
// (its attempt id) means settled by this very request, not a duplicate; one written earlier is
// what it would have been answered anyway (duplicate, or a conflict); no receipt means the
// transaction is gone and the room must be retried (UNAVAILABLE), never a 2xx.
std::vector<Result<SettleOutcome>> SettleTransaction::ResolveUnknownCommit(
    const std::vector<SettleRequest>& requests, int64_t attempt_id) {
  pg::BinaryArray<int64_t> rooms;
  for (const SettleRequest& q : requests) rooms.Add(static_cast<int64_t>(q.result->room_id()));
  const std::string room_ids = std::move(rooms).bytes();
  auto found = pool_.Run<pqxx::result>("resolve commit", [&](pg::Pool::Lease& lease) {
    pqxx::nontransaction tx(lease.conn());
    return tx.exec_prepared("receipts_of_rooms",
                            pqxx::binarystring(room_ids.data(), room_ids.size()));
  });
  if (!found.ok()) return {requests.size(), Result<SettleOutcome>(found.status())};
  const auto room_id = found->column_number("room_id");
  const auto fingerprint_hex = found->column_number("fingerprint_hex");
  const auto receipt_attempt = found->column_number("attempt_id");
  const auto node_id = found->column_number("node_id");
  std::vector<Result<SettleOutcome>> outcomes;
  for (const SettleRequest& q : requests) {
    const v1::BattleResult& r = *q.result;
    std::optional<pqxx::row> receipt;  // a copy: the loop's row is the iterator itself
    for (const auto& row : *found) {
      if (row[room_id].as<uint64_t>() == r.room_id() && View(row[node_id]) == q.node_id) {
        receipt = row;
      }
    }
    if (!receipt) {
      static LogRateLimit limit(RepeatedFaultLimit());
      LogLimited(*spdlog::default_logger(), limit, spdlog::level::warn,
                 "room={}: unknown commit did not land; asking for a retry", r.room_id());
      outcomes.push_back(UnavailableError("settlement commit outcome unknown and no receipt"));
      continue;
    }
    SettleOutcome out;
    out.receipt = ReceiptFromRow(*receipt);
    const bool ours = (*receipt)[receipt_attempt].as<int64_t>() == attempt_id;
    out.status = ours                                   ? SettleStatus::kSettled
                 : out.receipt.outcome() != r.outcome() ? SettleStatus::kOutcomeConflict
                 : View((*receipt)[fingerprint_hex]) != Hex(q.fingerprint)
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

}  // namespace verdict::lobby
