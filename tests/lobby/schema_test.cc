// The schema as `verdict-lobby migrate` (lobby::Migrate) leaves it, against a real PostgreSQL: a
// fresh database gets every numbered migration and every function file; a function file whose
// text changed is applied again, alone; an unchanged schema applies nothing; a pre-release schema
// is refused. And the C++ parameter lists of the settlement's two functions (lobby/settle_calls.h)
// are the ones PostgreSQL records for them, and the binary arrays the lobby passes the write
// (lobby/pg/binary_array.h) read as the same values as their array literals. (Two migrations at
// once: lobby_test.cc, ConcurrentMigrationsBothSucceedAndNewerSchemaIsRefused.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "lobby/pg/array_literal.h"
#include "lobby/pg/binary_array.h"

#include "lobby/schema.h"
#include "lobby/settle_calls.h"
#include "lobby/settlement_store.h"
#include "sql/migrations.h"
#include "tests/support/test_database.h"

namespace verdict::testing {
namespace {

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VERDICT_NEED_DATABASE();
    db_ = std::make_unique<TestDatabase>();
  }

  lobby::MigrateReport MustMigrate() {
    auto report = lobby::Migrate({.conninfo = db_->conninfo()});
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? *report : lobby::MigrateReport{-1, -1};
  }

  // The name of the function a file defines: "functions/NAME.sql" -> NAME.
  static std::string FunctionOf(const sql::FunctionFile& f) {
    const std::string name = f.name;
    return name.substr(name.find('/') + 1, name.size() - name.find('/') - 1 - 4);
  }

  std::string Q(const std::string& sql) const { return db_->Scalar(sql); }

  std::unique_ptr<TestDatabase> db_;
};

TEST_F(SchemaTest, FreshDatabaseGetsEveryMigrationAndEveryFunction) {
  const lobby::MigrateReport report = MustMigrate();
  EXPECT_EQ(report.migrations, static_cast<int>(sql::Migrations().size()));
  EXPECT_EQ(report.functions, static_cast<int>(sql::Functions().size()));
  for (const sql::FunctionFile& f : sql::Functions()) {
    EXPECT_EQ(Q("SELECT count(*) FROM pg_proc WHERE proname = '" + FunctionOf(f) + "'"), "1")
        << f.name;
    EXPECT_EQ(
        Q("SELECT sha256 FROM verdict_schema_functions WHERE name = '" + std::string(f.name) + "'"),
        f.checksum);
  }
}

TEST_F(SchemaTest, UnchangedSchemaAppliesNothing) {
  MustMigrate();
  const std::string applied = Q("SELECT max(applied_at) FROM verdict_schema_functions");
  const lobby::MigrateReport again = MustMigrate();
  EXPECT_EQ(again.migrations, 0);
  EXPECT_EQ(again.functions, 0);
  EXPECT_EQ(Q("SELECT max(applied_at) FROM verdict_schema_functions"), applied);
}

// As if verdict_feed_head's file had changed since the database was migrated: its recorded
// checksum is another, and the database holds another body. verdict_node_tag is changed in the
// database only, its record intact: a file that did not change is not applied again, so it stays.
TEST_F(SchemaTest, ChangedFunctionFileIsAppliedAgainAlone) {
  MustMigrate();
  db_->Exec(
      "UPDATE verdict_schema_functions SET sha256 = repeat('0', 64) "
      "WHERE name = 'functions/verdict_feed_head.sql';"
      "CREATE OR REPLACE FUNCTION verdict_feed_head() RETURNS bigint LANGUAGE sql AS "
      "'SELECT -1::bigint';"
      "CREATE OR REPLACE FUNCTION verdict_node_tag(p_node_id text) RETURNS integer "
      "LANGUAGE sql IMMUTABLE STRICT AS 'SELECT 7'");
  ASSERT_EQ(Q("SELECT verdict_feed_head()"), "-1");

  const lobby::MigrateReport report = MustMigrate();
  EXPECT_EQ(report.migrations, 0);
  EXPECT_EQ(report.functions, 1);
  EXPECT_EQ(Q("SELECT verdict_feed_head()"), "0") << "the changed file was not applied";
  EXPECT_EQ(Q("SELECT sha256 = repeat('0', 64) FROM verdict_schema_functions "
              "WHERE name = 'functions/verdict_feed_head.sql'"),
            "f");
  EXPECT_EQ(Q("SELECT verdict_node_tag('node-a')"), "7") << "an unchanged file was applied";
}

// The record of a function file this binary no longer has goes, so that the file is applied
// should it come back (after a migration dropped its function).
TEST_F(SchemaTest, RecordOfARemovedFunctionFileGoes) {
  MustMigrate();
  db_->Exec(
      "INSERT INTO verdict_schema_functions (name, sha256) "
      "VALUES ('functions/verdict_gone.sql', repeat('0', 64))");
  const lobby::MigrateReport report = MustMigrate();
  EXPECT_EQ(report.functions, 0);
  EXPECT_EQ(Q("SELECT count(*) FROM verdict_schema_functions WHERE name = "
              "'functions/verdict_gone.sql'"),
            "0");
  EXPECT_EQ(Q("SELECT count(*) FROM verdict_schema_functions"),
            std::to_string(sql::Functions().size()));
}

// A database migrated by a build from before the migrations were squashed into one baseline
// (its migration 1 had another name) is refused, not migrated on top.
TEST_F(SchemaTest, PreReleaseSchemaIsRefused) {
  db_->Exec(
      "CREATE TABLE verdict_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
      "applied_at timestamptz NOT NULL DEFAULT now());"
      "INSERT INTO verdict_schema_migrations (version, name) VALUES (1, '001_schema.sql'), "
      "(23, '023_pending_settlement.sql')");
  auto refused = lobby::Migrate({.conninfo = db_->conninfo()});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("pre-release"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(Q("SELECT count(*) FROM pg_tables WHERE tablename = 'players'"), "0");
}

// The parameters every C++ caller builds its calls from are the functions' own, names and types
// in order: two arrays of one type swapped on either side fail here.
TEST_F(SchemaTest, SettlementParametersAreTheFunctionsOwn) {
  MustMigrate();
  EXPECT_EQ(Q("SELECT pg_get_function_identity_arguments('verdict_settle_prepare'::regproc)"),
            lobby::kSettlePrepare.IdentityArguments());
  EXPECT_EQ(Q("SELECT pg_get_function_identity_arguments('verdict_settle_write'::regproc)"),
            lobby::kSettleWrite.IdentityArguments());
}

// Each element type the write is passed in binary, at its edges, is the value its array literal
// (lobby/pg/array_literal.h, the form the lobby passed before) reads as: equal as arrays, and
// printed alike. A byte order, an element's length or the array's count written wrong fails here.
template <typename T, typename Literal>
void ExpectBinaryReadsAsLiteral(pqxx::connection& conn, const std::string& type,
                                const std::vector<T>& values, Literal add_to_literal) {
  lobby::pg::BinaryArray<T> binary;
  lobby::pg::ArrayLiteral literal;
  for (const T& v : values) {
    binary.Add(v);
    add_to_literal(literal, v);
  }
  const std::string bytes = std::move(binary).bytes();
  pqxx::nontransaction tx(conn);
  const pqxx::row row = tx.exec_params1(
      "SELECT $1::" + type + " IS NOT DISTINCT FROM $2::" + type + ", ($1::" + type +
          ")::text, ($2::" + type + ")::text, cardinality($1::" + type + ")",
      pqxx::binarystring(bytes.data(), bytes.size()), literal.str());
  EXPECT_TRUE(row[0].as<bool>()) << type << ": " << row[1].c_str() << " vs " << row[2].c_str();
  EXPECT_EQ(row[1].as<std::string>(), row[2].as<std::string>()) << type;
  EXPECT_EQ(row[3].as<size_t>(), values.size()) << type;
}

TEST_F(SchemaTest, BinaryArraysReadAsTheirArrayLiterals) {
  pqxx::connection conn(db_->conninfo());
  const auto add = [](lobby::pg::ArrayLiteral& a, auto v) { a.Add(v); };
  ExpectBinaryReadsAsLiteral<bool>(conn, "boolean[]", {true, false, true}, add);
  ExpectBinaryReadsAsLiteral<int16_t>(conn, "smallint[]", {0, 1, -1, 32767, -32768}, add);
  ExpectBinaryReadsAsLiteral<int32_t>(
      conn, "integer[]",
      {0, 7, -7, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()}, add);
  ExpectBinaryReadsAsLiteral<int64_t>(conn, "bigint[]",
                                      {0, 1, -1, 7529210000005, std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min()},
                                      add);
  ExpectBinaryReadsAsLiteral<double>(
      conn, "double precision[]",
      {1500.0, 1516.0 / 3, -0.0, 5e-324, 1e300, -2.5, std::nan(""),
       std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()},
      add);
  const std::string long_text(300, 'x');
  ExpectBinaryReadsAsLiteral<std::string_view>(
      conn, "text[]",
      {"", "a", "NULL", "with \"quotes\"", "back\\slash", "{braces},commas", "ünïcödé ✓",
       long_text},
      [](lobby::pg::ArrayLiteral& a, std::string_view v) { a.AddText(v); });
  const std::string zeros("\0\0\xff\x01", 4);
  ExpectBinaryReadsAsLiteral<lobby::pg::Bytea>(conn, "bytea[]", {{""}, {zeros}, {"fingerprint"}},
                                               [](lobby::pg::ArrayLiteral& a, lobby::pg::Bytea v) {
                                                 static const char* digits = "0123456789abcdef";
                                                 std::string hex;
                                                 for (unsigned char c : v.bytes)
                                                   hex += {digits[c >> 4], digits[c & 15]};
                                                 a.AddHexBytes(hex);
                                               });
}

}  // namespace
}  // namespace verdict::testing
