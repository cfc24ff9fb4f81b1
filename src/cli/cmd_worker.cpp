// tinysplit worker: one emulated board on this machine.
#include "cli/cli.h"
#include "net/host_board.h"
#include "plan/testbed.h"

namespace ts::cli {

void register_worker(CLI::App& app) {
  add_command(app, "worker", "Run one emulated board (a Teensy 4.1 budget by default) listening for a coordinator",
              [](CLI::App& sub) -> Command {
                auto listen = std::make_shared<std::string>("127.0.0.1:0");
                auto ram = std::make_shared<std::string>("512K");
                auto flash = std::make_shared<std::string>("8M");
                auto clock = std::make_shared<int>(600);
                auto id = std::make_shared<int>(0);
                auto window = std::make_shared<int>(32);
                auto store = std::make_shared<std::string>();
                auto cpm = std::make_shared<double>(0.0);
                auto delay = std::make_shared<double>(0.0);
                auto crash = std::make_shared<int>(-1), stall = std::make_shared<int>(-1), garble = std::make_shared<int>(-1);
                sub.add_option("--listen", *listen, "HOST:PORT to listen on (port 0 = any free port)")->capture_default_str();
                sub.add_option("--ram", *ram, "RAM arena budget, e.g. 512K")->capture_default_str();
                sub.add_option("--flash", *flash, "flash capacity, e.g. 8M")->capture_default_str();
                sub.add_option("--clock-mhz", *clock, "clock reported to the coordinator (and used by --cycles-per-mac)")
                    ->capture_default_str()->check(CLI::Range(1, 65535));
                sub.add_option("--id", *id, "board id")->capture_default_str()->check(CLI::Range(0, 65534));
                sub.add_option("--window", *window, "frames in flight when sending results (1 = stop-and-wait)")
                    ->capture_default_str()->check(CLI::Range(1, 64));
                sub.add_option("--store", *store, "folder holding the board's committed fragment (its flash)");
                sub.add_option("--cycles-per-mac", *cpm, "emulate the clock: stretch compute to MACs*cycles/clock (0 = off)")
                    ->check(CLI::Range(0.0, 1e6));
                sub.add_option("--delay-ms", *delay, "inject this delay before every send and receive (0 = off)")
                    ->check(CLI::Range(0.0, 1e6));
                sub.add_option("--crash-at-layer", *crash, "test hook: drop the connection at this layer")->group("");
                sub.add_option("--stall-at-layer", *stall, "test hook: stop answering at this layer")->group("");
                sub.add_option("--garble-at-layer", *garble, "test hook: corrupt an output frame at this layer")->group("");
                return [=]() -> int {
                  net::HostBoardOptions o;
                  o.cfg.id = uint16_t(*id);
                  o.cfg.clock_mhz = uint16_t(*clock);
                  const int64_t r = plan::parse_bytes(*ram), f = plan::parse_bytes(*flash);
                  if (r <= 0 || r > (int64_t(1) << 31)) throw Error("--ram must be between 1 byte and 2 GiB");
                  if (f <= 0 || f > (int64_t(1) << 31)) throw Error("--flash must be between 1 byte and 2 GiB");
                  o.cfg.ram_bytes = uint32_t(r);
                  o.cfg.flash_bytes = uint32_t(f);
                  o.cfg.window = uint16_t(*window);
                  o.store_dir = *store;
                  o.cycles_per_mac = *cpm;
                  o.delay_ms = *delay;
                  o.crash_at_layer = *crash;
                  o.stall_at_layer = *stall;
                  o.garble_at_layer = *garble;
                  const auto colon = listen->rfind(':');
                  if (colon == std::string::npos) throw Error("--listen must be HOST:PORT");
                  const int port = std::stoi(listen->substr(colon + 1));
                  if (port < 0 || port > 65535) throw Error("--listen port out of range");
                  return net::run_worker_process(listen->substr(0, colon), uint16_t(port), o);
                };
              });
}

}  // namespace ts::cli
