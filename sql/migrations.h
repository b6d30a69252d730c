// The lobby's schema migrations, compiled in from sql/NNN_name.sql so a binary always carries
// exactly the schema it was built for. Applied in version order by `verdict-lobby migrate`.
#pragma once

#include <span>

namespace verdict::sql {

struct Migration {
  int version;       // NNN from the file name
  const char* name;  // file name
  const char* text;  // the SQL, run in one transaction
};

// All migrations, ordered by version.
std::span<const Migration> Migrations();

}  // namespace verdict::sql
