// verdict-bench's --json object: built as a google.protobuf.Struct and printed by protobuf, so
// labels of any text read back intact and figures that are not finite become null.
#include "bench/report.h"

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <limits>

#include "proto/wire.h"

namespace verdict::bench {
namespace {

TEST(ReportTest, JsonHoldsTheModeFieldsAndRowsInKeyOrder) {
  Report report("drain");
  report.Field("per_s", 12.5);
  report.Field("eta_s", std::numeric_limits<double>::infinity());
  report.Row({{"mode", "verdict"}}, {{"batch", 8}, {"per_s", 3000}});
  EXPECT_EQ(report.Json().value(), R"({"eta_s":null,"mode":"drain","per_s":12.5,)"
                                   R"("rows":[{"batch":8,"mode":"verdict","per_s":3000}]})");
}

TEST(ReportTest, LabelsOfAnyTextReadBackIntact) {
  const std::string label = "a \"quoted\" C:\\path\n\ttab \x01 <tag> caf\xc3\xa9 \xf0\x9f\x8e\xb2";
  Report report("events");
  report.Row({{"mode", label}}, {{"per_s", 1}});
  const auto json = report.Json();
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  google::protobuf::Struct doc;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(*json, wire::BodyFormat::kJson, &doc, &error)) << error;
  EXPECT_EQ(doc.fields().at("mode").string_value(), "events");
  const auto& rows = doc.fields().at("rows").list_value();
  ASSERT_EQ(rows.values_size(), 1);
  EXPECT_EQ(rows.values(0).struct_value().fields().at("mode").string_value(), label);
  EXPECT_EQ(rows.values(0).struct_value().fields().at("per_s").number_value(), 1);
}

}  // namespace
}  // namespace verdict::bench
