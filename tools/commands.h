// The stoker CLI's subcommands; each registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace stoker::cli {
void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
}  // namespace stoker::cli
