#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <google/protobuf/struct.pb.h>

#include "proto/wire.h"

namespace verdict::bench {
namespace {

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// A figure as JSON: a number, or null for one that is not finite (JSON has no infinity).
google::protobuf::Value JsonNumber(double v) {
  google::protobuf::Value value;
  if (std::isfinite(v)) {
    value.set_number_value(v);
  } else {
    value.set_null_value(google::protobuf::NULL_VALUE);
  }
  return value;
}

}  // namespace

Result<std::string> Report::Json() const {
  google::protobuf::Struct doc;
  auto& top = *doc.mutable_fields();
  top["mode"].set_string_value(mode_);
  for (const auto& [name, value] : fields_) top[name] = JsonNumber(value);
  google::protobuf::ListValue* rows = top["rows"].mutable_list_value();
  for (const RowData& row : rows_) {
    auto& out = *rows->add_values()->mutable_struct_value()->mutable_fields();
    for (const auto& [name, value] : row.labels) out[name].set_string_value(value);
    for (const auto& [name, value] : row.values) out[name] = JsonNumber(value);
  }
  return wire::ToJson(doc);
}

int Report::Emit(const OutputOptions& output) const {
  if (output.json) {
    auto json = Json();
    if (!json.ok()) {
      std::fprintf(stderr, "%s\n", json.status().ToString().c_str());
      return 1;
    }
    std::printf("%s\n", json->c_str());
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
