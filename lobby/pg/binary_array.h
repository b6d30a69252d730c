// BinaryArray: a one-dimensional array in PostgreSQL's binary format (array_recv), built one
// element at a time, for a statement parameter sent in binary. A settlement's write passes some
// tens of thousands of elements a call; in binary none of them is printed by the lobby nor parsed
// by the server (a double as text is the shortest digits that read back as it, and reading it back
// is strtod), no text is escaped or unescaped, and a bytea is its bytes, not its hex digits. Text
// elements must be valid in the connection's encoding (the server checks, as it does for text
// parameters). A value type; not thread-safe.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace verdict::lobby::pg {

// The SQL types an element can be, by their C++ type: each one's OID (pg_type) and its binary
// form (its type's send function: big-endian integers, an IEEE double's bits as an int8).
struct Bytea {
  std::string_view bytes;
};

template <typename T>
struct BinaryElement;
template <>
struct BinaryElement<bool> {
  static constexpr uint32_t kOid = 16;
};
template <>
struct BinaryElement<int64_t> {
  static constexpr uint32_t kOid = 20;
};
template <>
struct BinaryElement<int16_t> {
  static constexpr uint32_t kOid = 21;
};
template <>
struct BinaryElement<int32_t> {
  static constexpr uint32_t kOid = 23;
};
template <>
struct BinaryElement<std::string_view> {
  static constexpr uint32_t kOid = 25;
};
template <>
struct BinaryElement<double> {
  static constexpr uint32_t kOid = 701;
};
template <>
struct BinaryElement<Bytea> {
  static constexpr uint32_t kOid = 17;
};

template <typename T>
class BinaryArray {
 public:
  BinaryArray() {
    AppendBig<uint32_t>(1);  // dimensions
    AppendBig<uint32_t>(0);  // no NULL element
    AppendBig<uint32_t>(BinaryElement<T>::kOid);
    AppendBig<uint32_t>(0);  // the dimension's size, counted by Add
    AppendBig<uint32_t>(1);  // its lower bound
  }

  void Reserve(size_t elements, size_t bytes_each) {
    out_.reserve(20 + elements * (4 + bytes_each));
  }

  void Add(T value) {
    if constexpr (std::is_same_v<T, std::string_view>) {
      AppendBig<uint32_t>(static_cast<uint32_t>(value.size()));
      out_.append(value);
    } else if constexpr (std::is_same_v<T, Bytea>) {
      AppendBig<uint32_t>(static_cast<uint32_t>(value.bytes.size()));
      out_.append(value.bytes);
    } else if constexpr (std::is_same_v<T, bool>) {
      AppendBig<uint32_t>(1);
      out_.push_back(value ? 1 : 0);
    } else if constexpr (std::is_same_v<T, double>) {
      AppendBig<uint32_t>(8);
      AppendBig<uint64_t>(std::bit_cast<uint64_t>(value));
    } else {
      AppendBig<uint32_t>(sizeof(T));
      AppendBig<std::make_unsigned_t<T>>(static_cast<std::make_unsigned_t<T>>(value));
    }
    ++count_;
  }

  uint32_t size() const { return count_; }

  // The array's bytes, its size set.
  std::string bytes() && {
    for (int i = 0; i < 4; ++i) out_[12 + i] = static_cast<char>(count_ >> (24 - 8 * i));
    return std::move(out_);
  }

 private:
  template <typename U>
  void AppendBig(U v) {
    char be[sizeof(U)];
    for (size_t i = 0; i < sizeof(U); ++i)
      be[i] = static_cast<char>(v >> (8 * (sizeof(U) - 1 - i)));
    out_.append(be, sizeof(U));
  }

  std::string out_;
  uint32_t count_ = 0;
};

}  // namespace verdict::lobby::pg
