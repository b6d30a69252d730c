// TestDatabase: a fresh PostgreSQL database for one test, created on the server that libpq's
// PG* environment names (scripts/test runs the suite under pg_virtualenv) and dropped with
// everything in it afterwards. Not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <pqxx/pqxx>
#include <string>

// In a test or a fixture's SetUp: skips it when no server is configured, and fails it instead when
// VERDICT_REQUIRE_PG is set (as scripts/test does), so that a run there never passes by skipping.
#define VERDICT_NEED_DATABASE()                                                             \
  do {                                                                                      \
    if (!::verdict::testing::TestDatabase::Configured()) {                                  \
      if (std::getenv("VERDICT_REQUIRE_PG")) FAIL() << "no PostgreSQL configured (PGHOST)"; \
      GTEST_SKIP() << "no PostgreSQL configured; run through ./scripts/test";               \
    }                                                                                       \
  } while (0)

namespace verdict::testing {

class TestDatabase {
 public:
  // Whether a server is configured. Without one, database tests skip, unless
  // VERDICT_REQUIRE_PG is set (as scripts/test does), in which case they fail.
  static bool Configured();

  TestDatabase();
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  const std::string& name() const { return name_; }
  std::string conninfo() const { return "dbname=" + name_; }
  // A new connection to this database.
  std::unique_ptr<pqxx::connection> Connect() const;
  // Runs `sql` and returns the first column of the first row as text ("" if no row or NULL).
  std::string Scalar(const std::string& sql) const;
  void Exec(const std::string& sql) const;

 private:
  std::string name_;
};

}  // namespace verdict::testing
