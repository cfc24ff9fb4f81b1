// The networks boards are reached over, by name (transport.h Network).
#include "net/tcp.h"
#include "net/transport.h"

namespace ts::net {

const Network* find_network(const std::string& name) {
  const Network* all[] = {&tcp_network()};
  for (const Network* n : all)
    if (name == n->name()) return n;
  return nullptr;
}

const Network& network(const std::string& name) {
  if (const Network* n = find_network(name)) return *n;
  throw NetError("unknown transport '" + name + "' (known: tcp)");
}

}  // namespace ts::net
