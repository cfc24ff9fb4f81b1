// `tinysplit run` as configuration: the options as given (RunOptions, bound
// to the command line), turned once into a checked RunConfig (make_run_config)
// that the session executes (cli/run_session.h). Every setting has one place
// here; the boards' and the coordinator's option structs are derived from it
// (spawn_options, swarm_options), never filled in by hand.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/run_faults.h"
#include "coord/boards.h"
#include "coord/failover.h"
#include "net/keyfile.h"
#include "plan/plan.h"
#include "plan/replicate.h"

namespace ts::cli {

// The options as given.
struct RunOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  std::string workers = "3", testbed, image, alloc = "rating", ram = "512K", flash = "8M";
  // Defaults (issue 10): the cost model's choice per block, boards sending
  // to boards. `--strategy neuron --route relay` is the paper's mode.
  std::string strategy = "auto", route = "direct", code = "auto", stream = "auto";
  std::string protocol_cpu = "on";  // plan::kProtocolCpu
  int window = 32;
  double timeout = 10.0, cpm = 0.0, delay = 0.0;
  int repeat = 1;
  std::string store, key_file;
  bool probe = false, json = false;
  bool emulate = false;  // --emulate: local boards take their board type's time (docs/simulator.md)
  std::string input, save_output, save_int8_output, save_overlay, dataset;
  int limit = 0;
  std::vector<std::string> faults;  // --inject-fault KIND:BOARD[:LAYER] (kill | stall | corrupt | flip)
  bool no_failover = false;
  std::string objective = "latency";  // | throughput (cli/run_throughput.h)
  int in_flight = 2;  // --objective throughput: images in flight inside one group (1 = one after another)
  // The planner's prices (plan/cost.h, plan/names.h kCostModels): by default
  // (`auto`) what the boards are. Boards that are processes on this machine
  // share its cores and pay for every exchange in system calls and wake-ups,
  // so they are priced by the measured host figures (data/costs/host.json);
  // QEMU and remote boards by the Teensy 4.1 figures. `teensy` prices local
  // boards as the Teensy-class boards they stand in for.
  std::string cost_model = "teensy";
  const CLI::App* cli = nullptr;  // which options were given (cli::given)
};

// What one run does, checked.
struct RunConfig {
  plan::Objective objective = plan::Objective::Latency;
  plan::Testbed testbed;
  RunFaults faults;
  // The planner's options, its prices included (the session may re-price a
  // run whose fault the host-priced plan could not act on: run_faults.h).
  plan::PlanOptions plan;
  // Inputs: one photo, one prepared tensor or a data set's test images.
  std::string model;        // as loaded (a data set's own model by default)
  std::string model_label;  // as reported
  int size = 0;
  std::string image, input, dataset;
  int limit = 0;
  std::string save_output, save_int8_output;
  std::string save_overlay;  // PNG: the photo, the output map and its text boxes (model/text_map.h)
  // Boards and links.
  std::string store, key_file;  // key_file: --key-file, else the testbed's; "" = no authentication
  net::Key key{};
  double cycles_per_mac = 0, delay_ms = 0;
  // --emulate: the board type the local boards stand in for (a simulator
  // preset, plan/board_kind.h BoardKind::emulates), "" = off. Its figures
  // pace the boards and the coordinator's link (spawn_options, swarm_options).
  std::string emulate;
  int window = 32;
  std::chrono::milliseconds timeout{10000};
  bool failover = true;  // re-plan on the boards left when one fails (latency only)
  bool probe = false;
  int repeat = 1;
  int in_flight = 2;
  bool json = false;
};

// Checks the options and builds the configuration; throws ts::Error (one
// line) for bad input and for a combination in which an option does nothing.
RunConfig make_run_config(const RunOptions& o);

// The boards' and the coordinator's options, derived from the configuration.
coord::SpawnOptions spawn_options(const RunConfig& c);
coord::SwarmOptions swarm_options(const RunConfig& c);

}  // namespace ts::cli
