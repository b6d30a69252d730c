#include "lobby/pg/connection.h"

#include <algorithm>

#include <pqxx/nontransaction>

#include "lobby/pg/errors.h"

namespace verdict::lobby::pg {

std::string ConnectionString(const ConnectionOptions& options) {
  const std::string& user = options.conninfo;
  const bool uri = user.starts_with("postgresql://") || user.starts_with("postgres://");
  // libpq reads connect_timeout in whole seconds and takes anything below 2 as 2.
  std::string ours =
      "connect_timeout=" + std::to_string(std::max<int64_t>(2, options.connect_timeout.count()));
  if (options.keepalive_idle_s > 0) {
    ours += " keepalives=1 keepalives_idle=" + std::to_string(options.keepalive_idle_s) +
            " keepalives_interval=" + std::to_string(options.keepalive_interval_s) +
            " keepalives_count=" + std::to_string(options.keepalive_count);
  }
  if (!uri) return ours + (user.empty() ? "" : " " + user);  // the user's later words win
  // A URI takes parameters after '?'; add ours only where the user set none of them.
  if (user.find("keepalives") != std::string::npos ||
      user.find("connect_timeout") != std::string::npos) {
    return user;
  }
  std::string query = ours;
  std::replace(query.begin(), query.end(), ' ', '&');
  return user + (user.find('?') == std::string::npos ? "?" : "&") + query;
}

std::string SessionSettings(const ConnectionOptions& options) {
  return "SET lock_timeout = " + std::to_string(options.lock_timeout.count()) +
         "; SET statement_timeout = " + std::to_string(options.statement_timeout.count()) +
         "; SET idle_in_transaction_session_timeout = " +
         std::to_string(options.idle_in_transaction_timeout.count());
}

Result<std::unique_ptr<pqxx::connection>> Connect(const ConnectionOptions& options) {
  try {
    auto conn = std::make_unique<pqxx::connection>(ConnectionString(options));
    pqxx::nontransaction(*conn).exec(SessionSettings(options));
    return conn;
  } catch (const std::exception& e) {
    const Failure failure = Classify(e, nullptr, /*committing=*/false);
    Log(failure, "connecting to the database");
    return StatusOf(failure, "connecting to the database");
  }
}

}  // namespace verdict::lobby::pg
