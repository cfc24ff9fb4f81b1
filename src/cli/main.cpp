// tinysplit: split CNN inference across networked microcontrollers.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <memory>

#include "cli/cli.h"
#include "model/graph.h"

namespace ts::cli {

namespace {
std::vector<std::pair<CLI::App*, Command>>& commands() {
  static std::vector<std::pair<CLI::App*, Command>> c;
  return c;
}
}  // namespace

CLI::App& add_command(CLI::App& app, const std::string& name, const std::string& help, Command run) {
  CLI::App* sub = app.add_subcommand(name, help);
  commands().emplace_back(sub, std::move(run));
  return *sub;
}

}  // namespace ts::cli

int main(int argc, char** argv) {
  using namespace ts::cli;
  // The planner makes and drops plans of many megabytes (a sweep, hundreds):
  // freed memory is kept for the next one, not handed back to the system and
  // faulted in again (simulate --sweep 1..120: about 7 % of its time).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"tinysplit: run CNNs split across networked microcontrollers, neuron by neuron", "tinysplit"};
  app.require_subcommand(1);
  register_inspect(app);
  register_quantize(app);
  register_eval(app);
  register_plan(app);
  register_run(app);
  register_worker(app);
  register_keygen(app);
  register_simulate(app);
  register_dump(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error of the tool.
    std::fprintf(stderr, "tinysplit: error: %s (see --help)\n", e.what());
    return e.get_exit_code();
  }
  try {
    for (auto& [sub, cmd] : commands())
      if (sub->parsed()) return cmd();
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "tinysplit: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tinysplit: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tinysplit: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
