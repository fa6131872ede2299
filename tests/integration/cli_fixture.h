#pragma once
// The `flotilla` CLI as a real process for tests: a database and an agent home
// in a test directory of their own, commands run to their end or in the
// background, and the database read back. Shared by the process tests.
#include <signal.h>

#include <gtest/gtest.h>

#include <QString>
#include <clocale>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "flotilla/controller/store.h"
#include "processes.h"
#include "temp_dir.h"

namespace flotilla::testing {

using namespace std::chrono_literals;

// A Fashion-MNIST experiment from the preset with `overrides` appended.
inline std::string preset_with(const std::string& overrides) {
  std::ifstream in(std::string(FLOTILLA_PRESETS_DIR) + "/fashion_mnist_small_cnn.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Later keys win in the overrides: drop the preset's lines for them.
  std::string kept;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto key = line.substr(0, line.find(':'));
    if (!key.empty() && key[0] != ' ' && overrides.find("\n" + key + ":") != std::string::npos)
      continue;
    kept += line + "\n";
  }
  return kept + overrides;
}

// The preset as two ddp ranks of one thread each, named `name`, plus `extra` keys.
inline std::string two_ranks(const std::string& name, const std::string& extra) {
  return preset_with("\nname: " + name + "\nstrategy: ddp\nranks_per_node: 2\nthreads: 1\n" +
                     extra);
}

// The run's training processes that are alive, as /proc shows them.
inline std::vector<pid_t> ranks_alive(const std::string& run) {
  return live_processes_with({"flotilla-train", "--config", run});
}

class Flotilla {
 public:
  // The database at `db_name` in the test's directory (a folder of it may be
  // a file system the test mounts there).
  explicit Flotilla(const std::string& db_name = "flotilla.db")
      : db_((dir_.path() / db_name).string()) {}
  // Nothing of a test outlives it, passed or failed: supervisors and ranks
  // carry the agent home (in this test's directory) on their command lines.
  ~Flotilla() {
    for (pid_t pid : live_processes_with({home()})) ::kill(pid, SIGKILL);
  }
  const TempDir& dir() const { return dir_; }
  const std::string& db() const { return db_; }
  std::string home() const { return (dir_.path() / "agent-home").string(); }
  std::vector<std::string> env(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> e{"FLOTILLA_HOME=" + home()};
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }
  std::unique_ptr<ChildProcess> start(const std::vector<std::string>& args,
                                      const std::string& output_name,
                                      const std::vector<std::string>& extra_env = {}) const {
    std::vector<std::string> argv{FLOTILLA_CLI_BINARY, "--db", db_};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<ChildProcess>(argv, dir_.path() / output_name, env(extra_env));
  }
  // Runs to the end; returns the exit status and output.
  std::pair<int, std::string> run(const std::vector<std::string>& args,
                                  std::chrono::seconds limit = 300s,
                                  const std::vector<std::string>& extra_env = {}) const {
    auto child = start(args, "out-" + std::to_string(++calls_) + ".txt", extra_env);
    const auto status = child->wait(limit);
    EXPECT_TRUE(status) << "flotilla " << args.front() << " still running after " << limit.count()
                        << " s:\n"
                        << child->output();
    return {status.value_or(-1), child->output()};
  }
  controller::Store store() const { return controller::Store(QString::fromStdString(db_)); }
  // The one run in the database, once it has `records` stored records.
  std::string wait_for_run_with_records(size_t records, std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::exists(db_)) {
        auto s = store();
        const auto runs = s.runs();
        if (!runs.empty() && s.records(runs.front().id).size() >= records) return runs.front().id;
      }
      std::this_thread::sleep_for(200ms);
    }
    ADD_FAILURE() << "no run with " << records << " records within " << limit.count() << " s";
    return {};
  }
  struct Background {
    std::unique_ptr<ChildProcess> runner;
    std::string run;  // empty if it never stored `records` records
  };
  // `flotilla run` of `experiment` in the background, once its run has `records` records.
  Background run_in_background(const std::string& experiment, size_t records) const {
    const auto file = dir_.write("background.yaml", experiment);
    Background b;
    b.runner = start({"run", file.string()}, "run.txt");
    b.run = wait_for_run_with_records(records, 120s);
    EXPECT_FALSE(b.run.empty()) << b.runner->output();
    return b;
  }
  std::filesystem::path spool(const std::string& run) const {
    return std::filesystem::path(home()) / "runs" / run / "spool.jsonl";
  }

 private:
  TempDir dir_;
  std::string db_;
  mutable int calls_ = 0;
};

// Every record of the run stored once, seq 1..N with nothing missing, the
// last one the run's end; N is what the agent's spool holds.
inline void expect_complete(const Flotilla& f, const std::string& run) {
  const auto records = f.store().records(run);
  ASSERT_FALSE(records.empty());
  for (size_t i = 0; i < records.size(); ++i)
    ASSERT_EQ(records[i].seq, static_cast<int64_t>(i + 1)) << "seq not contiguous at " << i;
  EXPECT_EQ(records.back().type, "run_end");
  std::ifstream spool(f.spool(run));
  size_t spooled = 0;
  for (std::string line; std::getline(spool, line);) ++spooled;
  EXPECT_EQ(records.size(), spooled);
}

inline std::vector<nlohmann::json> bodies_of(const std::vector<controller::RecordRow>& records,
                                             const std::string& type, int64_t rank) {
  std::vector<nlohmann::json> out;
  for (const auto& r : records)
    if (r.type == type && r.rank == rank) out.push_back(nlohmann::json::parse(r.body));
  return out;
}

inline std::string value_after(const std::string& text, const std::string& label) {
  std::smatch m;
  const std::regex pattern("\\n  " + label + " +([^\\n]*)");
  if (!std::regex_search(text, m, pattern)) return "(no \"" + label + "\" line)";
  return m[1];
}

inline bool locale_installed(const char* name) {
  const std::string previous = std::setlocale(LC_ALL, nullptr);
  const bool installed = std::setlocale(LC_ALL, name) != nullptr;
  std::setlocale(LC_ALL, previous.c_str());
  return installed;
}

// The one run's id, from `flotilla run`'s output.
inline std::string run_id_in(const std::string& output) {
  std::smatch id;
  if (!std::regex_search(output, id, std::regex("run ([0-9]{8}-[0-9]{6}-[0-9a-f]{4}):"))) return {};
  return id[1];
}

}  // namespace flotilla::testing
