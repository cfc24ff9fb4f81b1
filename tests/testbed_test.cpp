// Testbed files: parsing, defaults, validation messages, round trip, sizes.
#include "plan/testbed.h"
#include "plan/board_kind.h"
#include "coord/qemu.h"
#include "util/endpoint.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace ts::plan;

namespace {

// Runs f, expects a ts::Error whose single-line message contains every
// fragment in `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const ts::Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "no ts::Error thrown";
}

Testbed parse(const std::string& text) { return parse_testbed(text, "tb.json"); }

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("tinysplit_testbed_test_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST(Testbed, ListAndObjectFormsAreEquivalent) {
  const std::string boards =
      R"([{"id": 0, "address": "local", "clock_mhz": 600, "ram_bytes": 524288,
           "flash_bytes": "8M", "delay_s_per_kb": 0.001, "bandwidth_kbps": 1000},
          {"id": 7, "address": "10.0.0.2:5000", "clock_mhz": 396.5}])";
  Testbed a = parse(boards);
  Testbed b = parse(R"({"boards": )" + boards + "}");
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.boards.size(), 2u);
  EXPECT_EQ(a.boards[0].id, 0);
  EXPECT_EQ(a.boards[0].ram_bytes, 524288);
  EXPECT_EQ(a.boards[0].flash_bytes, 8 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(a.boards[0].delay_s_per_kb, 0.001);
  EXPECT_DOUBLE_EQ(a.boards[0].bandwidth_kbps, 1000);
  EXPECT_EQ(a.boards[1].id, 7);
  EXPECT_EQ(a.boards[1].address, "10.0.0.2:5000");
  EXPECT_DOUBLE_EQ(a.boards[1].clock_mhz, 396.5);
}

TEST(Testbed, OmittedKeysTakeTeensyDefaults) {
  Testbed t = parse(R"([{"id": 3}])");
  ASSERT_EQ(t.boards.size(), 1u);
  const Board& b = t.boards[0];
  EXPECT_EQ(b.id, 3);
  EXPECT_EQ(b.address, "local");
  EXPECT_DOUBLE_EQ(b.clock_mhz, 600.0);
  EXPECT_EQ(b.ram_bytes, 512 * 1024);
  EXPECT_EQ(b.flash_bytes, 8 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(b.delay_s_per_kb, 0.0);
  EXPECT_DOUBLE_EQ(b.bandwidth_kbps, 11750.0);  // 94 Mbit/s with 1 KB = 1000 B
}

TEST(Testbed, AddressForms) {
  EXPECT_NO_THROW(parse(R"([{"id": 0, "address": "qemu"}])"));
  EXPECT_NO_THROW(parse(R"([{"id": 0, "address": "board1.lan:65535"}])"));
  EXPECT_NO_THROW(parse(R"([{"id": 0, "address": "[::1]:5000"}])"));
  expect_error([] { parse(R"([{"id": 0, "address": "localhost"}])"); }, {"tb.json", "board 0", "address"});
  expect_error([] { parse(R"([{"id": 0, "address": "host:0"}])"); }, {"address"});
  expect_error([] { parse(R"([{"id": 0, "address": "host:70000"}])"); }, {"address"});
  expect_error([] { parse(R"([{"id": 0, "address": ":5000"}])"); }, {"address"});
  expect_error([] { parse(R"([{"id": 0, "address": ""}])"); }, {"address"});
}

TEST(Testbed, ValidationErrorsNameFileBoardAndKey) {
  expect_error([] { parse("[]"); }, {"tb.json", "no boards"});
  expect_error([] { parse(R"({"boards": []})"); }, {"tb.json", "no boards"});
  expect_error([] { parse(R"([{"id": 0}, {"id": 1}, {"id": 0}])"); },
               {"tb.json", "board 2", "duplicate id 0", "board 0"});
  expect_error([] { parse(R"([{"id": 0}, {"id": 1, "clock_mhz": 0}])"); }, {"tb.json", "board 1", "clock_mhz"});
  expect_error([] { parse(R"([{"id": 0, "clock_mhz": -600}])"); }, {"board 0", "clock_mhz"});
  expect_error([] { parse(R"([{"id": 0, "bandwidth_kbps": 0}])"); }, {"board 0", "bandwidth_kbps"});
  expect_error([] { parse(R"([{"id": 0, "ram_bytes": 0}])"); }, {"board 0", "ram_bytes"});
  expect_error([] { parse(R"([{"id": 0, "flash_bytes": -5}])"); }, {"board 0", "flash_bytes"});
  expect_error([] { parse(R"([{"id": 0, "delay_s_per_kb": -0.1}])"); }, {"board 0", "delay_s_per_kb"});
  expect_error([] { parse(R"([{"id": 0, "clokc_mhz": 600}])"); }, {"tb.json", "board 0", "unknown key 'clokc_mhz'"});
  expect_error([] { parse(R"({"boards": [{"id": 0}], "extra": 1})"); }, {"tb.json", "unknown top-level key 'extra'"});
  expect_error([] { parse(R"({"board": [{"id": 0}]})"); }, {"tb.json", "'board'"});
  expect_error([] { parse(R"([{"address": "local"}])"); }, {"board 0", "missing", "'id'"});
  expect_error([] { parse(R"([{"id": -1}])"); }, {"board 0", "'id'"});
  expect_error([] { parse(R"([{"id": 0}, 5])"); }, {"board 1", "object"});
  expect_error([] { parse(R"("boards")"); }, {"tb.json", "list of boards"});
  expect_error([] { parse("[{\"id\": 0,}"); }, {"tb.json", "invalid JSON"});
}

TEST(Testbed, WrongTypesAreReported) {
  expect_error([] { parse(R"([{"id": "zero"}])"); }, {"tb.json", "board 0", "'id'", "\"zero\""});
  expect_error([] { parse(R"([{"id": 1.5}])"); }, {"board 0", "'id'"});
  expect_error([] { parse(R"([{"id": 0}, {"id": 1, "clock_mhz": "fast"}])"); },
               {"tb.json", "board 1", "'clock_mhz'", "number"});
  expect_error([] { parse(R"([{"id": 0, "address": 5000}])"); }, {"board 0", "'address'", "string"});
  expect_error([] { parse(R"([{"id": 0, "ram_bytes": 512.5}])"); }, {"board 0", "'ram_bytes'"});
  expect_error([] { parse(R"([{"id": 0, "flash_bytes": "8 parsecs"}])"); }, {"board 0", "'flash_bytes'", "8 parsecs"});
  expect_error([] { parse(R"([{"id": 0, "delay_s_per_kb": true}])"); }, {"board 0", "'delay_s_per_kb'"});
  expect_error([] { parse(R"([{"id": 0, "bandwidth_kbps": null}])"); }, {"board 0", "'bandwidth_kbps'"});
}

TEST(Testbed, RoundTripThroughJsonAndFile) {
  Testbed t;
  t.boards.push_back({0, "local", 600.0, 512 * 1024, 8 << 20, 0.0, 12500.0});
  t.boards.push_back({4, "qemu", 150.25, 300000, 2000000, 0.0123, 800.5});
  t.boards.push_back({2, "192.168.0.9:7000", 396.0, 1 << 20, 1 << 23, 1e-6, 1e5});
  t.boards.push_back({3, "192.168.0.10:7000", 600.0, 1 << 20, 1 << 23, 0.0, 1e4, 40});
  EXPECT_EQ(testbed_from_json(to_json(t), "mem"), t);
  EXPECT_FALSE(to_json(t)["boards"][0].contains("links"));  // by kind: not written
  EXPECT_EQ(to_json(t)["boards"][3]["links"], 40);

  auto path = temp_file("roundtrip.json");
  save_testbed(t, path.string());
  EXPECT_EQ(load_testbed(path.string()), t);
  std::filesystem::remove(path);
}

TEST(Testbed, LoadErrorsNameThePath) {
  auto path = temp_file("bad.json");
  {
    std::ofstream(path) << R"([{"id": 0}, {"id": 1, "ram_bytes": "lots"}])";
  }
  expect_error([&] { load_testbed(path.string()); }, {path.string(), "board 1", "ram_bytes"});
  std::filesystem::remove(path);
  expect_error([&] { load_testbed(path.string()); }, {path.string(), "cannot open"});
}

TEST(Testbed, DefaultTestbed) {
  Testbed t = default_testbed(3);
  ASSERT_EQ(t.boards.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Board& b = t.boards[size_t(i)];
    EXPECT_EQ(b.id, i);
    EXPECT_EQ(b.address, "local");
    EXPECT_DOUBLE_EQ(b.clock_mhz, 600.0);
    EXPECT_EQ(b.ram_bytes, 512 * 1024);
    EXPECT_EQ(b.flash_bytes, 8 * 1024 * 1024);
  }
  Testbed q = default_testbed(2, "qemu", 256 * 1024, 1 << 20, 150.0);
  EXPECT_EQ(q.boards[1].address, "qemu");
  EXPECT_EQ(q.boards[1].ram_bytes, 256 * 1024);
  EXPECT_DOUBLE_EQ(q.boards[1].clock_mhz, 150.0);
  expect_error([] { default_testbed(0); }, {"board count"});
  expect_error([] { default_testbed(2, "local", 0); }, {"ram_bytes"});
}

TEST(Testbed, ValidateInMemory) {
  Testbed t = default_testbed(2);
  t.boards[1].id = 0;
  expect_error([&] { validate_testbed(t, "cli"); }, {"cli", "board 1", "duplicate id 0"});
  t = default_testbed(2);
  t.boards[0].clock_mhz = std::nan("");
  expect_error([&] { validate_testbed(t, "cli"); }, {"board 0", "clock_mhz"});
}

TEST(ParseBytes, AcceptedForms) {
  EXPECT_EQ(parse_bytes("0"), 0);
  EXPECT_EQ(parse_bytes("1048576"), 1048576);
  EXPECT_EQ(parse_bytes("512K"), 524288);
  EXPECT_EQ(parse_bytes("512k"), 524288);
  EXPECT_EQ(parse_bytes("512KB"), 524288);
  EXPECT_EQ(parse_bytes("512KiB"), 524288);
  EXPECT_EQ(parse_bytes("8M"), 8388608);
  EXPECT_EQ(parse_bytes("8mb"), 8388608);
  EXPECT_EQ(parse_bytes("1G"), 1073741824);
  EXPECT_EQ(parse_bytes("100B"), 100);
  EXPECT_EQ(parse_bytes("9223372036854775807"), INT64_MAX);
}

TEST(ParseBytes, RejectedForms) {
  for (std::string bad : {"", "K", "-1", "+5", "1.5M", " 5", "5 ", "5X", "5KK", "8T",
                          "9223372036854775808", "9000000000G"})
    expect_error([&] { parse_bytes(bad); }, {"'" + bad + "'"});
}

TEST(ParseBytes, FormatIsInverse) {
  EXPECT_EQ(format_bytes(524288), "512K");
  EXPECT_EQ(format_bytes(8 << 20), "8M");
  EXPECT_EQ(format_bytes(1 << 30), "1G");
  EXPECT_EQ(format_bytes(1000), "1000");
  EXPECT_EQ(format_bytes(0), "0");
  for (int64_t v : {int64_t(1), int64_t(1023), int64_t(1024), int64_t(3) << 20, int64_t(123456789)})
    EXPECT_EQ(parse_bytes(format_bytes(v)), v);
}

// Issue 12: nesting is bounded while parsing (printing a deeply nested value
// in an error message used to overflow the stack).
TEST(Testbed, DeeplyNestedJsonIsAnError) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  expect_error([&] { parse(deep); }, {"tb.json", "nested deeper than 64 levels"});
  expect_error([&] { parse("[{\"id\": 0, \"address\": " + std::string(100000, '[') + std::string(100000, ']') + "}]"); },
               {"tb.json", "nested deeper"});
  // Ordinary nesting is untouched.
  EXPECT_EQ(parse("{\"boards\": [{\"id\": 0}]}").boards.size(), 1u);
}

// Issue 12: one process per local (or QEMU) board, at most kMaxSpawnedBoards.
TEST(Testbed, SpawnLimitBoundsLocalBoards) {
  EXPECT_NO_THROW(check_spawn_limit(default_testbed(kMaxSpawnedBoards, "local"), "tb"));
  expect_error([] { check_spawn_limit(default_testbed(kMaxSpawnedBoards + 1, "local"), "tb.json"); },
               {"tb.json", "65 local/qemu boards", "at most 64"});
  expect_error([] { check_spawn_limit(default_testbed(kMaxSpawnedBoards + 1, "qemu"), "tb.json"); }, {"at most 64"});
  // Boards elsewhere are not processes here; planning any number stays allowed.
  EXPECT_NO_THROW(check_spawn_limit(default_testbed(1000, "10.0.0.1:5000"), "tb"));
  EXPECT_NO_THROW(validate_testbed(default_testbed(1000, "local"), "tb"));
}

// Found by fuzz_testbed: a key holding a newline broke the one-line error.
TEST(Testbed, KeysWithControlCharactersStayOnOneLine) {
  expect_error([] { parse("{\"boards\\nx\": []}"); }, {"tb.json", "unknown top-level key 'boards\\nx'"});
  expect_error([] { parse("[{\"id\": 0, \"a\\r\\nb\": 1}]"); }, {"board 0", "unknown key 'a\\r\\nb'"});
}

// Found by the long fuzz_testbed run (fuzz/corpus/testbed/regress-c599f36a):
// an address or a size string holding a newline broke the one-line error;
// such text is now escaped and shortened like a key.
TEST(Testbed, ValuesWithControlCharactersStayOnOneLine) {
  expect_error([] { parse(R"([{"id": 0, "address": "[::1]:4\n\n1200"}])"); },
               {"board 0", "'address' must be", "[::1]:4\\n\\n1200"});
  expect_error([] { parse(R"([{"id": 0, "ram_bytes": "1\nK"}])"); }, {"board 0", "'ram_bytes'", "bad size '1\\nK'"});
  expect_error([] { parse(R"([{"id": 0, "address": ")" + std::string(300, 'x') + R"("}])"); }, {"board 0", "..."});
}

// "links": how many links a board holds; by default what our boards of its
// kind hold (a host board 40, the firmware 16).
TEST(Testbed, LinksPerBoard) {
  const Testbed t = parse(R"([{"id": 0}, {"id": 1, "address": "qemu"}, {"id": 2, "address": "10.0.0.2:7000"},
                              {"id": 3, "address": "10.0.0.3:7000", "links": 40}, {"id": 4, "links": 3}])");
  EXPECT_EQ(board_links(t.boards[0]), kHostBoardLinks);
  EXPECT_EQ(board_links(t.boards[1]), kFirmwareLinks);
  EXPECT_EQ(board_links(t.boards[2]), kFirmwareLinks);
  EXPECT_EQ(board_links(t.boards[3]), 40);
  EXPECT_EQ(board_links(t.boards[4]), 3);
  for (const char* bad : {"0", "-1", "1025", "1.5", "\"16\"", "null"})
    expect_error([&] { parse(std::string(R"([{"id": 0, "links": )") + bad + "}]"); }, {"tb.json", "board 0", "'links'"});
  Testbed m = default_testbed(1);
  m.boards[0].links = -2;
  expect_error([&] { validate_testbed(m, "mem"); }, {"mem", "board 0", "'links'"});
}

// "kind": what a board is (plan/board_kind.h), explicit or implied by its
// address; it decides links, measured prices, host speed and how the board
// starts. One parser of host:port (util/endpoint.h) for every address.
TEST(Testbed, BoardKinds) {
  const Testbed t = parse(R"([{"id": 0}, {"id": 1, "address": "qemu"}, {"id": 2, "address": "10.0.0.2:7000"},
                              {"id": 3, "address": "127.0.0.1:7000"}, {"id": 4, "kind": "qemu-m7"},
                              {"id": 5, "address": "127.0.0.1:7001", "kind": "teensy41"},
                              {"id": 6, "address": "10.0.0.3:7000", "kind": "host"}])");
  const char* want[] = {"host", "qemu-m7", "teensy41", "host", "qemu-m7", "teensy41", "host"};
  for (size_t i = 0; i < t.boards.size(); ++i) EXPECT_STREQ(kind_of(t.boards[i]).name, want[i]) << "board " << i;
  EXPECT_TRUE(started_here(t.boards[0]));
  EXPECT_TRUE(started_here(t.boards[4]));
  EXPECT_FALSE(started_here(t.boards[5]));
  EXPECT_EQ(board_links(t.boards[4]), kFirmwareLinks);
  EXPECT_EQ(board_links(t.boards[6]), kHostBoardLinks);
  // A real Teensy given as host:port gets the firmware's links and is not a
  // host-speed board, whatever its address.
  EXPECT_EQ(board_links(t.boards[5]), kFirmwareLinks);
  EXPECT_FALSE(kind_of(t.boards[5]).host_speed);
  EXPECT_STREQ(kind_of(t.boards[5]).costs, "cortex-m7");
  EXPECT_EQ(testbed_from_json(to_json(t), "mem"), t);
  EXPECT_EQ(to_json(t)["boards"][4]["kind"], "qemu-m7");
  EXPECT_FALSE(to_json(t)["boards"][0].contains("kind"));  // implied: not written
  expect_error([] { parse(R"([{"id": 0, "kind": "esp32"}])"); }, {"tb.json", "board 0", "'kind'", "esp32", "teensy41"});
  expect_error([] { parse(R"([{"id": 0, "kind": "teensy41"}])"); }, {"board 0", "teensy41", "address"});
  expect_error([] { parse(R"([{"id": 0, "address": "qemu", "kind": "host"}])"); }, {"board 0", "qemu", "host"});
  expect_error([] { parse(R"([{"id": 0, "kind": 7}])"); }, {"board 0", "'kind'", "string"});
}

// A QEMU kind's row owns its machine and firmware image (coord/qemu.cpp
// takes both from it); no other kind names either, and asking the QEMU
// launcher for a kind that does not run under QEMU is one error.
TEST(Testbed, QemuKindsNameMachineAndImage) {
  int qemu_kinds = 0;
  for (const BoardKind& k : board_kinds()) {
    const bool qemu = k.start == BoardStart::Qemu;
    qemu_kinds += qemu;
    EXPECT_EQ(*k.qemu_machine != 0, qemu) << k.name;
    EXPECT_EQ(*k.firmware != 0, qemu) << k.name;
  }
  EXPECT_GE(qemu_kinds, 1);
  ts::coord::QemuBoardOptions o;
  EXPECT_STREQ(ts::coord::qemu_kind(o).name, "qemu-m7");  // the default
  EXPECT_STREQ(ts::coord::qemu_kind(o).qemu_machine, "mps2-an500");
  o.kind = find_board_kind("host");
  expect_error([&] { ts::coord::qemu_kind(o); }, {"host", "QEMU"});
}

TEST(Endpoint, ParsedOnce) {
  ts::Endpoint e;
  ASSERT_TRUE(ts::parse_endpoint("10.1.2.3:5000", &e));
  EXPECT_EQ(e.family, ts::Endpoint::Family::IPv4);
  EXPECT_EQ(e.ipv4, (10u << 24) | (1u << 16) | (2u << 8) | 3u);
  EXPECT_EQ(e.port, 5000);
  EXPECT_FALSE(e.loopback());
  ASSERT_TRUE(ts::parse_endpoint("[::1]:7", &e));
  EXPECT_EQ(e.family, ts::Endpoint::Family::IPv6);
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.text(), "[::1]:7");
  EXPECT_TRUE(e.loopback());
  ASSERT_TRUE(ts::parse_endpoint("board1.lan:65535", &e));
  EXPECT_EQ(e.family, ts::Endpoint::Family::Name);
  ASSERT_TRUE(ts::parse_endpoint("127.9.0.1:80", &e));
  EXPECT_TRUE(e.loopback());
  for (const char* name : {"999.1.1.1:80", "1234.1.1.1:80", "1.1.1.1111:80", "1.1.1:80"}) {
    ASSERT_TRUE(ts::parse_endpoint(name, &e)) << name;  // not dotted IPv4: a name to resolve
    EXPECT_EQ(e.family, ts::Endpoint::Family::Name) << name;
  }
  std::string why;
  for (const char* bad : {"localhost", ":5000", "h:0", "h:65536", "h:", "h:12a", "h :5", "h:5\n", "[]:5"}) {
    EXPECT_FALSE(ts::parse_endpoint(bad, &e, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_TRUE(ts::parse_endpoint("0.0.0.0:0", &e, nullptr, true));
  EXPECT_FALSE(ts::parse_endpoint("0.0.0.0:0", &e));
  try {
    ts::endpoint_or_throw("nope", "board address");
    ADD_FAILURE() << "no error";
  } catch (const ts::Error& x) {
    EXPECT_NE(std::string(x.what()).find("board address 'nope' is not host:port"), std::string::npos) << x.what();
  }
}
