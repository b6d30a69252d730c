#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace verdict::bench {
namespace {

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

int Report::Emit(const OutputOptions& output) const {
  if (output.json) {
    std::string out = "{\"mode\":\"" + mode_ + "\"";
    for (const auto& [name, value] : fields_) out += ",\"" + name + "\":" + Number(value);
    out += ",\"rows\":[";
    for (size_t i = 0; i < rows_.size(); ++i) {
      out += i ? ",{" : "{";
      bool first = true;
      for (const auto& [name, value] : rows_[i].labels) {
        out += std::string(first ? "" : ",") + "\"" + name + "\":\"" + value + "\"";
        first = false;
      }
      for (const auto& [name, value] : rows_[i].values) {
        out += std::string(first ? "" : ",") + "\"" + name + "\":" + Number(value);
        first = false;
      }
      out += "}";
    }
    std::printf("%s]}\n", out.c_str());
  }
  if (!output.csv_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(output.csv_dir, ec);
    const std::string path = output.csv_dir + "/" + mode_ + ".csv";
    std::ofstream csv(path);
    if (!csv) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    std::set<std::string> label_names, value_names;
    for (const auto& r : rows_) {
      for (const auto& [n, v] : r.labels) label_names.insert(n);
      for (const auto& [n, v] : r.values) value_names.insert(n);
    }
    bool first = true;
    for (const auto& n : label_names) csv << (first ? "" : ",") << n, first = false;
    for (const auto& n : value_names) csv << (first ? "" : ",") << n, first = false;
    csv << "\n";
    for (const auto& r : rows_) {
      first = true;
      for (const auto& n : label_names) {
        auto it = r.labels.find(n);
        csv << (first ? "" : ",") << (it == r.labels.end() ? "" : it->second);
        first = false;
      }
      for (const auto& n : value_names) {
        auto it = r.values.find(n);
        csv << (first ? "" : ",") << (it == r.values.end() ? "" : Number(it->second));
        first = false;
      }
      csv << "\n";
    }
    std::fprintf(stderr, "rows written to %s\n", path.c_str());
  }
  return 0;
}

std::string TempRoot() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/verdict-bench-XXXXXX";
  return ::mkdtemp(pattern.data());
}

}  // namespace verdict::bench
