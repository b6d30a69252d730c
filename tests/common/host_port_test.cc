// Address parsing (common/host_port.h): listen addresses and lobby URLs, well-formed and not.
#include "common/host_port.h"

#include <gtest/gtest.h>

#include <string>

namespace verdict {
namespace {

TEST(ParseHostPortTest, SplitsHostAndPort) {
  std::string host;
  uint16_t port = 1;
  ASSERT_TRUE(ParseHostPort("127.0.0.1:8080", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 8080);
  ASSERT_TRUE(ParseHostPort("0.0.0.0:0", &host, &port));  // a listener's "any port"
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(ParseHostPort("lobby.internal:65535", &host, &port));
  EXPECT_EQ(host, "lobby.internal");
  EXPECT_EQ(port, 65535);
}

TEST(ParseHostPortTest, TakesIpv6InBracketsAndReturnsItWithout) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(ParseHostPort("[::1]:8080", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 8080);
}

TEST(ParseHostPortTest, RefusesMalformedAddressesAndLeavesTheOutputs) {
  for (const char* text :
       {"", "host", "host:", ":80", "host:99999", "host:65536", "host:-1", "host:8o", "host:123456",
        "host:80:81", "::1:80", "[::1]", "[::1]80", "[::1:80", "[]:80", "host]:80", "host: 80"}) {
    std::string host = "unchanged";
    uint16_t port = 7;
    EXPECT_FALSE(ParseHostPort(text, &host, &port)) << text;
    EXPECT_EQ(host, "unchanged") << text;
    EXPECT_EQ(port, 7) << text;
  }
}

TEST(ParseHttpUrlTest, AcceptsHostAndPortOnly) {
  auto url = ParseHttpUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8080);
  EXPECT_FALSE(url->tls);
  url = ParseHttpUrl("http://lobby.internal/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "lobby.internal");
  EXPECT_EQ(url->port, 80);
  url = ParseHttpUrl("https://lobby:8443");
  ASSERT_TRUE(url);
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->port, 8443);
  url = ParseHttpUrl("https://lobby");
  ASSERT_TRUE(url);
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->port, 443);
}

TEST(ParseHttpUrlTest, TakesIpv6InBrackets) {
  auto url = ParseHttpUrl("http://[::1]:8080/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 8080);
  url = ParseHttpUrl("https://[fd00::7]");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "fd00::7");
  EXPECT_EQ(url->port, 443);
}

TEST(ParseHttpUrlTest, RefusesAnythingElse) {
  for (const char* text : {"",
                           "ftp://lobby:443",
                           "http://lobby:99999",
                           "http://lobby:80/v1",
                           "lobby:80",
                           "http://",
                           "https://",
                           "http:///",
                           "http://:80",
                           "http://lobby:",
                           "http://lobby:0",
                           "http://lobby:8o",
                           "http://lobby:123456",
                           "http://::1:80",
                           "http://[::1",
                           "http://[]:80",
                           "http://lobby]:80",
                           "HTTP://lobby",
                           "http//lobby",
                           " http://lobby",
                           "http://lobby:80?x=1"}) {
    EXPECT_FALSE(ParseHttpUrl(text)) << text;
  }
}

TEST(JoinHostPortTest, IsWhatParseHostPortReads) {
  EXPECT_EQ(JoinHostPort("lobby", 80), "lobby:80");
  EXPECT_EQ(JoinHostPort("::1", 8080), "[::1]:8080");
  for (const std::string host : {"lobby", "10.0.0.1", "::1"}) {
    std::string parsed;
    uint16_t port = 0;
    ASSERT_TRUE(ParseHostPort(JoinHostPort(host, 443), &parsed, &port)) << host;
    EXPECT_EQ(parsed, host);
    EXPECT_EQ(port, 443);
  }
}

}  // namespace
}  // namespace verdict
