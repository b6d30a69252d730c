#include "lobby/pg/schema.h"

#include <algorithm>
#include <map>
#include <string>

#include <pqxx/pqxx>

#include "lobby/pg/array_literal.h"
#include "sql/migrations.h"

namespace verdict::lobby::pg {
namespace {

constexpr long kMigrationLockKey = 0x7665726469637400;  // "verdict\0"

// The embedded function files' names and checksums, as two array literals.
std::pair<std::string, std::string> EmbeddedFunctions() {
  ArrayLiteral names, checksums;
  for (const auto& f : sql::Functions()) {
    names.AddText(f.name);
    checksums.AddText(f.checksum);
  }
  return {names.str(), checksums.str()};
}

// Drops every function named as the file `file` ("functions/NAME.sql") names it, whatever its
// arguments: a file that changes a function's parameters or result then replaces it, instead of
// failing (CREATE OR REPLACE cannot change a result type) or leaving the old one beside it.
void DropFunctionsOfFile(pqxx::work& tx, std::string_view file) {
  std::string name(file);
  if (name.starts_with("functions/")) name.erase(0, std::string_view("functions/").size());
  if (name.ends_with(".sql")) name.resize(name.size() - 4);
  const pqxx::result found = tx.exec_params(
      "SELECT p.oid::regprocedure::text FROM pg_proc p "
      "WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace",
      name);
  for (const auto& row : found) tx.exec("DROP FUNCTION " + row[0].as<std::string>());
}

}  // namespace

int ExpectedSchemaVersion() { return sql::Migrations().back().version; }

Result<SchemaReport> ApplySchema(pqxx::connection& conn) {
  pqxx::work tx(conn);
  tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLockKey) + ")");
  tx.exec(
      "CREATE TABLE IF NOT EXISTS verdict_schema_migrations ("
      " version integer PRIMARY KEY, name text NOT NULL,"
      " applied_at timestamptz NOT NULL DEFAULT now())");
  tx.exec(
      "CREATE TABLE IF NOT EXISTS verdict_schema_functions ("
      " name text PRIMARY KEY, sha256 text NOT NULL,"
      " applied_at timestamptz NOT NULL DEFAULT now())");
  int current = 0;
  for (const auto& row : tx.exec("SELECT version, name FROM verdict_schema_migrations")) {
    const int version = row[0].as<int>();
    current = std::max(current, version);
    if (version > ExpectedSchemaVersion()) continue;
    const auto known = std::find_if(sql::Migrations().begin(), sql::Migrations().end(),
                                    [&](const sql::Migration& m) { return m.version == version; });
    if (known == sql::Migrations().end() || row[1].as<std::string>() != known->name) {
      return FailedPreconditionError(
          "the database's migration " + std::to_string(version) + " is '" +
          row[1].as<std::string>() +
          "', which this binary does not have: a schema of a pre-release build, which no "
          "migration leads from; make the database anew");
    }
  }
  if (current > ExpectedSchemaVersion()) {
    return FailedPreconditionError("database schema is version " + std::to_string(current) +
                                   ", newer than the " + std::to_string(ExpectedSchemaVersion()) +
                                   " this binary knows; refusing to touch it");
  }
  SchemaReport report;
  for (const auto& m : sql::Migrations()) {
    if (m.version <= current) continue;
    tx.exec(m.text);
    tx.exec_params("INSERT INTO verdict_schema_migrations (version, name) VALUES ($1, $2)",
                   m.version, m.name);
    ++report.migrations;
  }
  // The functions after the tables they use; each file again whenever its text changed.
  std::map<std::string, std::string> applied;
  for (const auto& row : tx.exec("SELECT name, sha256 FROM verdict_schema_functions")) {
    applied[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  for (const auto& f : sql::Functions()) {
    const auto found = applied.find(f.name);
    if (found != applied.end() && found->second == f.checksum) continue;
    DropFunctionsOfFile(tx, f.name);
    tx.exec(f.text);
    tx.exec_params(
        "INSERT INTO verdict_schema_functions (name, sha256) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()",
        f.name, f.checksum);
    ++report.functions;
  }
  // A file no longer embedded: its function goes, and so does its record, so that the file is
  // applied again should it come back.
  for (const auto& [name, checksum] : applied) {
    const bool embedded =
        std::any_of(sql::Functions().begin(), sql::Functions().end(),
                    [&name = name](const sql::FunctionFile& f) { return name == f.name; });
    if (!embedded) DropFunctionsOfFile(tx, name);
  }
  tx.exec_params("DELETE FROM verdict_schema_functions WHERE name <> ALL ($1::text[])",
                 EmbeddedFunctions().first);
  tx.commit();
  return report;
}

Status CheckSchema(pqxx::transaction_base& tx) {
  const auto [names, checksums] = EmbeddedFunctions();
  // One statement: the version, whether the session only reads, and the embedded function files
  // the database does not have as embedded (missing, or applied from other text).
  const pqxx::row row = tx.exec_params1(
      "SELECT (SELECT coalesce(max(version), 0) FROM verdict_schema_migrations), "
      "current_setting('transaction_read_only') = 'on', "
      "(SELECT string_agg(x.name, ', ' ORDER BY x.name) "
      " FROM unnest($1::text[], $2::text[]) AS x(name, sha256) "
      " WHERE NOT EXISTS (SELECT 1 FROM verdict_schema_functions f "
      "                   WHERE f.name = x.name AND f.sha256 = x.sha256))",
      names, checksums);
  if (row[1].as<bool>()) {
    return UnavailableError(
        "the database only reads (a standby, or a primary being demoted): no settlement can "
        "commit; a conninfo naming every node with target_session_attrs=read-write finds the "
        "primary");
  }
  const int version = row[0].as<int>();
  if (version != ExpectedSchemaVersion()) {
    return FailedPreconditionError("database schema is version " + std::to_string(version) +
                                   ", this lobby needs " + std::to_string(ExpectedSchemaVersion()) +
                                   "; run `verdict-lobby migrate`");
  }
  if (!row[2].is_null()) {
    return FailedPreconditionError("the database's SQL functions are not this lobby's (" +
                                   row[2].as<std::string>() +
                                   " differ); run `verdict-lobby migrate`");
  }
  return Status::Ok();
}

}  // namespace verdict::lobby::pg
