// tinysplit keygen: a fresh shared key for authenticated board links.
#include "cli/cli.h"
#include "net/keyfile.h"

namespace ts::cli {

struct KeygenOptions {
  std::string out;
};

int cmd_keygen(const KeygenOptions& o) {
  net::write_key_file(o.out);
  std::printf("wrote a new 256-bit key to %s (mode 0600); give the same file to the boards (worker --key-file) "
              "and the coordinator (run --key-file)\n",
              o.out.c_str());
  return 0;
}

void register_keygen(CLI::App& app) {
  auto o = std::make_shared<KeygenOptions>();
  CLI::App& sub = add_command(app, "keygen", "Write a new random key file for authenticated board links",
                              [o] { return cmd_keygen(*o); });
  sub.add_option("-o,--output", o->out, "key file to create (must not exist)")->required();
}

}  // namespace ts::cli
