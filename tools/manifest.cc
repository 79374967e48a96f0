// stoker manifest PATTERN: a manifest (source/manifest.h) for shards that
// have none, from their `.idx` sidecars (built where missing).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "stoker/source.h"

namespace stoker::cli {

void add_manifest_command(CLI::App& app) {
  auto pattern = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto labels = std::make_shared<std::string>("cls");
  auto* cmd = app.add_subcommand("manifest", "Write the manifest of local tar shards (beside them, from their .idx sidecars)");
  cmd->add_option("pattern", *pattern, "the shards: a brace pattern or glob (train-{000000..000999}.tar)")->required();
  cmd->add_option("-o,--out", *out, "the manifest's path (default: beside the shards, train-{...}.tar -> train.manifest)");
  cmd->add_option("--labels", *labels, "where labels come from: cls or json:<field> (default cls)");
  cmd->callback([pattern, out, labels] {
    const std::string path = write_manifest(*pattern, *out, *labels);
    std::printf("%s\n", path.c_str());
  });
}

}  // namespace stoker::cli
