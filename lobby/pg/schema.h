// The lobby's schema in a database: bringing it to what this binary embeds (sql/migrations.h), and
// telling whether a database serves exactly that, as readiness asks. Called by `verdict-lobby
// migrate` (lobby/schema.h), the readiness probe and the store. Stateless; thread-safe.
#pragma once

#include <pqxx/connection>
#include <pqxx/transaction_base>

#include "common/status.h"

namespace verdict::lobby::pg {

// What one ApplySchema applied.
struct SchemaReport {
  int migrations = 0;  // numbered migrations (sql/NNN_*.sql)
  int functions = 0;   // function files (sql/functions/*.sql) new or changed since last applied
};

// Brings the database of `conn` to the schema this binary embeds, in one transaction under an
// advisory lock (so concurrent runs are safe: the second finds nothing left to do): the numbered
// migrations it lacks, in version order, then every function file whose sha256 differs from the
// one recorded when it was last applied (verdict_schema_functions), in name order, each after
// the functions of its name are dropped (so a file may change a function's signature); the
// functions of files it no longer embeds are dropped.
// FAILED_PRECONDITION if the database has a newer schema, or migrations this binary does not have
// under their numbers (a pre-release schema); otherwise failures as pg/errors.h translates them.
Result<SchemaReport> ApplySchema(pqxx::connection& conn);

// OK if `tx`'s database takes writes and serves exactly this binary's schema: the numbered
// version and every function file's checksum. UNAVAILABLE for a session that only reads (a
// standby, or `tx` itself a read-only transaction: give it a read-write one or a
// nontransaction), FAILED_PRECONDITION naming what differs (`verdict-lobby migrate` fixes it). A
// database without the schema's tables fails the statement (42P01), which the caller translates.
Status CheckSchema(pqxx::transaction_base& tx);

// The schema version this binary expects (the highest embedded migration).
int ExpectedSchemaVersion();

}  // namespace verdict::lobby::pg
