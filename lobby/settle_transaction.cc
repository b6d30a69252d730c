#include "lobby/settle_transaction.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <utility>

#include <pqxx/pqxx>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"
#include "lobby/event_players.h"
#include "lobby/pg/array_literal.h"
#include "lobby/pg/binary_text_array.h"
#include "lobby/pg/errors.h"
#include "lobby/pg/schema.h"
#include "lobby/settle_calls.h"
#include "lobby/settlement_ratings.h"
#include "proto/validation.h"

namespace verdict::lobby {
namespace {

using pg::ArrayLiteral;

constexpr char kPrepareStatement[] = "settle_prepare";
constexpr char kWriteStatement[] = "settle_write";

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
    spdlog::warn("cannot cancel the statement of a request whose client hung up: {}", e.what());
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

// The parameters of a declaration as the database holds them: a JSON object of numbers.
Result<std::map<std::string, double>> ParametersOf(const std::string& json) {
  google::protobuf::Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) {
    return InternalError("a mode's parameters are not a JSON object: " + json);
  }
  std::map<std::string, double> parameters;
  for (const auto& [name, value] : parsed.fields()) {
    if (!value.has_number_value()) {
      return InternalError("a mode's parameter " + name + " is not a number");
    }
    parameters[name] = value.number_value();
  }
  return parameters;
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

Status UnlessSchemaReady(pg::Pool& pool, const Status& failed) {
  if (failed.code() != StatusCode::kInternal) return failed;
  Status verdict;
  const auto check = [&] {
    return pool.Run<bool>("readiness", [&](pg::Pool::Lease& lease) {
      // Not a read-only transaction: the check asks whether the session only reads.
      pqxx::nontransaction tx(lease.conn());
      verdict = pg::CheckSchema(tx);
      return true;
    });
  };
  // A connection found lost (opened before a failover, say) is replaced, and asked again.
  auto ran = check();
  if (!ran.ok() && ran.status().code() == StatusCode::kUnavailable) ran = check();
  const Status ready = ran.ok() ? verdict : ran.status();
  if (ready.ok()) return failed;
  return UnavailableError(failed.message() + " (the database is not ready: " + ready.message() +
                          ")");
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
  auto parameters = ParametersOf(parameters_json);
  if (!parameters.ok()) return parameters.status();
  auto made = rating::MakeRatingSystem({system, model, *parameters});
  if (!made.ok()) {
    return InternalError("a mode's declaration is not one this lobby can rate by: " +
                         made.status().message());
  }
  return made_.emplace(key, std::move(*made)).first->second.get();
}

SettleTransaction::SettleTransaction(pg::Pool& pool, const StoreOptions& options)
    : pool_(pool), options_(options) {}

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

// verdict_settle_write's arguments for the rooms `settle` names, from what the rating step made.
// p_event_players goes in binary (BinaryTextArray), its slot in `args` left empty.
struct WriteCall {
  decltype(kSettleWrite)::Args args;
  pqxx::binarystring event_players{""};
};

WriteCall WriteArgs(const std::vector<SettleRequest>& requests, const std::vector<RoomRow>& rooms,
                    const std::vector<size_t>& settle, const RatedCall& rated, int64_t attempt_id) {
  std::map<uint64_t, std::vector<const RatedSeat*>> seats_of;  // by room
  for (const RatedSeat& s : rated.seats) seats_of[s.room_id].push_back(&s);
  ArrayLiteral ids, nodes, outcomes, winners, suspects, ended, replays, reasons, prints, modes;
  pg::BinaryTextArray event_players;  // each room's players, a JSON array
  // About 280 bytes a player: reserved, because grown by doubling such a string maps and faults
  // in each size it passes through (blocks of 128 KiB and more: lobby/main.cc).
  event_players.Reserve(rated.seats.size() * 300);
  for (size_t i : settle) {
    const v1::BattleResult& r = *requests[i].result;
    ids.Add(r.room_id());
    nodes.AddText(requests[i].node_id);
    outcomes.AddText(OutcomeName(r.outcome()));
    winners.Add(WinnerOf(r));
    suspects.Add(r.suspect());
    ended.Add(r.ended_at_ms());
    replays.AddText(r.replay_path());
    reasons.AddText(r.abort_reason());
    prints.AddHexBytes(Hex(requests[i].fingerprint));
    modes.AddText(rooms[i].mode);
    event_players.Add(
        EventPlayersJson(seats_of[r.room_id()], rooms[i].system->spec().system == "elo"));
  }
  ArrayLiteral player_rooms, players, teams, ranks, kills, deaths, assists, scores, disconnected,
      results, rating_before, rating_after, deviation_before, deviation_after, volatility_before,
      volatility_after;
  for (const RatedSeat& s : rated.seats) {
    player_rooms.Add(s.room_id);
    players.AddText(s.player->player_id());
    teams.Add(s.player->team());
    ranks.Add(s.rank);
    kills.Add(s.player->kills());
    deaths.Add(s.player->deaths());
    assists.Add(s.player->assists());
    scores.Add(s.player->score());
    disconnected.Add(s.player->disconnected());
    results.AddText(s.result);
    rating_before.Add(s.before.value);
    rating_after.Add(s.after.value);
    deviation_before.Add(s.before.deviation);
    deviation_after.Add(s.after.deviation);
    volatility_before.Add(s.before.volatility);
    volatility_after.Add(s.after.volatility);
  }
  ArrayLiteral rated_modes, rated_players, final_rating, final_deviation, final_volatility,
      final_displayed, games, wins, losses, draws, placements;
  for (const PlayerTotals& t : rated.players) {
    rated_modes.AddText(t.mode);
    rated_players.AddText(t.player_id);
    final_rating.Add(t.rating.value);
    final_deviation.Add(t.rating.deviation);
    final_volatility.Add(t.rating.volatility);
    final_displayed.Add(t.displayed);
    games.Add(t.games);
    wins.Add(t.wins);
    losses.Add(t.losses);
    draws.Add(t.draws);
    placements.Add(t.placements);
  }
  WriteCall call;
  auto& args = call.args;
  args[kSettleWrite["p_room_ids"]] = std::move(ids).str();
  args[kSettleWrite["p_node_ids"]] = std::move(nodes).str();
  args[kSettleWrite["p_outcomes"]] = std::move(outcomes).str();
  args[kSettleWrite["p_winner_teams"]] = std::move(winners).str();
  args[kSettleWrite["p_suspects"]] = std::move(suspects).str();
  args[kSettleWrite["p_ended_at_ms"]] = std::move(ended).str();
  args[kSettleWrite["p_replay_paths"]] = std::move(replays).str();
  args[kSettleWrite["p_abort_reasons"]] = std::move(reasons).str();
  args[kSettleWrite["p_fingerprints"]] = std::move(prints).str();
  args[kSettleWrite["p_modes"]] = std::move(modes).str();
  call.event_players =
      pqxx::binarystring(event_players.bytes().data(), event_players.bytes().size());
  args[kSettleWrite["p_player_rooms"]] = std::move(player_rooms).str();
  args[kSettleWrite["p_player_ids"]] = std::move(players).str();
  args[kSettleWrite["p_teams"]] = std::move(teams).str();
  args[kSettleWrite["p_ranks"]] = std::move(ranks).str();
  args[kSettleWrite["p_kills"]] = std::move(kills).str();
  args[kSettleWrite["p_deaths"]] = std::move(deaths).str();
  args[kSettleWrite["p_assists"]] = std::move(assists).str();
  args[kSettleWrite["p_scores"]] = std::move(scores).str();
  args[kSettleWrite["p_disconnected"]] = std::move(disconnected).str();
  args[kSettleWrite["p_results"]] = std::move(results).str();
  args[kSettleWrite["p_ratings_before"]] = std::move(rating_before).str();
  args[kSettleWrite["p_ratings_after"]] = std::move(rating_after).str();
  args[kSettleWrite["p_deviations_before"]] = std::move(deviation_before).str();
  args[kSettleWrite["p_deviations_after"]] = std::move(deviation_after).str();
  args[kSettleWrite["p_volatilities_before"]] = std::move(volatility_before).str();
  args[kSettleWrite["p_volatilities_after"]] = std::move(volatility_after).str();
  args[kSettleWrite["p_rated_modes"]] = std::move(rated_modes).str();
  args[kSettleWrite["p_rated_players"]] = std::move(rated_players).str();
  args[kSettleWrite["p_final_ratings"]] = std::move(final_rating).str();
  args[kSettleWrite["p_final_deviations"]] = std::move(final_deviation).str();
  args[kSettleWrite["p_final_volatilities"]] = std::move(final_volatility).str();
  args[kSettleWrite["p_final_displayed"]] = std::move(final_displayed).str();
  args[kSettleWrite["p_games"]] = std::move(games).str();
  args[kSettleWrite["p_wins"]] = std::move(wins).str();
  args[kSettleWrite["p_losses"]] = std::move(losses).str();
  args[kSettleWrite["p_draws"]] = std::move(draws).str();
  args[kSettleWrite["p_placements"]] = std::move(placements).str();
  args[kSettleWrite["p_attempt_id"]] = std::to_string(attempt_id);
  return call;
}

// Argument I of the write: moved into libpqxx's parameters, which copy what a container of
// dynamic parameters holds (some hundreds of kilobytes a call), or p_event_players in binary.
template <size_t I>
decltype(auto) WriteArg(WriteCall& call) {
  if constexpr (I == kSettleWrite["p_event_players"]) {
    return static_cast<const pqxx::binarystring&>(call.event_players);
  } else {
    return std::move(call.args[I]);
  }
}

template <size_t... I>
pqxx::result ExecWrite(pqxx::work& tx, WriteCall& call, std::index_sequence<I...>) {
  return tx.exec_prepared(kWriteStatement, WriteArg<I>(call)...);
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
  {
    // Armed only around the transaction: a lost connection is closed after it (below), so a
    // cancel never reaches a connection that is gone.
    Cancellation::Scope cancellable(cancel, [&conn] { CancelQuery(conn); });
    if (!cancellable.ok()) {
      out.failure = CancelledError();
      return out;
    }
    try {
      if (options_.unsafe_release_before_commit_for_test) {
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
        WriteCall write = WriteArgs(requests, out.rooms, settle, rated, call.attempt_id);
        const pqxx::result written =
            ExecWrite(tx, write, std::make_index_sequence<kSettleWrite.parameters.size()>());
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
      spdlog::warn("settlement of {} room(s) lost its connection during COMMIT, outcome unknown",
                   requests.size());
      out.state = Executed::State::kCommitUnknown;
    } else {
      out.failure = UnlessSchemaReady(pool_, pg::StatusOf(*failure, "settle"));
    }
    return out;
  }
  out.state = Executed::State::kCommitted;
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
    auto status = SettleStatusFromSql(row.status == "settle" ? "settled" : row.status);
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

}  // namespace verdict::lobby
