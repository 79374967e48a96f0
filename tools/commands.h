// The stoker CLI's subcommands; each registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace stoker::cli {

// Thrown by a subcommand to exit with a status after printing its report.
struct ExitCode {
  int code;
};

void add_bench_command(CLI::App& app);
void add_pack_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_inspect_state_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
void add_manifest_command(CLI::App& app);
void add_replay_command(CLI::App& app);
}  // namespace stoker::cli
