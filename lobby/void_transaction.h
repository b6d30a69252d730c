// VoidTransaction: the void of one settled match as one database transaction (docs/design.md §5,
// "Voiding a match"), PgStore's GovernanceStore::VoidMatch (lobby/pg_store.h): the match and its
// claim (match_voids), the affected set (verdict_void_affected), the players' and their ratings'
// locks in the settlement's order, the rating step (lobby/void_ratings.h), the writes and the
// battle.voided event. Internal to the PostgreSQL store; thread-safe (each call leases its own
// connection).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "lobby/pg/pool.h"
#include "lobby/settle_transaction.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

// The statements VoidTransaction runs, for the pool to prepare on every connection.
std::vector<std::pair<std::string, std::string>> VoidStatements();

class VoidTransaction {
 public:
  // `pool` must outlive it.
  explicit VoidTransaction(pg::Pool& pool) : pool_(pool) {}

  // GovernanceStore::VoidMatch.
  Result<VoidOutcome> Void(const VoidRequest& request);

 private:
  pg::Pool& pool_;
  RatingSystems systems_;
};

}  // namespace verdict::lobby
