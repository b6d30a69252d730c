// Fuzz target: the lobby's request decoding, from raw bytes on the socket to a validated
// message — HTTP/1.1 framing with the server's header and body limits (Beast's parser, as the
// server configures it), then the body as protobuf or JSON per Content-Type, then validation.
// Any crash, leak or sanitizer report is a bug; errors are the expected answer to bad input.
#include <utility>  // Boost 1.74 needs std::exchange declared before Beast

#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/validation.h"
#include "proto/wire.h"

namespace http = boost::beast::http;

namespace {

// The lobby's defaults (lobby/http_server.h ServerOptions).
constexpr size_t kMaxBodyBytes = size_t{1} << 20;
constexpr uint32_t kMaxHeaderBytes = 16 * 1024;

void DecodeAndValidate(const http::request<http::string_body>& request) {
  const auto format = verdict::wire::FormatOfContentType(std::string_view(
      request[http::field::content_type].data(), request[http::field::content_type].size()));
  if (!format) return;  // the server answers 415
  const std::string& body = request.body();
  std::string error;
  verdict::v1::BattleResult result;
  if (verdict::wire::DecodeBody(body, *format, &result, &error)) {
    if (verdict::wire::ValidateResult(result).ok()) {
      // What the lobby fingerprints and echoes must survive its own encoding.
      verdict::v1::BattleResult again;
      const std::string bytes = verdict::wire::DeterministicBytes(result);
      if (!again.ParseFromString(bytes) || verdict::wire::DeterministicBytes(again) != bytes) {
        __builtin_trap();
      }
      verdict::wire::EncodeBody(result, verdict::wire::BodyFormat::kJson).value();
    }
  }
  verdict::v1::RoomAllocation allocation;
  if (verdict::wire::DecodeBody(body, *format, &allocation, &error)) {
    (void)verdict::wire::ValidateAllocation(allocation);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(kMaxBodyBytes);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t offset = 0;
  while (offset < size && !parser.is_done()) {
    offset += parser.put(boost::asio::buffer(data + offset, size - offset), ec);
    // Beast's contract (kept by http::async_read in the server): after need_more, put is called
    // again only with more bytes. The whole input was given, so the request is cut short: the
    // server would wait for the rest, then time out. (Calling put again without new bytes
    // trips an assertion inside Beast 1.74's chunk parser, which the first fuzz runs found.)
    if (ec == http::error::need_more) break;
    if (ec) return 0;  // the server answers 400 or 413 and closes
  }
  if (parser.is_done()) DecodeAndValidate(parser.get());
  return 0;
}
