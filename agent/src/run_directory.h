#pragma once
// Where one run lives on a node: $HOME/.flotilla/runs/<run>/ holds the start
// request, the supervisor's identity, the ranks' process groups, the spool of
// every record, the final state and each rank's log. The run's files, not any
// connection, are the truth: a new agent session reads them to reattach.
//
// supervisor.pid and pgids.json name processes to signal, so they hold each
// process's identity (pid, start time, boot id), not just its pid: after a
// reboot or a pid wrap the same numbers are other processes. A file of bare
// numbers (agents before identities, or a hand-written one) signals nothing.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/protocol/messages.h"
#include "processes.h"

namespace flotilla::agent {

std::filesystem::path default_home();  // $FLOTILLA_HOME, else ~/.flotilla

struct FinalState {
  std::string outcome;  // finished, failed, killed, oom
  std::string message;
  int64_t last_seq = 0;
};

class RunDirectory {
 public:
  RunDirectory(const std::filesystem::path& home, const std::string& run);

  // Run names become directory names: letters, digits, '-', '_', '.' only.
  static bool valid_run_name(const std::string& run);

  const std::filesystem::path& path() const { return dir_; }
  std::filesystem::path spool() const { return dir_ / "spool.jsonl"; }
  std::filesystem::path rank_log(int64_t rank) const;
  std::filesystem::path config_file() const { return dir_ / "config.json"; }
  bool exists() const;

  void write_start(const protocol::StartRun& start) const;
  protocol::StartRun read_start() const;

  // What supervisor.pid says of the run's supervisor, checked against /proc.
  struct Supervisor {
    std::optional<ProcessIdentity> running;  // the supervisor, while that very process runs
    // When supervisor.pid names a running process that is not the run's
    // supervisor, or one that cannot be told to be: why, in words.
    std::string stranger;
    bool unverifiable = false;  // the file cannot say (bare pid, damaged)
  };
  void write_supervisor(const ProcessIdentity& supervisor) const;
  Supervisor supervisor() const;
  bool supervisor_running() const { return supervisor().running.has_value(); }

  struct ProcessGroups {
    std::vector<ProcessGroupRecord> groups;  // only those recorded with their identity
    // When pgids.json holds bare ids (or cannot be read) and processes run in
    // those groups: why none of them is signalled, in words; else empty.
    std::string unverifiable;
    // Why what pgids.json names is left alone, in words: `unverifiable`,
    // then what runs in each recorded group's id but is not the group's.
    std::vector<std::string> strangers() const;
  };
  void write_process_groups(const std::vector<ProcessGroupRecord>& groups) const;
  ProcessGroups process_groups() const;

  void write_final(const FinalState& state) const;
  std::optional<FinalState> final_state() const;
  // Before a new attempt of an ended run: its end is kept as
  // final-attempt-N.json, and what its stop asked for is forgotten.
  void set_aside_final() const;
  // The seq of the last run_end of the attempts set aside (0: none): a
  // run_end at or below it ended an earlier attempt, not the run.
  int64_t earlier_attempts_end_seq() const;

 private:
  std::filesystem::path dir_;
};

// A run's files are its owner's alone (0600, directories 0700): they hold the
// experiment, the ranks' output and every record. The modes are set
// explicitly, so whatever umask the agent was started with does not widen them.
inline constexpr std::filesystem::perms kPrivateFile =
    std::filesystem::perms::owner_read | std::filesystem::perms::owner_write;
inline constexpr std::filesystem::perms kPrivateDirectory = std::filesystem::perms::owner_all;

// Creates `dir` and the parents it lacks, each one made here 0700; `dir`
// itself is made 0700 even when it exists already.
void create_private_directories(const std::filesystem::path& dir);
// Opens `file` for appending, creating it 0600 (an existing file is made 0600
// too); returns the descriptor, throws std::runtime_error naming the file.
int open_private_for_append(const std::filesystem::path& file);
// Creates `file` 0600 if it is not there, as open_private_for_append does.
void create_private_file(const std::filesystem::path& file);

// Writes `text` to `file` atomically (temp file, then rename), 0600.
void write_file_atomically(const std::filesystem::path& file, const std::string& text);
std::string read_file(const std::filesystem::path& file);

}  // namespace flotilla::agent
