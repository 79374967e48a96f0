// stoker info SOURCE: what a source holds.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "commands.h"
#include "stoker/source.h"

namespace stoker::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a source: records, classes, records per class");
  auto source = std::make_shared<std::string>();
  cmd->add_option("source", *source, "ImageFolder directory or list file")->required();
  cmd->callback([source] {
    auto s = open_source(*source);
    std::printf("%s\n", s->describe().c_str());
    std::map<std::int64_t, std::size_t> per_class;
    for (std::size_t i = 0; i < s->size(); ++i) per_class[s->label(i)]++;
    for (const auto& [label, n] : per_class) {
      const auto& names = s->classes();
      std::string name = static_cast<std::size_t>(label) < names.size() ? names[static_cast<std::size_t>(label)] : "";
      std::printf("  class %3lld %-24s %zu records\n", static_cast<long long>(label), name.c_str(), n);
    }
  });
}

}  // namespace stoker::cli
