#include "run_directory.h"

#include "processes.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
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

void write_file_atomically(const fs::path& file, const std::string& text) {
  const fs::path temp = file.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error(temp.string() + ": cannot write");
  }
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
  fs::create_directories(dir_);
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
