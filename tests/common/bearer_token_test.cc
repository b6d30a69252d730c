// Bearer tokens: which ones can travel in a header, reading one from a header, and node tokens
// files.
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

TEST(BearerTokenTest, ANodeTokensFileIsReadLineByLine) {
  auto lines = ParseNodeTokensFile(
      "# the lobby's tokens\n\nbattle-01 tok-a\nbattle-01   tok-b\r\nbattle-02\ttok-c", "f");
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_EQ((*lines)[0].node_id, "battle-01");
  EXPECT_EQ((*lines)[0].token, "tok-a");
  EXPECT_EQ((*lines)[1].token, "tok-b") << "a CRLF line is one token, without the CR";
  EXPECT_EQ((*lines)[2].node_id, "battle-02");
  EXPECT_EQ((*lines)[2].token, "tok-c");
}

TEST(BearerTokenTest, ANodeTokensFileRefusesBadLinesBadTokensAndNoTokens) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"battle-01 tok\nbattle-02\n", "f:2: expected 'node_id token'"},
      {"battle-01 two words\n", "f:1: expected 'node_id token'"},
      {"battle-01 s3cr\x01t\n", "f:1: node battle-01's token holds a byte"},
      {"battle-01 caf\xc3\xa9\n", "f:1: node battle-01's token holds a byte"},
      {"", "f names no node token"},
      {"# only a comment\n\n", "f names no node token"},
  };
  for (const auto& c : cases) {
    auto lines = ParseNodeTokensFile(c.text, "f");
    ASSERT_FALSE(lines.ok()) << c.text;
    EXPECT_EQ(lines.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(lines.status().message().rfind(c.message, 0), 0u) << lines.status().message();
    EXPECT_EQ(lines.status().message().find("s3cr"), std::string::npos) << "quotes the token";
  }
}

}  // namespace
}  // namespace verdict
