// Bounded reads of every input (issue 26, item 4): non-regular files and
// files over their kind's cap are refused with one line before any read;
// out-of-range board budgets, repeated addresses and board counts past
// plan::kMaxBoards are refused by the coordinator before any board starts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "model/image.h"
#include "model/npy.h"
#include "plan/testbed.h"
#include "support/shell.h"
#include "util/error.h"
#include "util/input_file.h"

namespace fs = std::filesystem;
using ts::testing::tinysplit;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "";
}

void expect_one_line(const ts::testing::Shell& r, const std::string& what) {
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("ts_bounded_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST(InputFile, RefusesWhatIsNotARegularFile) {
  EXPECT_NE(error_of([] { ts::read_input_file("/dev/zero", "model file", 1 << 20); }).find("a character device"),
            std::string::npos);
  EXPECT_NE(error_of([] { ts::read_input_file("/", "image", 1 << 20); }).find("a directory"), std::string::npos);
  const fs::path fifo = temp("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opened without blocking (no writer) and refused.
  EXPECT_NE(error_of([&] { ts::read_input_file(fifo.string(), "testbed file", 1 << 20); }).find("a FIFO"),
            std::string::npos);
  fs::remove(fifo);
  EXPECT_NE(error_of([] { ts::read_input_file("/no/such/file", "image", 1 << 20); }).find("does not exist"),
            std::string::npos);
}

TEST(InputFile, RefusesAFileOverItsCapAndReadsOneWithin) {
  const fs::path p = temp("cap");
  std::ofstream(p, std::ios::binary) << std::string(1025, 'x');
  const std::string e = error_of([&] { ts::read_input_file(p.string(), "image", 1024); });
  EXPECT_NE(e.find("1025 bytes; at most 1 KiB"), std::string::npos) << e;
  EXPECT_EQ(ts::read_input_file(p.string(), "image", 1025), std::string(1025, 'x'));
  EXPECT_EQ(ts::check_input_file(p.string(), "image", 1025), 1025u);
  fs::remove(p);
}

TEST(InputFile, AHugeDeclaredImageIsCalledTooLarge) {
  // A PNG whose IHDR declares 20000x20000 (stb calls it "unknown image type").
  std::string png = "\x89PNG\r\n\x1a\n";
  png += std::string("\0\0\0\x0d", 4) + "IHDR" + std::string("\0\0\x4e\x20\0\0\x4e\x20\x08\x02\0\0\0", 13) +
         std::string(4, '\0');
  png += std::string(4, '\0') + "IEND" + std::string(4, '\0');
  const std::string e = error_of([&] {
                          ts::decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size(), "big.png");
                        });
  EXPECT_NE(e.find("too large: 20000x20000"), std::string::npos) << e;
}

TEST(InputFile, AnNpyShapeThatWouldOverflowIsRefused) {
  std::string h = "{'descr': '|i1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string b = std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h;
  const std::string e = error_of([&] { ts::parse_npy(b, "x.npy"); });
  EXPECT_NE(e.find("shape is too large"), std::string::npos) << e;
}

TEST(BoardBudget, OneCheckForTestbedAndOptions) {
  using ts::plan::board_budget_error;
  EXPECT_EQ(board_budget_error(512 * 1024, 8 << 20, 600, ts::plan::kBudgetFields), "");
  EXPECT_NE(board_budget_error(int64_t(3) << 30, 8 << 20, 600, ts::plan::kBudgetOptions).find("--ram"),
            std::string::npos);
  EXPECT_NE(board_budget_error(1, int64_t(5) << 30, 600, ts::plan::kBudgetOptions).find("--flash"),
            std::string::npos);
  EXPECT_NE(board_budget_error(1, 1, 0.5, ts::plan::kBudgetFields).find("'clock_mhz'"), std::string::npos);
  EXPECT_NE(board_budget_error(1, 1, 1e308, ts::plan::kBudgetFields).find("'clock_mhz'"), std::string::npos);
}

TEST(BoundedInputCli, EachRefusalIsOneLineBeforeAnyBoardStarts) {
  expect_one_line(tinysplit("inspect -m /dev/zero"), "not a regular file");
  expect_one_line(tinysplit("run --image /dev/zero"), "not a regular file");
  expect_one_line(tinysplit("run --input /dev/zero"), "not a regular file");
  expect_one_line(tinysplit("run --testbed /dev/zero"), "not a regular file");
  expect_one_line(tinysplit("run --image /"), "a directory");
  expect_one_line(tinysplit("run --ram 3G"), "--ram must be between 1 byte and 2 GiB");
  expect_one_line(tinysplit("run --flash 5G"), "--flash must be between 1 byte and 2 GiB");
  expect_one_line(tinysplit("plan --workers 65535"), "1024");
  expect_one_line(tinysplit("simulate --workers 5000"), "at most 1024");
  expect_one_line(tinysplit("simulate --sweep 1..2000"), "1024");
  const fs::path tb = temp("tb.json");
  for (const char* clock : {"0.5", "1e308"}) {
    std::ofstream(tb) << "[{\"id\": 0, \"clock_mhz\": " << clock << "}]";
    expect_one_line(tinysplit("run --testbed " + tb.string()), "'clock_mhz' must be between 1 and 65535");
  }
  std::ofstream(tb) << R"([{"id": 0, "address": "127.0.0.1:9"}, {"id": 1, "address": "127.0.0.1:9"}])";
  expect_one_line(tinysplit("run --testbed " + tb.string()), "is also board 0's");
  fs::remove(tb);
}
