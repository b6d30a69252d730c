// BinaryCall: an SQL function's arguments, sent in binary, built from typed rows. A call is made
// of parts, each a struct whose static Columns() says once which parameter each of its members is
// sent as (a std::tuple of Column): the call's own scalars are one struct, each member a scalar
// parameter (BinaryValue); its arrays are vectors of row structs, each member of every row one
// element of an array parameter (BinaryArray). One loop turns every column of every part into its
// argument. The columns are checked at compile time: each parameter of the function is one column
// of one part, exactly once, and each column's C++ type is its parameter's SQL type (kSqlTypeOf:
// bigint is int64_t, text std::string_view or std::string, ...; an array parameter's, its
// element's). Pure functions: any thread.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "lobby/pg/binary_array.h"

namespace verdict::lobby::pg {

// One column of a part: the parameter its member `member` is sent as.
template <typename Part, typename T>
struct Column {
  std::string_view parameter;
  T Part::*member;
};
template <typename Part, typename T>
Column(std::string_view, T Part::*) -> Column<Part, T>;

// The type a member of type T is sent as: a std::string as the text it holds, any other as itself.
template <typename T>
using SentAs = std::conditional_t<std::is_same_v<T, std::string>, std::string_view, T>;

namespace internal {

// The index in `kFunction` of the parameter of each of Part's columns, in Columns() order; the
// function's size for a name it does not have.
template <const auto& kFunction, typename Part>
constexpr auto ParameterIndexes() {
  return std::apply(
      [](const auto&... column) {
        return std::array<size_t, sizeof...(column)>{kFunction.Find(column.parameter)...};
      },
      Part::Columns());
}

template <const auto& kFunction, typename... Parts>
constexpr bool CoversEachParameterOnce() {
  std::array<int, kFunction.parameters.size()> uses{};
  bool known = true;
  const auto count = [&](const auto& indexes) {
    for (size_t at : indexes) {
      if (at < uses.size()) {
        ++uses[at];
      } else {
        known = false;
      }
    }
  };
  (count(ParameterIndexes<kFunction, Parts>()), ...);
  for (int u : uses) {
    if (u != 1) return false;
  }
  return known;
}

// Whether `column`'s C++ type is its parameter's SQL type, or for `array`, its element type.
template <const auto& kFunction, typename Part, typename T>
constexpr bool TypeMatches(const Column<Part, T>& column, bool array) {
  const size_t at = kFunction.Find(column.parameter);
  if (at == kFunction.parameters.size()) return false;
  const std::string_view type = kFunction.parameters[at].type;
  const std::string_view name = kSqlTypeOf<SentAs<T>>.name;
  if (!array) return type == name;
  return type.size() == name.size() + 2 && type.starts_with(name) && type.ends_with("[]");
}

template <const auto& kFunction, typename Part>
constexpr bool TypesMatch(bool array) {
  return std::apply(
      [array](const auto&... column) { return (TypeMatches<kFunction>(column, array) && ...); },
      Part::Columns());
}

// A scalar part's member.
template <typename Part, typename T>
std::string Encoded(const Part& part, T Part::*member) {
  return BinaryValue(SentAs<T>(part.*member));
}

// A row part's member, of every row: the array's size is counted first, so that it is allocated
// once.
template <typename Row, typename T>
std::string Encoded(const std::vector<Row>& rows, T Row::*member) {
  using Element = SentAs<T>;
  size_t bytes = 0;
  for (const Row& row : rows) bytes += BinarySize(Element(row.*member));
  BinaryArray<Element> array;
  array.Reserve(rows.size(), bytes);
  for (const Row& row : rows) array.Add(Element(row.*member));
  return std::move(array).bytes();
}

}  // namespace internal

// `kFunction` (a SqlFunction declared constexpr at namespace scope) called with the scalars of
// the struct `Scalars` and the arrays of the row structs `Rows...`.
template <const auto& kFunction, typename Scalars, typename... Rows>
class BinaryCall {
 public:
  static_assert(internal::CoversEachParameterOnce<kFunction, Scalars, Rows...>(),
                "each parameter of the function is one column of one part, exactly once");
  static_assert(internal::TypesMatch<kFunction, Scalars>(false) &&
                    (internal::TypesMatch<kFunction, Rows>(true) && ...),
                "each column's C++ type is its parameter's SQL type (an array's, its element's)");
  // True: naming it makes the compiler run the checks above.
  static constexpr bool kChecked = true;

  using Args = std::array<std::string, kFunction.parameters.size()>;

  // One call's arguments, each in binary at its parameter's index.
  static Args Encode(const Scalars& scalars, const std::vector<Rows>&... rows) {
    Args args;
    Fill<Scalars>(scalars, args);
    (Fill<Rows>(rows, args), ...);
    return args;
  }

 private:
  template <typename Part, typename Source>
  static void Fill(const Source& source, Args& args) {
    Fill<Part>(source, args,
               std::make_index_sequence<std::tuple_size_v<decltype(Part::Columns())>>());
  }

  template <typename Part, typename Source, size_t... I>
  static void Fill(const Source& source, Args& args, std::index_sequence<I...>) {
    constexpr auto kColumns = Part::Columns();
    constexpr auto kAt = internal::ParameterIndexes<kFunction, Part>();
    ((args[kAt[I]] = internal::Encoded(source, std::get<I>(kColumns).member)), ...);
  }
};

}  // namespace verdict::lobby::pg
