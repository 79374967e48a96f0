// stoker: command-line tools around the loader.
#include <cstdio>

#include "commands.h"
#include "stoker/status.h"
#include "stoker/version.h"

int main(int argc, char** argv) {
  CLI::App app{"stoker: keeps a training job's accelerator fed. Subcommands: pack, manifest, inspect, inspect-state, verify, bench, doctor, replay."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stoker " STOKER_VERSION);
  stoker::cli::add_pack_command(app);
  stoker::cli::add_inspect_command(app);
  stoker::cli::add_inspect_state_command(app);
  stoker::cli::add_verify_command(app);
  stoker::cli::add_bench_command(app);
  stoker::cli::add_doctor_command(app);
  stoker::cli::add_manifest_command(app);
  stoker::cli::add_replay_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const stoker::Error& e) {
    std::fprintf(stderr, "stoker: %s\n", e.what());
    return 1;
  } catch (const stoker::cli::ExitCode& e) {
    return e.code;
  }
  return 0;
}
