// A network endpoint, "host:port", parsed in one place.
//
// The host is everything before the last ':' (so "[::1]:5000" and the bare
// "::1:5000" both give host "::1"); brackets around an IPv6 literal are
// removed. The family says what the host is: a dotted IPv4 address, an IPv6
// literal, or a name to resolve. Every user of a board's address (the
// testbed, the transports, PEERS, `worker --listen`) goes through this.
#pragma once

#include <cstdint>
#include <string>

namespace ts {

struct Endpoint {
  enum class Family : uint8_t { Name, IPv4, IPv6 };
  std::string host;  // without brackets
  uint16_t port = 0;
  Family family = Family::Name;
  uint32_t ipv4 = 0;  // the address, most significant byte first, when IPv4

  // "host:port", with brackets around an IPv6 literal.
  std::string text() const;
  // 127.0.0.0/8, ::1 or "localhost".
  bool loopback() const;
};

// Parses text as an endpoint. False (with *why set to a short reason) if it
// is not one: no ':' or no host before it, whitespace, a port that is not
// 1..65535 (0 allowed when allow_port0: "any free port").
bool parse_endpoint(const std::string& text, Endpoint* out, std::string* why = nullptr, bool allow_port0 = false);

// The same, throwing ts::Error "<what> '<text>' is not host:port (<why>)".
Endpoint endpoint_or_throw(const std::string& text, const std::string& what, bool allow_port0 = false);

}  // namespace ts
