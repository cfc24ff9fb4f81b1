#include "util/endpoint.h"

#include <cctype>

#include "util/error.h"

namespace ts {
namespace {

// a.b.c.d with each part 0..255 and no leading sign or spaces.
bool dotted_ipv4(const std::string& s, uint32_t* ip) {
  uint32_t v = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    uint32_t part = 0;
    size_t digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && digits < 3) {
      part = part * 10 + uint32_t(s[i] - '0');
      ++i;
      ++digits;
    }
    if (part > 255) return false;  // a fourth digit fails at the next separator check
    v = (v << 8) | part;
    ++parts;
    if (parts < 4) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  if (i != s.size()) return false;
  *ip = v;
  return true;
}

}  // namespace

std::string Endpoint::text() const {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p : host + ":" + p;
}

bool Endpoint::loopback() const {
  if (family == Family::IPv4) return (ipv4 >> 24) == 127;
  return host == "::1" || host == "localhost";
}

bool parse_endpoint(const std::string& text, Endpoint* out, std::string* why, bool allow_port0) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  for (char ch : text)
    if (std::isspace(static_cast<unsigned char>(ch)) || std::iscntrl(static_cast<unsigned char>(ch)))
      return no("it holds a space or a control character");
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return no("no ':' before a port");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return no("no host before the ':'");
  const std::string digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
    return no("the port is not a number");
  const unsigned long port = std::stoul(digits);
  if (port > 65535 || (port == 0 && !allow_port0)) return no(allow_port0 ? "the port is over 65535" : "the port is not 1..65535");
  Endpoint e;
  e.host = host;
  e.port = uint16_t(port);
  if (dotted_ipv4(host, &e.ipv4)) e.family = Endpoint::Family::IPv4;
  else if (host.find(':') != std::string::npos) e.family = Endpoint::Family::IPv6;
  *out = e;
  return true;
}

Endpoint endpoint_or_throw(const std::string& text, const std::string& what, bool allow_port0) {
  Endpoint e;
  std::string why;
  if (!parse_endpoint(text, &e, &why, allow_port0)) throw Error(what + " '" + text + "' is not host:port (" + why + ")");
  return e;
}

}  // namespace ts
