#include "run_directory.h"

#include "processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
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

namespace {

json identity_json(const ProcessIdentity& identity) {
  return {
      {"pid", identity.pid}, {"start_time", identity.start_time}, {"boot_id", identity.boot_id}};
}

// The identity in `j`; nothing, with `problem` saying which field is wrong.
std::optional<ProcessIdentity> identity_from_json(const json& j, std::string& problem) {
  if (!j.is_object()) {
    problem = "expected an object with \"pid\", \"start_time\" and \"boot_id\"";
    return std::nullopt;
  }
  const auto pid = j.find("pid");
  const auto start_time = j.find("start_time");
  const auto boot_id = j.find("boot_id");
  if (pid == j.end() || !pid->is_number_integer() || pid->get<int64_t>() <= 1 ||
      pid->get<int64_t>() > INT32_MAX)
    problem = "\"pid\" is not a process id above 1";
  else if (start_time == j.end() || !start_time->is_number_unsigned())
    problem = "\"start_time\" is not a whole number of clock ticks";
  else if (boot_id == j.end() || !boot_id->is_string() || boot_id->get<std::string>().empty())
    problem = "\"boot_id\" is not a boot id";
  if (!problem.empty()) return std::nullopt;
  return ProcessIdentity{pid->get<pid_t>(), start_time->get<uint64_t>(),
                         boot_id->get<std::string>()};
}

std::string joined(const std::vector<int>& numbers) {
  std::string text;
  for (int n : numbers) text += (text.empty() ? "" : ", ") + std::to_string(n);
  return text;
}

constexpr const char* kBareNumbers = "as agents before process identities wrote it";

}  // namespace

void RunDirectory::write_supervisor(const ProcessIdentity& supervisor) const {
  write_file_atomically(dir_ / "supervisor.pid", identity_json(supervisor).dump());
}

RunDirectory::Supervisor RunDirectory::supervisor() const {
  const auto file = dir_ / "supervisor.pid";
  std::error_code ec;
  if (!fs::exists(file, ec)) return {};
  const auto j = json::parse(read_file(file), nullptr, false);
  Supervisor found;
  if (j.is_number_integer()) {
    // A bare pid: nothing tells the process with it now from the supervisor
    // that once had it. Gone is certain; running is not.
    const auto pid = j.get<int64_t>();
    if (pid > 1 && pid <= INT32_MAX && process_running(static_cast<pid_t>(pid))) {
      found.unverifiable = true;
      found.stranger = "supervisor.pid holds only pid " + std::to_string(pid) + ", " +
                       kBareNumbers +
                       ": a process with that pid runs, but whether it is this "
                       "run's supervisor cannot be told, so nothing was signalled";
    }
    return found;
  }
  std::string problem;
  const auto recorded = identity_from_json(j, problem);
  if (!recorded) {
    found.unverifiable = true;
    found.stranger = "supervisor.pid cannot be read (" +
                     (j.is_discarded() ? std::string("not JSON") : problem) +
                     "): nothing was signalled";
    return found;
  }
  const auto now = read_identity(recorded->pid);
  if (!now || !process_running(recorded->pid)) return found;  // it has ended
  if (matches(*recorded, now)) {
    found.running = recorded;
  } else {
    found.stranger = "supervisor.pid names pid " + std::to_string(recorded->pid) +
                     ", which is not this run's supervisor (" + how_it_differs(*recorded, *now) +
                     "): nothing was signalled";
  }
  return found;
}

void RunDirectory::write_process_groups(const std::vector<ProcessGroupRecord>& groups) const {
  json records = json::array();
  for (const auto& group : groups) {
    auto record = identity_json(group.leader);
    record["session"] = group.session;
    records.push_back(record);
  }
  write_file_atomically(dir_ / "pgids.json", records.dump());
}

RunDirectory::ProcessGroups RunDirectory::process_groups() const {
  const auto file = dir_ / "pgids.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return {};
  const auto j = json::parse(read_file(file), nullptr, false);
  ProcessGroups found;
  if (j.is_array() && std::all_of(j.begin(), j.end(), [](const json& e) {
        return e.is_number_integer() && e.get<int64_t>() > 0 && e.get<int64_t>() <= INT32_MAX;
      })) {
    // Bare group ids: what runs in them now may be anyone's.
    const auto ids = j.get<std::vector<int>>();
    std::vector<int> running;
    for (pid_t pid : any_processes_in_groups(ids)) running.push_back(pid);
    if (!running.empty())
      found.unverifiable = "pgids.json holds only process group ids (" + joined(ids) + "), " +
                           kBareNumbers + ": processes run in them (pid " + joined(running) +
                           "), but whether they are this run's cannot be told, so nothing was "
                           "signalled";
    return found;
  }
  std::string problem;
  if (!j.is_array()) problem = j.is_discarded() ? "not JSON" : "expected an array of groups";
  for (size_t i = 0; problem.empty() && i < j.size(); ++i) {
    const auto leader = identity_from_json(j[i], problem);
    const auto session = j[i].find("session");
    // Session 0 is what /proc shows for a session whose leader lives outside
    // this pid namespace (a container started under another process's session).
    if (leader && (session == j[i].end() || !session->is_number_integer() ||
                   session->get<int64_t>() < 0 || session->get<int64_t>() > INT32_MAX))
      problem = "\"session\" is not a session id";
    if (!problem.empty()) problem = "entry " + std::to_string(i + 1) + ": " + problem;
    if (problem.empty()) found.groups.push_back({*leader, session->get<pid_t>()});
  }
  if (!problem.empty()) {
    found.groups.clear();
    found.unverifiable = "pgids.json cannot be read (" + problem + "): nothing was signalled";
  }
  return found;
}

std::vector<std::string> RunDirectory::ProcessGroups::strangers() const {
  std::vector<std::string> words;
  if (!unverifiable.empty()) words.push_back(unverifiable);
  for (const auto& group : groups)
    if (auto group_words = strangers_in_group(group); !group_words.empty())
      words.push_back(group_words);
  return words;
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

int64_t RunDirectory::earlier_attempts_end_seq() const {
  int64_t last = 0;
  for (int attempt = 1;; ++attempt) {
    const auto file = dir_ / ("final-attempt-" + std::to_string(attempt) + ".json");
    std::error_code ec;
    if (!fs::exists(file, ec)) return last;
    last = std::max<int64_t>(last, json::parse(read_file(file)).at("last_seq").get<int64_t>());
  }
}

void RunDirectory::set_aside_final() const {
  int attempt = 1;
  while (fs::exists(dir_ / ("final-attempt-" + std::to_string(attempt) + ".json"))) ++attempt;
  fs::rename(dir_ / "final.json", dir_ / ("final-attempt-" + std::to_string(attempt) + ".json"));
  // The last attempt's processes are gone (the caller checked): what named
  // them goes too, so that the new supervisor's files are the only ones.
  std::error_code ignored;  // a stop's files are there only if it was stopped
  for (const char* file : {"stop_grace_s", "stop_why", "pgids.json", "supervisor.pid"})
    fs::remove(dir_ / file, ignored);
}

}  // namespace flotilla::agent
