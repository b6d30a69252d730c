// Report: how every benchmark mode hands over its figures — a readable table is printed by
// the mode itself; this collects the headline fields and raw rows for `--json` (one object on
// stdout) and `--csv DIR` (one file of rows per mode). Not thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace verdict::bench {

struct OutputOptions {
  bool json = false;    // print one JSON object on stdout (the table goes to stderr)
  std::string csv_dir;  // write DIR/<mode>.csv when set
};

class Report {
 public:
  explicit Report(std::string mode) : mode_(std::move(mode)) {}
  void Field(const std::string& name, double value) { fields_[name] = value; }
  void Row(std::map<std::string, std::string> labels, std::map<std::string, double> values) {
    rows_.push_back({std::move(labels), std::move(values)});
  }
  // One JSON object: "mode", the fields, and "rows", each row's labels (strings) and values
  // (numbers; null when not finite). Keys in alphabetical order.
  Result<std::string> Json() const;
  // Writes JSON and/or CSV as asked; returns the process exit code.
  int Emit(const OutputOptions& output) const;

 private:
  struct RowData {
    std::map<std::string, std::string> labels;
    std::map<std::string, double> values;
  };
  std::string mode_;
  std::map<std::string, double> fields_;
  std::vector<RowData> rows_;
};

// A fresh directory for a benchmark's files under $TMPDIR (or /tmp).
std::string TempRoot();

}  // namespace verdict::bench
