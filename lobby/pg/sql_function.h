// SqlFunction: an SQL function's name and parameter list, declared once in C++ for every caller
// to build its call from, each argument set by name (a name not in the list does not compile). A
// test checks each list against what PostgreSQL records for the function
// (pg_get_function_identity_arguments), so the two cannot drift apart. Constant data and pure
// functions: any thread.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace verdict::lobby::pg {

// One parameter: its name and its type as PostgreSQL spells it
// (pg_get_function_identity_arguments).
struct SqlParameter {
  std::string_view name;
  std::string_view type;
};

template <size_t N>
struct SqlFunction {
  std::string_view name;
  std::array<SqlParameter, N> parameters;

  // One call's arguments, each an SQL expression ("$1", "p.kills", an array literal's
  // placeholder) at its parameter's index.
  using Args = std::array<std::string, N>;

  // The index of the parameter named `parameter`, or N if the function has none of that name.
  constexpr size_t Find(std::string_view parameter) const {
    for (size_t i = 0; i < N; ++i) {
      if (parameters[i].name == parameter) return i;
    }
    return N;
  }

  // The index of the parameter named `parameter`. A name not in the list does not compile.
  consteval size_t operator[](std::string_view parameter) const {
    if (Find(parameter) == N) throw "the function has no parameter of that name";
    return Find(parameter);
  }

  // "name((a1)::bigint[], (a2)::text[], …)": each of `sql` passed as its parameter, cast to the
  // parameter's type. An argument left empty makes a statement PostgreSQL refuses.
  std::string Call(const Args& sql) const {
    std::string call = std::string(name) + "(";
    for (size_t i = 0; i < N; ++i) {
      if (i > 0) call += ", ";
      call += "(" + sql[i] + ")::" + std::string(parameters[i].type);
    }
    return call + ")";
  }

  // Call with the placeholders $1 … $N, for a prepared statement whose parameters are the
  // arguments in the list's order.
  std::string PreparedCall() const {
    Args placeholders;
    for (size_t i = 0; i < N; ++i) placeholders[i] = "$" + std::to_string(i + 1);
    return Call(placeholders);
  }

  // The list as pg_get_function_identity_arguments writes it: "p_room_ids bigint[], …".
  std::string IdentityArguments() const {
    std::string list;
    for (const SqlParameter& p : parameters) {
      if (!list.empty()) list += ", ";
      list += std::string(p.name) + " " + std::string(p.type);
    }
    return list;
  }
};

template <size_t N>
SqlFunction(std::string_view, std::array<SqlParameter, N>) -> SqlFunction<N>;

}  // namespace verdict::lobby::pg
