// The node's traffic counters as /proc/net/dev gives them: each interface's
// received and transmitted bytes, and their sum without the loopback.
#include <gtest/gtest.h>

#include "flotilla/protocol/nic_counters.h"
#include "temp_dir.h"

namespace flotilla::protocol {
namespace {

// A namespace host's file as the kernel writes it: two header lines, then an
// interface a line, its name right-aligned before the colon.
const char* kProcNetDev =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n"
    "    lo: 5000000    4000    0    0    0     0          0         0  5000000    4000    0    "
    "0    0     0       0          0\n"
    "  eth0: 801234567  600000    0    0    0     0          0         0 802345678  610000    0    "
    "0    0     0       0          0\n"
    "  eth1:    1000      10    0    0    0     0          0         0     2000      20    0    "
    "0    0     0       0          0\n";

TEST(NicCounters, EachInterfacesBytesAreReadFromProcNetDev) {
  flotilla::testing::TempDir dir;
  const auto file = dir.write("dev", kProcNetDev);
  const auto interfaces = read_nic_bytes(file.string());
  ASSERT_EQ(interfaces.size(), 3u);
  EXPECT_EQ(interfaces.at("lo").rx, 5000000u);
  EXPECT_EQ(interfaces.at("eth0").rx, 801234567u);
  EXPECT_EQ(interfaces.at("eth0").tx, 802345678u);
  EXPECT_EQ(interfaces.at("eth1").tx, 2000u);
}

TEST(NicCounters, TheNodesTrafficIsEveryInterfaceButTheLoopback) {
  flotilla::testing::TempDir dir;
  const auto sum = external_nic_bytes(read_nic_bytes(dir.write("dev", kProcNetDev).string()));
  EXPECT_EQ(sum.rx, 801235567u);
  EXPECT_EQ(sum.tx, 802347678u);
}

TEST(NicCounters, AnUnreadableFileGivesNoInterfaces) {
  EXPECT_TRUE(read_nic_bytes("/nonexistent/proc/net/dev").empty());
  EXPECT_EQ(external_nic_bytes({}).rx, 0u);
}

}  // namespace
}  // namespace flotilla::protocol
