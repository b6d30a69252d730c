#include "lobby/schema.h"

#include <spdlog/spdlog.h>

#include "lobby/pg/errors.h"

namespace verdict::lobby {

Result<MigrateReport> Migrate(const pg::ConnectionOptions& connection,
                              const PartitionOptions& partitions) {
  auto conn = pg::Connect(connection);
  if (!conn.ok()) return conn.status();
  Result<MigrateReport> report = InternalError("migration not run");
  try {
    report = pg::ApplySchema(**conn);
  } catch (const std::exception& e) {
    const pg::Failure failure = pg::Classify(e, conn->get(), /*committing=*/false);
    pg::Log(failure, "migration");
    return pg::StatusOf(failure, "migration failed");
  }
  if (!report.ok()) return report;
  // Partitions for the first rows, so that they do not wait in the DEFAULT partition for `serve`
  // to make them (which it retries, should this fail).
  if (auto made = EnsurePartitions(connection, partitions, std::chrono::seconds(5)); !made.ok()) {
    spdlog::warn("migrate: no partitions made ahead yet: {}", made.status().ToString());
  }
  return report;
}

}  // namespace verdict::lobby
