// BinaryArray: a one-dimensional array in PostgreSQL's binary format (array_recv), built one
// element at a time, for a statement parameter sent in binary; BinaryValue: one value in the same
// format, for a scalar parameter. A settlement's write passes some tens of thousands of elements a
// call; in binary none of them is printed by the lobby nor parsed by the server (a double as text
// is the shortest digits that read back as it, and reading it back is strtod), no text is escaped
// or unescaped, and a bytea is its bytes, not its hex digits. Text elements must be valid in the
// connection's encoding (the server checks, as it does for text parameters). A value type; not
// thread-safe.
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

// The C++ types sent in binary, each with its SQL type: the type's OID (pg_type) and its name as
// PostgreSQL spells it (pg_get_function_identity_arguments). A type without one is not sent.
struct SqlType {
  uint32_t oid = 0;
  std::string_view name;
};
template <typename T>
inline constexpr SqlType kSqlTypeOf{};
template <>
inline constexpr SqlType kSqlTypeOf<bool>{16, "boolean"};
template <>
inline constexpr SqlType kSqlTypeOf<Bytea>{17, "bytea"};
template <>
inline constexpr SqlType kSqlTypeOf<int64_t>{20, "bigint"};
template <>
inline constexpr SqlType kSqlTypeOf<int16_t>{21, "smallint"};
template <>
inline constexpr SqlType kSqlTypeOf<int32_t>{23, "integer"};
template <>
inline constexpr SqlType kSqlTypeOf<std::string_view>{25, "text"};
template <>
inline constexpr SqlType kSqlTypeOf<double>{701, "double precision"};

// `v` appended as its type's send function writes it: big-endian.
template <typename U>
void AppendBigEndian(U v, std::string* out) {
  static_assert(std::is_unsigned_v<U>);
  char be[sizeof(U)];
  for (size_t i = 0; i < sizeof(U); ++i) be[i] = static_cast<char>(v >> (8 * (sizeof(U) - 1 - i)));
  out->append(be, sizeof(U));
}

// The size of `value` in binary: the size of its type, or its bytes.
template <typename T>
size_t BinarySize(const T& value) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return value.size();
  } else if constexpr (std::is_same_v<T, Bytea>) {
    return value.bytes.size();
  } else {
    return sizeof(T);
  }
}

// `value` appended as its type's send function writes it (boolsend, int2send, float8send, ...).
template <typename T>
void AppendBinary(T value, std::string* out) {
  static_assert(kSqlTypeOf<T>.oid != 0,
                "a value is a bool, bytea, smallint, integer, bigint, text or double");
  if constexpr (std::is_same_v<T, std::string_view>) {
    out->append(value);
  } else if constexpr (std::is_same_v<T, Bytea>) {
    out->append(value.bytes);
  } else if constexpr (std::is_same_v<T, bool>) {
    out->push_back(value ? 1 : 0);
  } else if constexpr (std::is_same_v<T, double>) {  // float8send: the bits as an int8
    AppendBigEndian(std::bit_cast<uint64_t>(value), out);
  } else {
    AppendBigEndian(static_cast<std::make_unsigned_t<T>>(value), out);
  }
}

// A scalar parameter in binary.
template <typename T>
std::string BinaryValue(T value) {
  std::string out;
  AppendBinary(value, &out);
  return out;
}

template <typename T>
class BinaryArray {
 public:
  BinaryArray() {
    AppendBigEndian<uint32_t>(1, &out_);  // dimensions
    AppendBigEndian<uint32_t>(0, &out_);  // no NULL element
    AppendBigEndian<uint32_t>(kSqlTypeOf<T>.oid, &out_);
    AppendBigEndian<uint32_t>(0, &out_);  // the dimension's size, counted by Add
    AppendBigEndian<uint32_t>(1, &out_);  // its lower bound
  }

  // Room for `elements` more elements of `bytes` bytes in all (BinarySize), so that adding them
  // never copies the array.
  void Reserve(size_t elements, size_t bytes) { out_.reserve(out_.size() + elements * 4 + bytes); }

  void Add(T value) {
    AppendBigEndian(static_cast<uint32_t>(BinarySize(value)), &out_);
    AppendBinary(value, &out_);
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
  std::string out_;
  uint32_t count_ = 0;
};

}  // namespace verdict::lobby::pg
