#pragma once
// The test cluster of cluster.sh as a gtest fixture: hosts up in the
// constructor, everything torn down in the destructor, also when a test fails.

#include <filesystem>
#include <string>
#include <vector>

namespace flotilla::testing {

struct ClusterHost {
  std::string name, address, user, remote_dir, netns, host_key_pub;
  int port = 22;
};

class TestCluster {
 public:
  // Root and the tools are there; otherwise `why` says what is missing.
  static bool available(std::string* why);
  explicit TestCluster(int hosts);  // throws with the script's output
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  const std::vector<ClusterHost>& hosts() const { return hosts_; }
  const std::filesystem::path& key_file() const { return key_file_; }
  // Processes inside the host's namespace, with their command lines.
  std::vector<std::pair<int, std::string>> processes_on(const std::string& host) const;
  void link(const std::string& host, bool up) const;
  void rekey(const std::string& host) const;

 private:
  std::filesystem::path dir_;
  std::vector<ClusterHost> hosts_;
  std::filesystem::path key_file_;
};

// Runs a shell command; its exit status and output (stdout and stderr).
std::pair<int, std::string> shell(const std::string& command);

}  // namespace flotilla::testing
