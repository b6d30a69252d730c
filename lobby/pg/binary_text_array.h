// BinaryTextArray: a one-dimensional text[] in PostgreSQL's binary format (array_recv), built one
// element at a time, for a parameter sent in binary. Each element is its length and its bytes, so
// the server copies it as it is: nothing in it is escaped by the lobby nor scanned for quotes by
// the server, as an array literal's elements are. The elements must be valid in the connection's
// encoding (the server checks). A value type; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace verdict::lobby::pg {

class BinaryTextArray {
 public:
  BinaryTextArray() {
    AppendInt32(1);   // dimensions
    AppendInt32(0);   // no NULL element
    AppendInt32(25);  // the element type: text's OID
    AppendInt32(0);   // the dimension's size, set by Add
    AppendInt32(1);   // its lower bound
  }

  void Reserve(size_t bytes) { out_.reserve(kHeader + bytes); }

  void Add(std::string_view text) {
    AppendInt32(static_cast<uint32_t>(text.size()));
    out_.append(text);
    SetInt32(kSizeAt, ++count_);
  }

  uint32_t size() const { return count_; }
  const std::string& bytes() const& { return out_; }
  std::string bytes() && { return std::move(out_); }

 private:
  static constexpr size_t kHeader = 20;
  static constexpr size_t kSizeAt = 12;

  void AppendInt32(uint32_t v) {
    const char be[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                        static_cast<char>(v >> 8), static_cast<char>(v)};
    out_.append(be, 4);
  }
  void SetInt32(size_t at, uint32_t v) {
    out_[at] = static_cast<char>(v >> 24);
    out_[at + 1] = static_cast<char>(v >> 16);
    out_[at + 2] = static_cast<char>(v >> 8);
    out_[at + 3] = static_cast<char>(v);
  }

  std::string out_;
  uint32_t count_ = 0;
};

}  // namespace verdict::lobby::pg
