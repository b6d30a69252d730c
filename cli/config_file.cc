#include "cli/config_file.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace verdict::cli {
namespace {

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

bool HasOption(const CLI::App& app, const std::string& key) {
  return app.get_option_no_throw("--" + key) != nullptr;
}

// The parents of the subcommand (at any depth) that owns `key`, preferring the ones being run.
// Returns false if no subcommand has it; sets *active to whether that subcommand is being run.
bool FindOwner(const CLI::App& app, const std::string& key, std::vector<std::string>* parents,
               bool* active) {
  bool found_inactive = false;
  std::vector<std::string> inactive_parents;
  for (const CLI::App* sub : app.get_subcommands({})) {
    std::vector<std::string> path{sub->get_name()};
    bool sub_active = sub->parsed();
    if (!HasOption(*sub, key)) {
      std::vector<std::string> deeper;
      bool deeper_active = false;
      if (!FindOwner(*sub, key, &deeper, &deeper_active)) continue;
      path.insert(path.end(), deeper.begin(), deeper.end());
      sub_active = sub_active && deeper_active;
    }
    if (sub_active) {
      *parents = path;
      *active = true;
      return true;
    }
    if (!found_inactive) inactive_parents = path;
    found_inactive = true;
  }
  if (!found_inactive) return false;
  *parents = inactive_parents;
  *active = false;
  return true;
}

// Reads the flat key = value format and routes each key to the option it names.
class FlatConfig : public CLI::Config {
 public:
  explicit FlatConfig(const CLI::App* app) : app_(app) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::map<std::string, std::vector<std::string>> values;
    std::vector<std::string> order;
    std::string line;
    for (int number = 1; std::getline(input, line); ++number) {
      const std::string text = Trim(line);
      if (text.empty() || text[0] == '#') continue;
      const std::string where = Where(number);
      const size_t eq = text.find('=');
      if (eq == std::string::npos) {
        throw CLI::ConfigError(where + ": expected 'key = value', got '" + text + "'");
      }
      std::string key = Trim(text.substr(0, eq));
      std::string value = Trim(text.substr(eq + 1));
      if (key.rfind("--", 0) == 0) key = key.substr(2);
      if (key.empty() || key == "config") {
        throw CLI::ConfigError(where + ": bad key '" + key + "'");
      }
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      } else if (const size_t hash = value.find(" #"); hash != std::string::npos) {
        value = Trim(value.substr(0, hash));  // a trailing comment after an unquoted value
      }
      if (!HasOption(*app_, key)) {
        std::vector<std::string> parents;
        bool active = false;
        if (!FindOwner(*app_, key, &parents, &active)) {
          throw CLI::ConfigError(where + ": unknown key '" + key +
                                 "' (keys are the long flag names, see --help)");
        }
        if (!active) continue;  // belongs to a subcommand not being run
        key = CLI::detail::join(parents, ".") + "." + key;
      }
      if (!values.count(key)) order.push_back(key);
      values[key].push_back(value);
    }
    std::vector<CLI::ConfigItem> items;
    for (const std::string& full : order) {
      CLI::ConfigItem item;
      std::string name = full;
      for (size_t dot; (dot = name.find('.')) != std::string::npos; name = name.substr(dot + 1)) {
        item.parents.push_back(name.substr(0, dot));
      }
      item.name = name;
      item.inputs = values[full];
      items.push_back(std::move(item));
    }
    return items;
  }

 private:
  std::string Where(int line) const {
    const CLI::Option* option = app_->get_config_ptr();
    const std::string file =
        option && option->count() > 0 ? option->results().front() : std::string("config");
    return file + ":" + std::to_string(line);
  }

  const CLI::App* app_;
};

}  // namespace

void AddConfigOption(CLI::App& app) {
  app.set_config("--config", "",
                 "read flags from FILE: 'key = value' lines, keys as the long flag names; "
                 "flags given on the command line win")
      ->type_name("FILE");
  app.config_formatter(std::make_shared<FlatConfig>(&app));
}

}  // namespace verdict::cli
