#pragma once
// The test cluster of cluster.sh as a gtest fixture: hosts up in the
// constructor, everything torn down in the destructor, also when a test fails
// or throws. The cluster belongs to this process while it lives (cluster.sh
// --owner): another test run on the machine waits for it instead of tearing it
// down, and if this process dies the next `up` removes what it left.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace flotilla::testing {

struct ClusterHost {
  std::string name, address, user, remote_dir, netns, host_key_pub;
  int port = 22;
};

// What a command said and how it ended (exit status; 128 + signal if killed).
struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// What runs on the hosts besides sshd.
enum class ClusterKind {
  ssh,    // hosts reached over SSH, nothing else
  slurm,  // and a SLURM cluster: slurmctld on flh1 (the login node), slurmd on every host
};

class TestCluster {
 public:
  // Root and the tools are there and network namespaces can be made;
  // otherwise `why` says what is missing.
  // With kind slurm, SLURM's daemons and munge are there too.
  static bool available(std::string* why, ClusterKind kind = ClusterKind::ssh);
  // Hosts flh1..flhN; throws with the script's output when that fails.
  explicit TestCluster(int hosts, ClusterKind kind = ClusterKind::ssh);
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  const std::vector<ClusterHost>& hosts() const { return hosts_; }
  const ClusterHost& host(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& key_file() const { return key_file_; }
  // Every host's current key by address, as OpenSSH's known_hosts has them;
  // rewritten by rekey().
  const std::filesystem::path& known_hosts() const { return known_hosts_; }

  // Live processes inside the host's namespace (sshd among them).
  std::vector<int> pids_on(const std::string& host) const;
  // The same with their command lines.
  std::vector<std::pair<int, std::string>> processes_on(const std::string& host) const;
  // The host's veth, root side: down is a cable pulled, connections hang.
  void link(const std::string& host, bool up) const;
  // Silent loss: every packet to and from the host dropped while the link
  // stays up (a switch gone quiet), or the path restored. With `peer` (an
  // address: kControllerAddress) only the path between the two goes quiet.
  void drop(const std::string& host, bool on, const std::string& peer = {}) const;
  // Where the tests' controller reaches the hosts from: the bridge's address.
  static constexpr const char* kControllerAddress = "10.77.0.1";
  // A new host key and its sshd restarted; known_hosts() follows.
  void rekey(const std::string& host) const;

  // SLURM clusters only: the slurm.conf every login has as SLURM_CONF, the
  // partition that holds every host, and the host's slurmd killed (a node
  // lost) or started again.
  const std::filesystem::path& slurm_conf() const { return slurm_conf_; }
  static constexpr const char* kSlurmPartition = "debug";
  void slurmd(const std::string& host, bool running) const;

  // `command` run by the host's shell over OpenSSH (BatchMode, the cluster's
  // key, host keys checked strictly against `known_hosts`, default
  // known_hosts()). ssh() throws unless it exits 0 and returns its output.
  CommandResult ssh_result(const std::string& host, const std::string& command,
                           const std::filesystem::path& known_hosts = {},
                           const std::string& user = {}) const;
  std::string ssh(const std::string& host, const std::string& command) const;
  // The same logged in as root whatever the hosts' user: for a test's own
  // faults that only root can make (a bind mount over a system folder),
  // never for what Flotilla does.
  std::string ssh_as_root(const std::string& host, const std::string& command) const;

  // What a test makes as root on the machine for the hosts to use (a script
  // to run, a folder to bind-mount) handed to the hosts' login user: `path`
  // and everything under it become that user's, modes untouched, so that the
  // test shows what the login itself can do. Nothing changes when the login
  // is root. Every test that makes files for the hosts calls it.
  void give_to_login(const std::filesystem::path& path) const;

 private:
  CommandResult script(const std::vector<std::string>& args) const;
  void write_known_hosts() const;

  std::filesystem::path dir_;
  std::vector<ClusterHost> hosts_;
  std::filesystem::path key_file_;
  std::filesystem::path known_hosts_;
  std::filesystem::path slurm_conf_;
};

// Runs argv (no shell; argv[0] looked up in PATH) and waits for it.
CommandResult run_command(const std::vector<std::string>& argv);
// Runs a shell command; its exit status and output (stdout and stderr).
std::pair<int, std::string> shell(const std::string& command);
// The script itself, for tests that drive it directly.
std::filesystem::path cluster_script();

}  // namespace flotilla::testing
