// How the lobby opens a PostgreSQL connection: one place for the connection defaults (connect
// timeout, TCP keepalives) and the session settings (lock, statement and idle-in-transaction
// timeouts) that every
// command's connections get, whether `serve`'s pool, its readiness probe and event feed, or
// `migrate`, `retain`, `new-epoch` and `reconcile`. So no command can hang on an unreachable
// database host, or wait for a lock without limit. Stateless; thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <pqxx/connection>

#include "common/status.h"

namespace verdict::lobby::pg {

struct ConnectionOptions {
  // libpq connection string (key=value words or a postgresql:// URI); empty means libpq's PG*
  // environment variables. With a primary and standbys, name them all and ask for the writable one
  // (`host=a,b port=5432,5432 target_session_attrs=read-write`): every new connection then finds
  // whichever is the primary now. Default: "".
  std::string conninfo;
  // How long opening a connection may take (libpq's connect_timeout, whole seconds, at least 2),
  // unless `conninfo` sets its own. Default: 5 s.
  std::chrono::seconds connect_timeout{5};
  // How long a statement may wait for a lock (a room held by another session, say) before it fails
  // (SQLSTATE 55P03, transient). 0 disables it. Default: 2 s.
  std::chrono::milliseconds lock_timeout{2000};
  // How long any statement may run before it is cancelled (57014, transient). 0 disables it.
  // Default: 5 s.
  std::chrono::milliseconds statement_timeout{5000};
  // How long a transaction may wait between two of its statements, on the lobby's own work (the
  // rating step of a settlement, say), before the server ends the session and with it the
  // transaction and its locks (idle_in_transaction_session_timeout, 25P03: the connection is
  // lost, transient). So no bug of the lobby's can hold a room's or a player's locks for ever,
  // where no statement runs for a statement timeout to see. 0 disables it. Default: 5 s.
  std::chrono::milliseconds idle_in_transaction_timeout{5000};
  // TCP keepalives, so that a database host that vanished without closing the connection is
  // noticed: first probe after this idle time, then `keepalive_interval_s` apart, given up after
  // `keepalive_count` unanswered; unless `conninfo` sets its own. 0 idle turns them off. Ignored
  // for Unix-domain sockets. Default: 10 s, 5 s, 3.
  int keepalive_idle_s = 10;
  int keepalive_interval_s = 5;
  int keepalive_count = 3;
};

// `options.conninfo` with the connection defaults added where it sets none of its own (its own
// words win); key=value strings and postgresql:// URIs both work.
std::string ConnectionString(const ConnectionOptions& options);

// The statements that give a new connection its session settings.
std::string SessionSettings(const ConnectionOptions& options);

// A new connection with the defaults and the session settings. UNAVAILABLE when the server
// cannot be reached (libpq's text, which names hosts and paths, goes to the log only).
Result<std::unique_ptr<pqxx::connection>> Connect(const ConnectionOptions& options);

}  // namespace verdict::lobby::pg
