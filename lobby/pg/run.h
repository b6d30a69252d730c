// Run: the one way the lobby's stores call the database. It runs a body on a pooled connection,
// as Pool::Run does (pg/errors.h's table decides what a failure means), and then turns an
// INTERNAL failure into UNAVAILABLE when the database is not the one this binary expects (not
// migrated yet, say): that error is the deployment's, not the request's, and waits instead of
// being refused for good. Thread-safe.
#pragma once

#include "common/status.h"
#include "lobby/pg/pool.h"

namespace verdict::lobby::pg {

// `failed` as it is, unless it is INTERNAL while the database does not serve this binary's schema
// (CheckSchema, asked on a pooled connection): then UNAVAILABLE saying why.
Status UnlessSchemaReady(Pool& pool, const Status& failed);

// Pool::Run, then UnlessSchemaReady on its failure. `body(lease)` returns T or Result<T>.
template <typename T, typename F>
Result<T> Run(Pool& pool, const char* what, F body) {
  Result<T> ran = pool.Run<T>(what, std::move(body));
  if (!ran.ok()) return UnlessSchemaReady(pool, ran.status());
  return ran;
}

}  // namespace verdict::lobby::pg
