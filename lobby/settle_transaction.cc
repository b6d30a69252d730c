#include "lobby/settle_transaction.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string_view>

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"
#include "common/log_rate_limit.h"
#include "lobby/event_players.h"
#include "lobby/modes.h"
#include "lobby/pg/array_literal.h"
#include "lobby/pg/binary_array.h"
#include "lobby/pg/errors.h"
#include "lobby/pg/run.h"
#include "lobby/pg_statuses.h"
#include "lobby/settle_calls.h"
#include "lobby/settlement_ratings.h"
#include "proto/validation.h"

namespace verdict::lobby {
namespace {

using pg::ArrayLiteral;

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

// What verdict_settle_prepare said of one room: its status and, for a status read from a
// receipt, that receipt; for a room to settle, its mode and the mode's system; after the write,
// for a room this call settled, its new match.
struct RoomRow {
  std::string status;
  uint64_t match_id = 0;
  std::string outcome;
  int64_t settled_at_ms = 0;
  std::string mode;
  const rating::RatingSystem* system = nullptr;
  bool rated = true;
};

// The rating of columns `at`, `at + 1`, `at + 2` (value, deviation, volatility), or none. A seat
// recorded before ratings had deviations (migration 003) has a value only: its deviation and
// volatility are 0, Elo's.
std::optional<rating::Rating> RatingAt(const pqxx::row& row, int at) {
  if (row[at].is_null()) return std::nullopt;
  const auto or_zero = [&row](int i) { return row[i].is_null() ? 0.0 : row[i].as<double>(); };
  return rating::Rating{row[at].as<double>(), or_zero(at + 1), or_zero(at + 2)};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SettleStatements() {
  return {
      {kPrepareStatement,
       "SELECT room_id, status, match_id, outcome, settled_at_ms, mode, system, model, "
       "parameters, rated, player_id, rating, deviation, volatility, rated_rating, "
       "rated_deviation, rated_volatility FROM " +
           kSettlePrepare.PreparedCall()},
      {kWriteStatement,
       "SELECT room_id, match_id, settled_at_ms FROM " + kSettleWrite.PreparedCall()},
      // The receipts a commit of unknown fate is resolved from (ResolveUnknownCommit).
      {"receipts_of_rooms",
       "SELECT room_id, match_id, outcome, (extract(epoch FROM settled_at) * 1000)::bigint, "
       "encode(fingerprint, 'hex'), attempt_id, node_id FROM settlement_receipts "
       "WHERE room_id = ANY ($1::bigint[])"},
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
  decltype(kSettlePrepare)::Args prepare;
  int64_t attempt_id = 0;
  std::string rooms;  // the rooms' ids, for the negative control
};

struct SettleTransaction::Executed {
  enum class State { kCommitted, kFailed, kCommitUnknown };
  State state = State::kFailed;
  Status failure;              // kFailed: why, for every request alike
  std::vector<RoomRow> rooms;  // kCommitted: one per request, in request order
  int64_t attempt_id = 0;
};

Result<const rating::RatingSystem*> RatingSystems::Of(const std::string& system,
                                                      const std::string& model,
                                                      const std::string& parameters_json) {
  const std::string key = system + '\n' + model + '\n' + parameters_json;
  MutexLock lock(&mu_);
  auto found = made_.find(key);
  if (found != made_.end()) return found->second.get();
  auto parameters = ParametersFromStored(parameters_json);
  if (!parameters.ok()) return parameters.status();
  auto made = rating::MakeRatingSystem({system, model, *parameters}, rating::Declaration::kStored);
  if (!made.ok()) {
    return InternalError("a mode's declaration is not one this lobby can rate by: " +
                         made.status().message());
  }
  return made_.emplace(key, std::move(*made)).first->second.get();
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
  ArrayLiteral rooms, nodes, outcomes, prints, player_rooms, ids, teams;
  for (const SettleRequest& q : requests) {
    const v1::BattleResult& r = *q.result;
    rooms.Add(r.room_id());
    nodes.AddText(q.node_id);
    outcomes.AddText(OutcomeName(r.outcome()));
    prints.AddHexBytes(Hex(q.fingerprint));
    for (const v1::PlayerResult& p : r.players()) {
      player_rooms.Add(r.room_id());
      ids.AddText(p.player_id());
      teams.Add(p.team());
    }
  }
  Marshalled call;
  call.prepare[kSettlePrepare["p_room_ids"]] = rooms.str();
  call.prepare[kSettlePrepare["p_node_ids"]] = nodes.str();
  call.prepare[kSettlePrepare["p_outcomes"]] = outcomes.str();
  call.prepare[kSettlePrepare["p_fingerprints"]] = prints.str();
  call.prepare[kSettlePrepare["p_player_rooms"]] = player_rooms.str();
  call.prepare[kSettlePrepare["p_player_ids"]] = ids.str();
  call.prepare[kSettlePrepare["p_teams"]] = teams.str();
  call.prepare[kSettlePrepare["p_wait"]] = wait ? "true" : "false";
  call.attempt_id = NewAttemptId();
  call.rooms = rooms.str();
  return call;
}

namespace {

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

// verdict_settle_write's arguments for the rooms `settle` names, from what the rating step made,
// each in binary (BinaryArray), in the function's parameter order.
std::vector<pqxx::binarystring> WriteArgs(const std::vector<SettleRequest>& requests,
                                          const std::vector<RoomRow>& rooms,
                                          const std::vector<size_t>& settle, const RatedCall& rated,
                                          int64_t attempt_id) {
  using pg::BinaryArray;
  using pg::Bytea;
  using Text = std::string_view;
  std::array<std::string, kSettleWrite.parameters.size()> args;
  const auto set = [&args](size_t at, auto&& array) { args[at] = std::move(array).bytes(); };

  std::map<uint64_t, std::vector<const RatedSeat*>> seats_of;  // by room
  for (const RatedSeat& s : rated.seats) seats_of[s.room_id].push_back(&s);
  BinaryArray<int64_t> ids, ended;
  BinaryArray<Text> nodes, outcomes, replays, reasons, modes, event_players;
  BinaryArray<int16_t> winners;
  BinaryArray<bool> suspects;
  BinaryArray<Bytea> prints;
  // About 280 bytes a player: reserved, so that it is not copied at each size it doubles through.
  event_players.Reserve(settle.size(),
                        rated.seats.size() * 300 / std::max<size_t>(1, settle.size()));
  for (size_t i : settle) {
    const v1::BattleResult& r = *requests[i].result;
    // A room id is at most 2^63 - 1, a team at most kMaxTeams (proto/wire.h, validation.h).
    ids.Add(static_cast<int64_t>(r.room_id()));
    nodes.Add(requests[i].node_id);
    outcomes.Add(OutcomeName(r.outcome()));
    winners.Add(static_cast<int16_t>(WinnerOf(r)));
    suspects.Add(r.suspect());
    ended.Add(r.ended_at_ms());
    replays.Add(r.replay_path());
    reasons.Add(r.abort_reason());
    prints.Add(Bytea{requests[i].fingerprint});
    modes.Add(rooms[i].mode);
    event_players.Add(
        EventPlayersJson(seats_of[r.room_id()], rooms[i].system->ReportsIntegerElo()));
  }
  set(kSettleWrite["p_room_ids"], ids);
  set(kSettleWrite["p_node_ids"], nodes);
  set(kSettleWrite["p_outcomes"], outcomes);
  set(kSettleWrite["p_winner_teams"], winners);
  set(kSettleWrite["p_suspects"], suspects);
  set(kSettleWrite["p_ended_at_ms"], ended);
  set(kSettleWrite["p_replay_paths"], replays);
  set(kSettleWrite["p_abort_reasons"], reasons);
  set(kSettleWrite["p_fingerprints"], prints);
  set(kSettleWrite["p_modes"], modes);
  set(kSettleWrite["p_event_players"], event_players);

  BinaryArray<int64_t> player_rooms, scores;
  BinaryArray<Text> players, results;
  BinaryArray<int16_t> teams, ranks;
  BinaryArray<int32_t> kills, deaths, assists;
  BinaryArray<bool> disconnected;
  BinaryArray<double> rating_before, rating_after, deviation_before, deviation_after,
      volatility_before, volatility_after;
  for (const RatedSeat& s : rated.seats) {
    player_rooms.Add(static_cast<int64_t>(s.room_id));
    players.Add(s.player->player_id());
    // Teams and ranks at most kMaxTeams, the counts at most 2^31 - 1 (proto/wire.h,
    // proto/validation.h).
    teams.Add(static_cast<int16_t>(s.player->team()));
    ranks.Add(static_cast<int16_t>(s.rank));
    kills.Add(static_cast<int32_t>(s.player->kills()));
    deaths.Add(static_cast<int32_t>(s.player->deaths()));
    assists.Add(static_cast<int32_t>(s.player->assists()));
    scores.Add(s.player->score());
    disconnected.Add(s.player->disconnected());
    results.Add(s.result);
    rating_before.Add(s.before.value);
    rating_after.Add(s.after.value);
    deviation_before.Add(s.before.deviation);
    deviation_after.Add(s.after.deviation);
    volatility_before.Add(s.before.volatility);
    volatility_after.Add(s.after.volatility);
  }
  set(kSettleWrite["p_player_rooms"], player_rooms);
  set(kSettleWrite["p_player_ids"], players);
  set(kSettleWrite["p_teams"], teams);
  set(kSettleWrite["p_ranks"], ranks);
  set(kSettleWrite["p_kills"], kills);
  set(kSettleWrite["p_deaths"], deaths);
  set(kSettleWrite["p_assists"], assists);
  set(kSettleWrite["p_scores"], scores);
  set(kSettleWrite["p_disconnected"], disconnected);
  set(kSettleWrite["p_results"], results);
  set(kSettleWrite["p_ratings_before"], rating_before);
  set(kSettleWrite["p_ratings_after"], rating_after);
  set(kSettleWrite["p_deviations_before"], deviation_before);
  set(kSettleWrite["p_deviations_after"], deviation_after);
  set(kSettleWrite["p_volatilities_before"], volatility_before);
  set(kSettleWrite["p_volatilities_after"], volatility_after);

  BinaryArray<Text> rated_modes, rated_players;
  BinaryArray<double> final_rating, final_deviation, final_volatility, final_displayed;
  BinaryArray<int32_t> games, wins, losses, draws, placements;
  for (const PlayerTotals& t : rated.players) {
    rated_modes.Add(t.mode);
    rated_players.Add(t.player_id);
    final_rating.Add(t.rating.value);
    final_deviation.Add(t.rating.deviation);
    final_volatility.Add(t.rating.volatility);
    final_displayed.Add(t.displayed);
    // One call's counts: at most its rooms, and its ranks summed at most rooms * kMaxTeams.
    games.Add(t.games);
    wins.Add(t.wins);
    losses.Add(t.losses);
    draws.Add(t.draws);
    placements.Add(static_cast<int32_t>(t.placements));
  }
  set(kSettleWrite["p_rated_modes"], rated_modes);
  set(kSettleWrite["p_rated_players"], rated_players);
  set(kSettleWrite["p_final_ratings"], final_rating);
  set(kSettleWrite["p_final_deviations"], final_deviation);
  set(kSettleWrite["p_final_volatilities"], final_volatility);
  set(kSettleWrite["p_final_displayed"], final_displayed);
  set(kSettleWrite["p_games"], games);
  set(kSettleWrite["p_wins"], wins);
  set(kSettleWrite["p_losses"], losses);
  set(kSettleWrite["p_draws"], draws);
  set(kSettleWrite["p_placements"], placements);

  args[kSettleWrite["p_attempt_id"]] = pg::BinaryInt64(attempt_id);

  std::vector<pqxx::binarystring> params;
  params.reserve(args.size());
  for (const std::string& a : args) params.emplace_back(a.data(), a.size());
  return params;
}

}  // namespace

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
  std::optional<pg::Failure> failure;
  bool committing = false;
  bool any_settled = false;
  size_t write_bytes = 0;
  {
    // Armed only around the transaction: a lost connection is closed after it (below), so a
    // cancel never reaches a connection that is gone.
    Cancellation::Scope cancellable(cancel, [&conn] { CancelQuery(conn); });
    if (!cancellable.ok()) {
      out.failure = CancelledError();
      return out;
    }
    try {
      if (unsafe_release_before_commit_) {
        pqxx::nontransaction early(conn);
        early.exec_params(
            "UPDATE battle_rooms SET released_at = clock_timestamp() "
            "WHERE room_id = ANY ($1::bigint[]) AND released_at IS NULL",
            call.rooms);
      }
      pqxx::work tx(conn);
      const pqxx::result read =
          tx.exec_prepared(kPrepareStatement, pqxx::prepare::make_dynamic_params(call.prepare));
      // The rooms' rows first, in request order; then the players of the rooms to settle.
      std::vector<size_t> settle;
      std::vector<SeatRatings> seats;
      seats.reserve(read.size());  // a row a seat, but for the rooms' own
      for (const auto& row : read) {
        if (!row[10].is_null()) {
          seats.push_back({row[0].as<uint64_t>(), row[10].as<std::string>(), RatingAt(row, 11),
                           RatingAt(row, 14)});
          continue;
        }
        RoomRow room;
        room.status = row[1].as<std::string>();
        if (!row[2].is_null()) room.match_id = row[2].as<uint64_t>();
        if (!row[3].is_null()) room.outcome = row[3].as<std::string>();
        if (!row[4].is_null()) room.settled_at_ms = row[4].as<int64_t>();
        if (room.status == "settle") {
          room.mode = row[5].as<std::string>();
          auto system = systems_.Of(row[6].as<std::string>(), row[7].as<std::string>(),
                                    row[8].as<std::string>());
          if (!system.ok()) throw pqxx::internal_error(system.status().message());
          room.system = *system;
          room.rated = row[9].as<bool>();
          settle.push_back(out.rooms.size());
        }
        out.rooms.push_back(std::move(room));
      }
      if (out.rooms.size() != requests.size()) {
        throw pqxx::internal_error("the settlement returned " + std::to_string(out.rooms.size()) +
                                   " rooms for " + std::to_string(requests.size()));
      }
      if (!settle.empty()) {
        std::vector<RoomToRate> rate;
        for (size_t i : settle) {
          rate.push_back(
              {requests[i].result, out.rooms[i].mode, out.rooms[i].system, out.rooms[i].rated});
        }
        const RatedCall rated = RateRooms(rate, seats);
        const std::vector<pqxx::binarystring> args =
            WriteArgs(requests, out.rooms, settle, rated, call.attempt_id);
        for (const pqxx::binarystring& a : args) write_bytes += a.size();
        const pqxx::result written =
            tx.exec_prepared(kWriteStatement, pqxx::prepare::make_dynamic_params(args));
        for (const auto& row : written) {
          const auto room_id = row[0].as<uint64_t>();
          const auto match_id = row[1].as<uint64_t>();
          const auto settled_at_ms = row[2].as<int64_t>();
          for (size_t i : settle) {
            if (requests[i].result->room_id() != room_id) continue;
            out.rooms[i].match_id = match_id;
            out.rooms[i].settled_at_ms = settled_at_ms;
            out.rooms[i].outcome = OutcomeName(requests[i].result->outcome());
          }
        }
        any_settled = true;
      }
      if (CheckFailpoint("settle.before_commit") == FailAction::kError) {
        // Injected fault: the backend dies before COMMIT and takes the transaction with it: a
        // lost connection, a 503.
        tx.exec("SELECT pg_terminate_backend(pg_backend_pid())");
      }
      committing = true;
      tx.commit();
    } catch (const std::exception& e) {
      failure = pg::Classify(e, &conn, committing);
    }
  }
  if (failure) {
    pg::Log(*failure, "settle");
    lease->Drop(*failure);
    lease.reset();  // back to the pool before the schema is asked about on another
    if (failure->kind == pg::FailureKind::kCommitUnknown) {
      static LogRateLimit limit(RepeatedFaultLimit());
      LogLimited(*spdlog::default_logger(), limit, spdlog::level::warn,
                 "settlement of {} room(s) lost its connection during COMMIT, outcome unknown",
                 requests.size());
      out.state = Executed::State::kCommitUnknown;
    } else {
      out.failure = pg::UnlessSchemaReady(pool_, pg::StatusOf(*failure, "settle"));
    }
    return out;
  }
  out.state = Executed::State::kCommitted;
  if (write_bytes > kRetireConnectionAboveBytes) lease->Retire();
  if (any_settled && CheckFailpoint("settle.commit_unknown") == FailAction::kError) {
    // As if the connection dropped right after COMMIT was sent: the reply is lost.
    lease->Drop(pg::Failure{pg::FailureKind::kCommitUnknown, "", true, "failpoint", ""});
    out.state = Executed::State::kCommitUnknown;
  }
  return out;
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
    auto status = row.status == kSettleToWrite
                      ? Result<SettleStatus>(SettleStatus::kSettled)
                      : StatusFromSql(kSettleStatuses, "settlement", row.status);
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
  ArrayLiteral rooms;
  for (const SettleRequest& q : requests) rooms.Add(q.result->room_id());
  auto found = pool_.Run<pqxx::result>("resolve commit", [&](pg::Pool::Lease& lease) {
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
      static LogRateLimit limit(RepeatedFaultLimit());
      LogLimited(*spdlog::default_logger(), limit, spdlog::level::warn,
                 "room={}: unknown commit did not land; asking for a retry", r.room_id());
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

}  // namespace verdict::lobby
