// The logger the library writes through: spdlog's logger named "verdict", never the default one.
//
// It is made on the first line logged, with the sinks, format and level of spdlog's default
// logger at that moment, so a program that sets up its default logger first sees verdict's lines
// there. A host that wants them elsewhere registers its own logger under the name before it
// starts a node, and the library uses that one:
//
//   spdlog::register_logger(std::make_shared<spdlog::logger>(verdict::kLoggerName, my_sink));
//
// Thread-safe. The logger is looked up once; registering another under the name after the first
// line has no effect (change the sinks of spdlog::get("verdict") instead).
#pragma once

#include <spdlog/logger.h>

namespace verdict {

inline constexpr char kLoggerName[] = "verdict";

spdlog::logger& Log();

}  // namespace verdict
