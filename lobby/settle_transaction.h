// SettleTransaction: one settlement call as one database transaction (docs/design.md §5), the
// heart of SettlementStore::SettleBattles, in three steps:
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
#include <string>
#include <vector>

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
  // The system of that declaration; INTERNAL if the database holds one this lobby cannot make.
  Result<const rating::RatingSystem*> Of(const std::string& system, const std::string& model,
                                         const std::string& parameters_json);

 private:
  Mutex mu_;
  std::map<std::string, std::unique_ptr<rating::RatingSystem>> made_ GUARDED_BY(mu_);
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
  Marshalled Marshal(const std::vector<SettleRequest>& requests, bool wait) const;
  Executed Execute(const std::vector<SettleRequest>& requests, const Marshalled& call,
                   Cancellation* cancel);
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
