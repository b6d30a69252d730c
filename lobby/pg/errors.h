// What a PostgreSQL failure means to the lobby, decided in one place: every command (serve's
// settlements, readiness and event feed, retain, migrate, new-epoch, reconcile) translates
// libpqxx's exceptions here, by the one SQLSTATE table in errors.cc. A failure is of one of
// three kinds:
//   transient       the same call may succeed when run again: the connection or the server went
//                   away, a lock or statement timeout, a serialization failure or deadlock, a
//                   server short of resources, a server that only reads (a standby);
//   terminal        the same call fails the same way every time: a data exception, a constraint
//                   violated, a missing function, a bug on our side;
//   commit unknown  the connection was lost while a COMMIT ran: the transaction may or may not
//                   have committed, and only the database, asked again, can tell.
// Stateless; thread-safe.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <pqxx/connection>

#include "common/status.h"

namespace verdict::lobby::pg {

enum class FailureKind { kTransient, kTerminal, kCommitUnknown };

// The kind of a failure the server reported with `sqlstate`, for a statement that is not a
// COMMIT; "" (a failure on the client's side, not known to be deterministic) is transient.
FailureKind KindOfSqlState(std::string_view sqlstate);

struct Failure {
  FailureKind kind = FailureKind::kTerminal;
  std::string sqlstate;          // empty when the server reported none
  bool connection_lost = false;  // the connection is unusable: close it, and its pool's idle ones
  std::string summary;  // fit for any client: "the database connection was lost", "SQLSTATE 23505"
  std::string detail;   // libpq's own text (it may name hosts and paths): for the log only
};

// What the exception `e` means. `conn` (may be null) is the connection the call ran on, asked
// whether it is still open; `committing` says the call was a COMMIT, whose loss leaves the
// outcome unknown.
Failure Classify(const std::exception& e, const pqxx::connection_base* conn, bool committing);

// The Status a caller returns for `failure` in `what` ("settle", "retention", …): UNAVAILABLE for
// transient and commit-unknown failures, INTERNAL for terminal ones; the message is
// "<what>: <summary>".
Status StatusOf(const Failure& failure, std::string_view what);

// Logs `failure` in `what` with its detail: a warning for what a retry may fix (rate-limited:
// an outage repeats it for every call), an error for a terminal failure (that needs a human).
void Log(const Failure& failure, std::string_view what);

}  // namespace verdict::lobby::pg
