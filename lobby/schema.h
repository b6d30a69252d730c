// `verdict-lobby migrate`: the lobby's schema brought to what this binary embeds, and the
// partitions its first rows need. Stateless; thread-safe.
#pragma once

#include "common/status.h"
#include "lobby/pg/connection.h"
#include "lobby/pg/schema.h"
#include "lobby/retention.h"

namespace verdict::lobby {

using MigrateReport = pg::SchemaReport;

// pg::ApplySchema on a connection opened with `connection`'s defaults and session settings (a
// migration may take long: give it a statement timeout of 0), then the partitions the next rows
// need (EnsurePartitions with `partitions`; `serve` retries those, should this fail).
Result<MigrateReport> Migrate(const pg::ConnectionOptions& connection,
                              const PartitionOptions& partitions = {});

// The schema version this binary expects (the highest embedded migration).
inline int ExpectedSchemaVersion() { return pg::ExpectedSchemaVersion(); }

}  // namespace verdict::lobby
