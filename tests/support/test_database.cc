#include "tests/support/test_database.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

namespace verdict::testing {

bool TestDatabase::Configured() {
  return std::getenv("PGHOST") != nullptr || std::getenv("PGPORT") != nullptr;
}

TestDatabase::TestDatabase() {
  static std::atomic<int> counter{0};
  name_ = "verdict_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 100000);
  pqxx::connection admin("dbname=postgres");
  pqxx::nontransaction tx(admin);
  tx.exec("CREATE DATABASE " + name_);
}

TestDatabase::~TestDatabase() {
  try {
    pqxx::connection admin("dbname=postgres");
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception&) {
    // The server is going away with the test run anyway.
  }
}

std::unique_ptr<pqxx::connection> TestDatabase::Connect() const {
  return std::make_unique<pqxx::connection>(conninfo());
}

std::string TestDatabase::Scalar(const std::string& sql) const {
  auto conn = Connect();
  pqxx::nontransaction tx(*conn);
  pqxx::result r = tx.exec(sql);
  if (r.empty() || r[0][0].is_null()) return "";
  return r[0][0].c_str();
}

void TestDatabase::Exec(const std::string& sql) const {
  auto conn = Connect();
  pqxx::nontransaction tx(*conn);
  tx.exec(sql);
}

}  // namespace verdict::testing
