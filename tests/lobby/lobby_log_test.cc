// The lobby's repeated warnings go through the one log rate limit (common/log_rate_limit.h): a
// database outage fails every settlement the same way, and used to write a warning for each
// (44 of the same line in 5 s).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "common/log_rate_limit.h"
#include "lobby/pg/errors.h"

namespace verdict::lobby {
namespace {

// Lines written to spdlog's default logger (the lobby's) while `write` runs.
template <typename F>
std::string LinesOf(F write) {
  std::ostringstream captured;
  auto saved = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "captured", std::make_shared<spdlog::sinks::ostream_sink_st>(captured));
  logger->set_pattern("%l %v");
  spdlog::set_default_logger(logger);
  write();
  spdlog::set_default_logger(saved);
  return captured.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LobbyLogTest, ADatabaseOutageWritesTheBurstAndThenALineASecond) {
  pg::Failure lost{.kind = pg::FailureKind::kTransient,
                   .sqlstate = "08006",
                   .connection_lost = true,
                   .summary = "the database connection was lost",
                   .detail = "server closed the connection unexpectedly"};
  const auto started = std::chrono::steady_clock::now();
  const std::string lines = LinesOf([&] {
    for (int i = 0; i < 1000; ++i) pg::Log(lost, "settle");
  });
  const auto elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
          .count();
  const int burst = static_cast<int>(RepeatedFaultLimit().burst);
  const int written = Count(lines, "settle: the database connection was lost");
  EXPECT_GE(written, burst);
  // The burst, and a line for each second the loop took (a second or two on a slow machine).
  EXPECT_LE(written, burst + 1 + elapsed_s) << lines;

  // A terminal failure needs a human: never held back.
  pg::Failure terminal;
  terminal.kind = pg::FailureKind::kTerminal;
  terminal.summary = "SQLSTATE 42P01";
  const std::string errors = LinesOf([&] {
    for (int i = 0; i < 100; ++i) pg::Log(terminal, "settle");
  });
  EXPECT_EQ(Count(errors, "error settle: SQLSTATE 42P01"), 100);
}

}  // namespace
}  // namespace verdict::lobby
