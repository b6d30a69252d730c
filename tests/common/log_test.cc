// The library logs through spdlog's logger named "verdict" (common/log.h): a host that registers
// its own logger under that name gets every library line there, and none on its default logger.
#include "common/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <memory>
#include <sstream>

#include "common/failpoint.h"

namespace verdict {
namespace {

TEST(LogTest, LibraryLinesGoToTheHostsVerdictLoggerNotToItsDefaultLogger) {
  std::ostringstream host_default, host_verdict;
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "host", std::make_shared<spdlog::sinks::ostream_sink_mt>(host_default)));
  spdlog::register_logger(std::make_shared<spdlog::logger>(
      kLoggerName, std::make_shared<spdlog::sinks::ostream_sink_mt>(host_verdict)));
  // A malformed failpoint entry makes the library log an error on first use (common/failpoint.cc).
  ::setenv("VERDICT_FAILPOINTS", "not-an-entry", 1);
  EXPECT_EQ(CheckFailpoint("log_test.unarmed"), FailAction::kNone);

  EXPECT_NE(host_verdict.str().find("'not-an-entry' is not NAME=ACTION"), std::string::npos)
      << "verdict logger got: " << host_verdict.str();
  EXPECT_EQ(host_default.str(), "");
  EXPECT_EQ(&Log(), spdlog::get(kLoggerName).get());
}

}  // namespace
}  // namespace verdict
