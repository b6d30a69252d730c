#include "lobby/pg/run.h"

#include <pqxx/pqxx>

#include "lobby/pg/schema.h"

namespace verdict::lobby::pg {

Status UnlessSchemaReady(Pool& pool, const Status& failed) {
  if (failed.code() != StatusCode::kInternal) return failed;
  Status verdict;
  const auto check = [&] {
    return pool.Run<bool>("readiness", [&](Pool::Lease& lease) {
      // Not a read-only transaction: the check asks whether the session only reads.
      pqxx::nontransaction tx(lease.conn());
      verdict = CheckSchema(tx);
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

}  // namespace verdict::lobby::pg
