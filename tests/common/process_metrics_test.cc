// Prometheus' standard process metrics and verdict_build_info (common/process_metrics.h): the
// names and types its client libraries export, values that agree with what the kernel says by
// other means, and parsers that take the kernel's own formats (and refuse what is not one).
#include "common/process_metrics.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "common/build_info.h"

namespace verdict::metrics {
namespace {

// When this test binary was loaded: its process started at most a moment before.
const double kLoadedAt =
    std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

// Each sample line of `text` by its series (name and labels), and each TYPE line's type.
struct Rendered {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
};

Rendered Render() {
  Registry registry;
  AddProcessMetrics(registry);
  Rendered r;
  std::istringstream lines(registry.RenderText());
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# TYPE ")) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      r.types[name] = type;
    } else if (!line.starts_with("#")) {
      const size_t space = line.rfind(' ');
      r.samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
  }
  return r;
}

TEST(ProcessMetricsTest, ExportsTheStandardNamesWithTheirTypes) {
  const Rendered r = Render();
  const std::map<std::string, std::string> expected = {{"process_cpu_seconds_total", "counter"},
                                                       {"process_resident_memory_bytes", "gauge"},
                                                       {"process_virtual_memory_bytes", "gauge"},
                                                       {"process_open_fds", "gauge"},
                                                       {"process_max_fds", "gauge"},
                                                       {"process_start_time_seconds", "gauge"},
                                                       {"verdict_build_info", "gauge"}};
  EXPECT_EQ(r.types, expected);
  for (const auto& [name, type] : expected) {
    if (name == "verdict_build_info") continue;
    ASSERT_TRUE(r.samples.count(name)) << name;
    EXPECT_FALSE(std::isnan(r.samples.at(name))) << name;
  }
}

TEST(ProcessMetricsTest, BuildInfoCarriesTheVersionAndRevisionOfThisBuild) {
  const Rendered r = Render();
  const std::string series = std::string("verdict_build_info{version=\"") + ThisBuild().version +
                             "\",revision=\"" + ThisBuild().revision + "\"}";
  ASSERT_TRUE(r.samples.count(series)) << series;
  EXPECT_EQ(r.samples.at(series), 1);
  EXPECT_NE(std::string(ThisBuild().revision), "");
}

TEST(ProcessMetricsTest, OpenFdsCountsEachDescriptorOpenedAndMaxFdsIsTheSoftLimit) {
  const double before = Render().samples.at("process_open_fds");
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) fds.push_back(open("/dev/null", O_RDONLY));
  EXPECT_EQ(Render().samples.at("process_open_fds"), before + 5);
  for (int fd : fds) close(fd);
  EXPECT_EQ(Render().samples.at("process_open_fds"), before);

  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(Render().samples.at("process_max_fds"), static_cast<double>(limit.rlim_cur));
}

TEST(ProcessMetricsTest, ResidentMemoryGrowsWithMemoryTouched) {
  const double before = Render().samples.at("process_resident_memory_bytes");
  constexpr size_t kBytes = 64 << 20;
  std::vector<char> touched(kBytes);
  std::memset(touched.data(), 1, touched.size());
  const Rendered after = Render();
  EXPECT_GE(after.samples.at("process_resident_memory_bytes"), before + kBytes * 0.9);
  EXPECT_GE(after.samples.at("process_virtual_memory_bytes"),
            after.samples.at("process_resident_memory_bytes"));
  EXPECT_EQ(touched[kBytes / 2], 1);
}

double RusageCpuSeconds() {
  rusage usage{};
  EXPECT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

TEST(ProcessMetricsTest, CpuSecondsAgreeWithGetrusage) {
  // Some CPU time to measure (the kernel counts it in clock ticks of 10 ms), however loaded
  // the machine is.
  volatile double sink = 0;
  while (RusageCpuSeconds() < 0.2) {
    for (int i = 0; i < 100'000; ++i) sink = sink + std::sqrt(sink + 1);
  }
  const double before = RusageCpuSeconds();
  const double cpu = Render().samples.at("process_cpu_seconds_total");
  const double after = RusageCpuSeconds();
  EXPECT_GE(cpu, before - 0.02);
  EXPECT_LE(cpu, after + 0.02);
}

TEST(ProcessMetricsTest, StartTimeIsWhenThisProcessStarted) {
  const double start = Render().samples.at("process_start_time_seconds");
  // The kernel gives the boot time in whole seconds, and the start in clock ticks (10 ms) after it.
  EXPECT_LE(start, kLoadedAt + 0.02);
  EXPECT_GT(start, kLoadedAt - 5);
}

TEST(ProcessMetricsTest, ParsersTakeTheKernelsFormats) {
  // A command name with spaces and parentheses: fields are counted after its last ')'.
  const std::string stat =
      "4242 (verdict (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 123456 "
      "733233152 6140 18446744073709551615 1 1 0 0 0 0 0 4096 17 0 0 0 0 0 0";
  const auto parsed = ParseProcessStat(stat);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->utime_ticks, 250u);
  EXPECT_EQ(parsed->stime_ticks, 75u);
  EXPECT_EQ(parsed->start_ticks, 123456u);
  EXPECT_EQ(parsed->vsize_bytes, 733233152u);
  EXPECT_EQ(parsed->rss_pages, 6140u);
  EXPECT_FALSE(ParseProcessStat("4242 (cut short) S 1 2 3"));
  EXPECT_FALSE(ParseProcessStat("no parenthesis at all"));
  EXPECT_FALSE(ParseProcessStat(""));

  const std::string limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max cpu time              unlimited            unlimited            seconds   \n"
      "Max open files            1024                 524288               files     \n";
  EXPECT_EQ(ParseMaxOpenFiles(limits), 1024);
  EXPECT_EQ(ParseMaxOpenFiles("Max open files            unlimited            unlimited   files\n"),
            std::numeric_limits<double>::infinity());
  EXPECT_FALSE(ParseMaxOpenFiles("Max cpu time unlimited unlimited seconds\n"));

  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"), 1700000000u);
  EXPECT_FALSE(ParseBootTime("cpu  1 2 3\n"));
  EXPECT_FALSE(ParseBootTime("btime soon\n"));
}

TEST(ProcessMetricsTest, AReadingThatCannotBeTakenRendersAsNaN) {
  Registry registry;
  registry.AddGauge("unreadable", "A gauge whose source is gone.",
                    [] { return std::numeric_limits<double>::quiet_NaN(); });
  EXPECT_NE(registry.RenderText().find("\nunreadable NaN\n"), std::string::npos)
      << registry.RenderText();
}

}  // namespace
}  // namespace verdict::metrics
