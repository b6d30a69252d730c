// The lobby's schema, compiled in from sql/ so a binary always carries exactly the schema it was
// built for: the numbered migrations (sql/NNN_name.sql), which change tables and are applied once
// each in version order, and the function files (sql/functions/NAME.sql), which define the SQL
// functions and are applied again whenever their text changes (Flyway's repeatable migrations).
// `verdict-lobby migrate` applies both (lobby::Migrate). Read-only data: any thread.
#pragma once

#include <span>

namespace verdict::sql {

struct Migration {
  int version;       // NNN from the file name
  const char* name;  // file name
  const char* text;  // the SQL, run in one transaction
};

struct FunctionFile {
  const char* name;      // "functions/NAME.sql"
  const char* checksum;  // sha256 of text, 64 hex digits
  const char* text;      // CREATE OR REPLACE FUNCTION NAME …
};

// All migrations, ordered by version.
std::span<const Migration> Migrations();

// All function files, ordered by name: the order they are applied in. A LANGUAGE sql function is
// checked against what exists when it is created, so it may call only functions whose files sort
// before its own (plpgsql ones resolve at call time).
std::span<const FunctionFile> Functions();

}  // namespace verdict::sql
