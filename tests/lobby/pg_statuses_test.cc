// Each status table of lobby/pg_statuses.h holds exactly the names its SQL function can return,
// read from the function's text as the binary carries it (sql/migrations.h): a status added to
// the SQL without its entry, or an entry the SQL no longer returns, fails here. No database.
#include "lobby/pg_statuses.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <string_view>

#include "sql/migrations.h"

namespace verdict::lobby {
namespace {

// The text of sql/functions/NAME.sql without its comments.
std::string FunctionText(std::string_view name) {
  const std::string file = "functions/" + std::string(name) + ".sql";
  for (const sql::FunctionFile& function : sql::Functions()) {
    if (function.name != file) continue;
    static const std::regex kComment("--[^\n]*");
    return std::regex_replace(function.text, kComment, "");
  }
  ADD_FAILURE() << "no function file " << file;
  return "";
}

// The status names the text of a function returns: each literal it returns as a row
// (`RETURN QUERY SELECT 'busy'`, `RETURNING 'imported'`), assigns (`v_status := 'in_use'`) or
// chooses in a CASE (`THEN 'created'`, `ELSE 'duplicate'`). Statuses are lower case; the
// outcomes a settlement's CASE also chooses ('SETTLED', 'ABORTED') are not.
std::set<std::string> StatusNamesIn(const std::string& text) {
  static const std::regex kStatus(R"((RETURN QUERY SELECT|RETURNING|:=|THEN|ELSE)\s+'([a-z_]+)')");
  std::set<std::string> names;
  for (auto match = std::sregex_iterator(text.begin(), text.end(), kStatus);
       match != std::sregex_iterator(); ++match) {
    names.insert((*match)[2]);
  }
  return names;
}

template <typename E, size_t N>
std::set<std::string> NamesOf(const SqlStatus<E> (&table)[N]) {
  std::set<std::string> names;
  for (const SqlStatus<E>& entry : table) names.emplace(entry.name);
  return names;
}

TEST(PgStatusesTest, TheReaderFindsEachWayAFunctionReturnsAStatus) {
  EXPECT_EQ(StatusNamesIn("RETURN QUERY SELECT 'a', NULL; RETURNING 'b_c', x; v := 'd'; "
                          "CASE WHEN y THEN 'e' ELSE 'f' END; THEN 'SETTLED'; x = 'g'"),
            (std::set<std::string>{"a", "b_c", "d", "e", "f"}));
  // The comments, which name statuses too, are gone.
  EXPECT_EQ(FunctionText("verdict_allocate").find("--"), std::string::npos);
}

TEST(PgStatusesTest, AllocationStatusesAreVerdictAllocates) {
  EXPECT_EQ(NamesOf(kAllocateStatuses), StatusNamesIn(FunctionText("verdict_allocate")));
}

TEST(PgStatusesTest, DeclarationStatusesAreVerdictDeclareModes) {
  EXPECT_EQ(NamesOf(kDeclareStatuses), StatusNamesIn(FunctionText("verdict_declare_mode")));
}

TEST(PgStatusesTest, ImportStatusesAreVerdictImportRatings) {
  EXPECT_EQ(NamesOf(kImportStatuses), StatusNamesIn(FunctionText("verdict_import_rating")));
}

TEST(PgStatusesTest, ReleaseStatusesAreVerdictReleaseRooms) {
  EXPECT_EQ(NamesOf(kReleaseStatuses), StatusNamesIn(FunctionText("verdict_release_room")));
}

// verdict_settle_prepare answers the verdicts of the parts it is composed of (each
// verdict_settle_* function it calls, found in its text), and passes them through, and its own
// 'settle' (kSettleToWrite: the room is written, answered kSettled once the write commits).
TEST(PgStatusesTest, SettlementStatusesAreThoseOfVerdictSettlePrepareAndItsParts) {
  const std::string prepare = FunctionText("verdict_settle_prepare");
  std::set<std::string> returned = StatusNamesIn(prepare);
  static const std::regex kPart(R"((verdict_settle_[a-z_]+)\()");
  std::set<std::string> parts;
  for (auto match = std::sregex_iterator(prepare.begin(), prepare.end(), kPart);
       match != std::sregex_iterator(); ++match) {
    if ((*match)[1] == "verdict_settle_prepare") continue;
    parts.insert((*match)[1]);
    returned.merge(StatusNamesIn(FunctionText((*match)[1].str())));
  }
  EXPECT_TRUE(parts.count("verdict_settle_guard") && parts.count("verdict_settle_check"))
      << "the parts were not found in verdict_settle_prepare's text";

  EXPECT_EQ(NamesOf(kSettleStatuses), returned);
}

}  // namespace
}  // namespace verdict::lobby
