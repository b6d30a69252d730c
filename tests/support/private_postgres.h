// PrivatePostgres: a PostgreSQL server of the test's own — initdb into a temporary directory,
// its own port and socket directory — so a test can stop and restart it under load without
// touching the shared cluster (pg_virtualenv allows one per machine). As root the server runs
// as the `postgres` user. Removed with its data when destroyed. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace verdict::testing {

class PrivatePostgres {
 public:
  // Creates and starts a server; null (after printing why) if that is impossible here.
  static std::unique_ptr<PrivatePostgres> Start();
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  // libpq connection string for `dbname` on this server.
  std::string conninfo(const std::string& dbname = "postgres") const;
  uint16_t port() const { return port_; }

  // `pg_ctl stop -m fast` (or `immediate`: a crash, recovered from WAL on the next start).
  bool Stop(bool immediate = false);
  bool Restart();

 private:
  PrivatePostgres() = default;
  // Runs a shell command as the server's owner; true on exit status 0.
  bool AsOwner(const std::string& command) const;

  std::string bin_dir_;
  std::string dir_;
  uint16_t port_ = 0;
  bool running_ = false;
};

}  // namespace verdict::testing
