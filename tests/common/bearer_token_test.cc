// Bearer tokens: which ones can travel in a header, and reading one from a header.
#include "common/bearer_token.h"

#include <gtest/gtest.h>

namespace verdict {
namespace {

TEST(BearerTokenTest, TheSchemeIsReadInAnyCaseAndTheTokenAfterItsSpaces) {
  for (const char* header :
       {"Bearer abc", "bearer abc", "BEARER abc", "bEaReR abc", "Bearer   abc"}) {
    EXPECT_EQ(BearerTokenOf(header), std::optional<std::string_view>("abc")) << header;
  }
  for (const char* header : {"", "Bearer", "Bearer ", "Bearer   ", "Bearerabc", "Bearer\tabc",
                             " Bearer abc", "Basic abc", "Token abc"}) {
    EXPECT_FALSE(BearerTokenOf(header).has_value()) << header;
  }
}

TEST(BearerTokenTest, OnlyOneWordOfVisibleAsciiCanTravelInAHeader) {
  EXPECT_TRUE(CheckBearerToken("s3cr3t-Token_~!").ok());
  for (const char* bad : {"", "token\n", "two words", "tab\there", "caf\xc3\xa9", "nul\x01"}) {
    const Status s = CheckBearerToken(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().find(bad[0] ? bad : "\x7f"), std::string::npos)
        << "the message quotes the token: " << s.message();
  }
}

}  // namespace
}  // namespace verdict
