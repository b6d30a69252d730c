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

// A bytea element: its bytes (a std::string_view element is a text).
struct Bytea {
  std::string_view bytes;
};

// `v` appended as its type's send function writes it: big-endian.
template <typename U>
void AppendBigEndian(U v, std::string* out) {
  static_assert(std::is_unsigned_v<U>);
  char be[sizeof(U)];
  for (size_t i = 0; i < sizeof(U); ++i) be[i] = static_cast<char>(v >> (8 * (sizeof(U) - 1 - i)));
  out->append(be, sizeof(U));
}

// A bigint parameter in binary.
inline std::string BinaryInt64(int64_t v) {
  std::string out;
  AppendBigEndian(static_cast<uint64_t>(v), &out);
  return out;
}

template <typename T>
class BinaryArray {
 public:
  BinaryArray() {
    AppendBigEndian<uint32_t>(1, &out_);  // dimensions
    AppendBigEndian<uint32_t>(0, &out_);  // no NULL element
    AppendBigEndian<uint32_t>(kOid, &out_);
    AppendBigEndian<uint32_t>(0, &out_);  // the dimension's size, counted by Add
    AppendBigEndian<uint32_t>(1, &out_);  // its lower bound
  }

  void Reserve(size_t elements, size_t bytes_each) {
    out_.reserve(20 + elements * (4 + bytes_each));
  }

  void Add(T value) {
    if constexpr (std::is_same_v<T, std::string_view> || std::is_same_v<T, Bytea>) {
      const std::string_view bytes = Bytes(value);
      AppendBigEndian(static_cast<uint32_t>(bytes.size()), &out_);
      out_.append(bytes);
    } else if constexpr (std::is_same_v<T, bool>) {
      AppendBigEndian<uint32_t>(1, &out_);
      out_.push_back(value ? 1 : 0);
    } else if constexpr (std::is_same_v<T, double>) {  // float8send: the bits as an int8
      AppendBigEndian<uint32_t>(8, &out_);
      AppendBigEndian(std::bit_cast<uint64_t>(value), &out_);
    } else {
      static_assert(std::is_integral_v<T> && std::is_signed_v<T>, "smallint, integer or bigint");
      AppendBigEndian<uint32_t>(sizeof(T), &out_);
      AppendBigEndian(static_cast<std::make_unsigned_t<T>>(value), &out_);
    }
    ++count_;
  }

  // The array's bytes, its size set.
  std::string bytes() && {
    std::string size;
    AppendBigEndian(count_, &size);
    out_.replace(12, 4, size);
    return std::move(out_);
  }

 private:
  // The element type's OID (pg_type).
  static constexpr uint32_t Oid() {
    if constexpr (std::is_same_v<T, bool>) return 16;
    if constexpr (std::is_same_v<T, Bytea>) return 17;
    if constexpr (std::is_same_v<T, int64_t>) return 20;
    if constexpr (std::is_same_v<T, int16_t>) return 21;
    if constexpr (std::is_same_v<T, int32_t>) return 23;
    if constexpr (std::is_same_v<T, std::string_view>) return 25;
    if constexpr (std::is_same_v<T, double>) return 701;
    return 0;
  }
  static constexpr uint32_t kOid = Oid();
  static_assert(kOid != 0,
                "an element is a bool, bytea, smallint, integer, bigint, text or double");

  static std::string_view Bytes(std::string_view text) { return text; }
  static std::string_view Bytes(Bytea bytea) { return bytea.bytes; }

  std::string out_;
  uint32_t count_ = 0;
};

}  // namespace verdict::lobby::pg
