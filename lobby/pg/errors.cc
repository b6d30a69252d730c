#include "lobby/pg/errors.h"

#include <pqxx/except>

#include <spdlog/spdlog.h>

#include "common/log_rate_limit.h"

namespace verdict::lobby::pg {
namespace {

// The SQLSTATEs (and classes, by their first two characters) whose failures a retry may fix:
// the connection or the server went away (class 08; 57P01 admin shutdown, 57P02 crash shutdown,
// 57P03 cannot connect now), the transaction lost a race (40001 serialization failure, 40P01
// deadlock, 40003 statement completion unknown), the server ran short (class 53: disk full, out
// of memory, too many connections), it waited too long or was stopped (55P03 the lock timeout,
// 57014 the statement timeout or a cancel; 25P03 the idle-in-transaction timeout, which ends the
// session), the server only reads (25006: a standby, or a primary being demoted; after a failover
// a new connection finds the new primary). Everything else fails the same way when run again.
constexpr std::string_view kTransientClasses[] = {"08", "53"};
constexpr std::string_view kTransientStates[] = {"57P01", "57P02", "57P03", "40001", "40P01",
                                                 "40003", "55P03", "57014", "25006", "25P03"};

// A failure that takes the connection with it: during a COMMIT, its outcome is unknown.
bool IsConnectionLoss(std::string_view sqlstate) {
  return sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "25P03";
}

}  // namespace

FailureKind KindOfSqlState(std::string_view sqlstate) {
  if (sqlstate.empty()) return FailureKind::kTransient;
  for (std::string_view c : kTransientClasses) {
    if (sqlstate.starts_with(c)) return FailureKind::kTransient;
  }
  for (std::string_view s : kTransientStates) {
    if (sqlstate == s) return FailureKind::kTransient;
  }
  return FailureKind::kTerminal;
}

Failure Classify(const std::exception& e, const pqxx::connection_base* conn, bool committing) {
  Failure f;
  f.detail = e.what();
  const bool open = conn == nullptr || conn->is_open();
  // The connection is gone; during a COMMIT (or an in-doubt one) that leaves the outcome unknown.
  const auto lost = [&](std::string summary, bool in_doubt = false) {
    f.connection_lost = true;
    if (committing || in_doubt) {
      f.kind = FailureKind::kCommitUnknown;
      f.summary = "the database connection was lost during COMMIT: outcome unknown";
    } else {
      f.kind = FailureKind::kTransient;
      f.summary = std::move(summary);
    }
  };
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e)) {
    lost("", /*in_doubt=*/true);
  } else if (dynamic_cast<const pqxx::broken_connection*>(&e)) {
    lost(conn == nullptr ? "cannot connect to the database" : "the database connection was lost");
  } else if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    f.sqlstate = sql->sqlstate();
    if (!open || IsConnectionLoss(f.sqlstate)) {
      lost("the database connection was lost (SQLSTATE " + f.sqlstate + ")");
    } else {
      f.kind = KindOfSqlState(f.sqlstate);
      f.summary = "database error SQLSTATE " + f.sqlstate;
    }
  } else if (dynamic_cast<const pqxx::transaction_rollback*>(&e)) {
    // libpqxx 6 throws class 40 apart from sql_error, without its SQLSTATE.
    f.sqlstate = dynamic_cast<const pqxx::serialization_failure*>(&e)          ? "40001"
                 : dynamic_cast<const pqxx::deadlock_detected*>(&e)            ? "40P01"
                 : dynamic_cast<const pqxx::statement_completion_unknown*>(&e) ? "40003"
                                                                               : "40000";
    if (committing && f.sqlstate == "40003") {
      f.kind = FailureKind::kCommitUnknown;
    } else {
      f.kind = KindOfSqlState(f.sqlstate);
    }
    f.summary = "transaction rolled back (SQLSTATE " + f.sqlstate + ")";
  } else if (!open) {
    lost("the database connection was lost");
  } else {
    // Not an error the server reported, on a connection still open: a row that does not convert,
    // a misuse of libpqxx. A bug, which the same call meets again.
    f.kind = FailureKind::kTerminal;
    f.summary = "unexpected database client error";
  }
  return f;
}

Status StatusOf(const Failure& failure, std::string_view what) {
  std::string message = std::string(what) + ": " + failure.summary;
  return failure.kind == FailureKind::kTerminal ? InternalError(std::move(message))
                                                : UnavailableError(std::move(message));
}

void Log(const Failure& failure, std::string_view what) {
  if (failure.kind == FailureKind::kTerminal) {
    spdlog::error("{}: {}, a retry would fail the same way: {}", what, failure.summary,
                  failure.detail);
    return;
  }
  // A database outage fails every settlement, retention pass and migration step the same way.
  static LogRateLimit transient_failures(RepeatedFaultLimit());
  LogLimited(*spdlog::default_logger(), transient_failures, spdlog::level::warn, "{}: {}: {}", what,
             failure.summary, failure.detail);
}

}  // namespace verdict::lobby::pg
