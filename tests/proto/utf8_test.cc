// wire::IsValidUtf8 against every placement of a bad or multi-byte sequence inside ASCII runs,
// since it skips ASCII eight bytes at a time: a flaw that sits in a skipped word must still be
// found, and a valid sequence split across words must still pass.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/wire.h"

namespace verdict::wire {
namespace {

struct Sequence {
  std::string bytes;
  bool valid;
};

const std::vector<Sequence>& Sequences() {
  static const std::vector<Sequence> sequences = {
      {"\xc3\xa9", true},           // é
      {"\xe2\x82\xac", true},       // €
      {"\xf0\x9f\x8e\xae", true},   // 🎮
      {"\xff", false},              // never in UTF-8
      {"\xc3", false},              // truncated
      {"\xc0\xaf", false},          // overlong '/'
      {"\xed\xa0\x80", false},      // a surrogate
      {"\xf4\x90\x80\x80", false},  // above U+10FFFF
      {"\x80", false},              // a continuation byte alone
  };
  return sequences;
}

TEST(Utf8Test, EveryPlacementInsideAsciiIsJudgedByTheSequence) {
  for (const Sequence& sequence : Sequences()) {
    for (size_t before = 0; before <= 17; ++before) {
      for (size_t after = 0; after <= 17; after += 4) {
        const std::string text =
            std::string(before, 'a') + sequence.bytes + std::string(after, 'b');
        EXPECT_EQ(IsValidUtf8(text), sequence.valid)
            << before << " ASCII bytes, then " << sequence.bytes.size() << " bytes, then " << after
            << " ASCII bytes";
      }
    }
  }
}

TEST(Utf8Test, AsciiOfEveryLengthIsValid) {
  for (size_t n = 0; n <= 40; ++n) EXPECT_TRUE(IsValidUtf8(std::string(n, 'x'))) << n;
}

TEST(Utf8Test, ReplacementKeepsValidTextAndMarksEachBadByte) {
  EXPECT_EQ(ValidUtf8("room 42 \xc3\xa9t\xc3\xa9"), "room 42 \xc3\xa9t\xc3\xa9");
  EXPECT_EQ(ValidUtf8("abcdefgh\xffz"), "abcdefgh\xef\xbf\xbdz");
}

}  // namespace
}  // namespace verdict::wire
