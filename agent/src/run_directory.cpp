#include "run_directory.h"

#include "processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace flotilla::agent {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path default_home() {
  if (const char* home = std::getenv("FLOTILLA_HOME"); home && *home) return home;
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".flotilla";
  return "/tmp/flotilla";
}

RunDirectory::RunDirectory(const fs::path& home, const std::string& run)
    : dir_(home / "runs" / run) {}

bool RunDirectory::valid_run_name(const std::string& run) {
  if (run.empty() || run.size() > 128 || run[0] == '.') return false;
  for (char c : run)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

fs::path RunDirectory::rank_log(int64_t rank) const {
  return dir_ / ("rank-" + std::to_string(rank) + ".log");
}

bool RunDirectory::exists() const {
  return fs::exists(dir_ / "start.json");
}

void create_private_directories(const fs::path& dir) {
  // Each missing level is made here, so each gets 0700 rather than what the
  // umask leaves of 0777; levels that exist (a home, /tmp) are not touched.
  fs::path level;
  for (const auto& part : dir) {
    level /= part;
    if (::mkdir(level.c_str(), 0700) == 0) {
      fs::permissions(level, kPrivateDirectory);
    } else if (errno != EEXIST) {
      throw std::runtime_error(level.string() +
                               ": cannot create the directory: " + std::strerror(errno));
    }
  }
  if (!fs::is_directory(dir)) throw std::runtime_error(dir.string() + ": not a directory");
  fs::permissions(dir, kPrivateDirectory);
}

namespace {
int open_private(const fs::path& file, int flags) {
  const int fd = ::open(file.c_str(), flags | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(file.string() + ": cannot open: " + std::strerror(errno));
  // The umask may have taken bits off 0600; an existing file may have had more.
  if (::fchmod(fd, 0600) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(file.string() + ": cannot set its mode to 0600: " + std::strerror(e));
  }
  return fd;
}
}  // namespace

int open_private_for_append(const fs::path& file) {
  return open_private(file, O_WRONLY | O_APPEND);
}

void create_private_file(const fs::path& file) {
  ::close(open_private(file, O_WRONLY));
}

void write_file_atomically(const fs::path& file, const std::string& text) {
  const fs::path temp = file.string() + ".tmp";
  const int fd = open_private(temp, O_WRONLY | O_TRUNC);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw std::runtime_error(temp.string() + ": cannot write: " + std::strerror(e));
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    throw std::runtime_error(temp.string() + ": cannot write: " + std::strerror(errno));
  fs::rename(temp, file);
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void RunDirectory::write_start(const protocol::StartRun& start) const {
  create_private_directories(dir_);
  write_file_atomically(dir_ / "start.json", protocol::encode(start));
}

protocol::StartRun RunDirectory::read_start() const {
  return std::get<protocol::StartRun>(protocol::decode(read_file(dir_ / "start.json")));
}

void RunDirectory::write_supervisor_pid(int pid) const {
  write_file_atomically(dir_ / "supervisor.pid", std::to_string(pid));
}

std::optional<int> RunDirectory::supervisor_pid() const {
  std::error_code ec;
  if (!fs::exists(dir_ / "supervisor.pid", ec)) return std::nullopt;
  const int pid = std::atoi(read_file(dir_ / "supervisor.pid").c_str());
  if (pid <= 0 || !process_running(pid)) return std::nullopt;
  return pid;
}

void RunDirectory::write_process_groups(const std::vector<int>& pgids) const {
  write_file_atomically(dir_ / "pgids.json", json(pgids).dump());
}

std::vector<int> RunDirectory::process_groups() const {
  std::error_code ec;
  if (!fs::exists(dir_ / "pgids.json", ec)) return {};
  return json::parse(read_file(dir_ / "pgids.json")).get<std::vector<int>>();
}

void RunDirectory::write_final(const FinalState& s) const {
  write_file_atomically(
      dir_ / "final.json",
      // A message quoting a rank's stderr may hold bytes that are not UTF-8.
      json{{"outcome", s.outcome}, {"message", s.message}, {"last_seq", s.last_seq}}.dump(
          -1, ' ', false, json::error_handler_t::replace));
}

std::optional<FinalState> RunDirectory::final_state() const {
  std::error_code ec;
  if (!fs::exists(dir_ / "final.json", ec)) return std::nullopt;
  const auto j = json::parse(read_file(dir_ / "final.json"));
  return FinalState{j.at("outcome"), j.at("message"), j.at("last_seq")};
}

}  // namespace flotilla::agent
