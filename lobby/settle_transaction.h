// SettleTransaction: one settlement call as one database transaction (docs/design.md §5), the
// heart of PgStore::SettleBattles (lobby/pg_store.h), in three steps:
//   marshal  the requests become the typed parameters of verdict_settle_prepare;
//   execute  on one connection: BEGIN; verdict_settle_prepare (locks, verdicts, ratings read under
//            the players' locks); the rating step (lobby/settlement_ratings.h);
//            verdict_settle_write with what it computed; COMMIT;
//   resolve  the rows become one outcome per request; a commit whose fate is unknown is resolved
//            room by room from the receipts, and an outcome read from an earlier receipt waits for
//            the synchronous standby, if there is one.
// Internal to the PostgreSQL store (lobby/pg_store.h); thread-safe (each call leases its own
// connection).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <pqxx/connection>
#include <pqxx/row>

#include "common/mutex.h"
#include "common/status.h"
#include "lobby/cancellation.h"
#include "lobby/pg/pool.h"
#include "lobby/rating/rating_system.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

// The statements SettleTransaction runs, for the pool to prepare on every connection.
std::vector<std::pair<std::string, std::string>> SettleStatements();

// The rating systems of the modes a lobby has settled rooms of, each made once from its mode's
// declaration as the database holds it (system, model, parameters). A mode in use never changes
// (verdict_allocate), so a declaration's system is made once. Thread-safe.
class RatingSystems {
 public:
  // The system of that declaration (`parameters_json`: modes.parameters, lobby/modes.h's
  // StoredParameters); INTERNAL if the database holds one this lobby cannot make.
  Result<const rating::RatingSystem*> Of(std::string_view system, std::string_view model,
                                         std::string_view parameters_json);

 private:
  // (system, model, parameters); looked up by views of a row's fields, without copying them.
  using Declaration = std::tuple<std::string, std::string, std::string>;
  using DeclarationView = std::tuple<std::string_view, std::string_view, std::string_view>;
  // Orders declarations and views of them alike, as views (a tuple of strings and one of views
  // do not compare with every standard library).
  struct ByView {
    using is_transparent = void;
    static DeclarationView View(const DeclarationView& d) { return d; }
    static DeclarationView View(const Declaration& d) {
      return {std::get<0>(d), std::get<1>(d), std::get<2>(d)};
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return View(a) < View(b);
    }
  };
  Mutex mu_;
  std::map<Declaration, std::unique_ptr<rating::RatingSystem>, ByView> made_ GUARDED_BY(mu_);
};

class SettleTransaction {
 public:
  // `pool` must outlive it. `unsafe_release_before_commit_for_test`: StoreOptions's negative
  // control.
  SettleTransaction(pg::Pool& pool, bool unsafe_release_before_commit_for_test);

  // BatchSettler::SettleBattles.
  std::vector<Result<SettleOutcome>> Settle(const std::vector<SettleRequest>& requests, bool wait,
                                            Cancellation* cancel);

 private:
  struct Marshalled;
  struct Executed;
  struct Attempt;
  Marshalled Marshal(const std::vector<SettleRequest>& requests, bool wait) const;
  Executed Execute(const std::vector<SettleRequest>& requests, const Marshalled& call,
                   Cancellation* cancel);
  // The transaction itself, on `conn`: read, rate, write, commit. Throws what libpqxx throws;
  // INTERNAL, the transaction rolled back, for a room whose mode this lobby cannot rate by.
  Status Transact(pqxx::connection& conn, const std::vector<SettleRequest>& requests,
                  const Marshalled& call, Attempt& attempt, Executed& out);
  // `out` for a transaction of `rooms` rooms that failed: in libpqxx (`failure`), its connection
  // dropped; or refused by Transact. `lease` is given back first.
  void Fail(const std::optional<pg::Failure>& failure, const Status& refused, size_t rooms,
            std::optional<pg::Pool::Lease>& lease, Executed& out);
  std::vector<Result<SettleOutcome>> Resolve(const std::vector<SettleRequest>& requests,
                                             Executed executed, Cancellation* cancel);
  std::vector<Result<SettleOutcome>> ResolveUnknownCommit(
      const std::vector<SettleRequest>& requests, int64_t attempt_id);
  template <typename Pick>
  void AwaitReplication(std::vector<Result<SettleOutcome>>& outcomes, Pick from_receipt);

  pg::Pool& pool_;
  const bool unsafe_release_before_commit_;
  RatingSystems systems_;
};

// The receipt of a row whose first columns are (room_id, match_id, outcome, settled_at_ms).
v1::SettlementReceipt ReceiptFromRow(const pqxx::row& row);
// Lowercase hex digits of `bytes`.
std::string Hex(const std::string& bytes);

}  // namespace verdict::lobby
