#include "run_helpers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include "ports.h"

namespace flotilla::testing {
namespace fs = std::filesystem;

TrainRun run_train(const TempDir& dir, const std::string& config_text, const std::string& prefix) {
  const auto config = dir.write("run.yaml", config_text);
  const auto records = dir.path() / "records.jsonl";
  const auto err = dir.path() / "stderr.txt";
  // Paths come from mkdtemp: no characters that need quoting beyond these quotes.
  const std::string command = prefix + " '" FLOTILLA_TRAIN_BINARY "' --config '" + config.string() +
                              "' --records '" + records.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(("/bin/bash -c \"" + command + "\"").c_str());
  TrainRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err_in(err);
  std::stringstream text;
  text << err_in.rdbuf();
  run.stderr_text = text.str();
  std::ifstream in(records);
  for (std::string line; std::getline(in, line);)
    run.records.push_back(nlohmann::json::parse(line));
  return run;
}

TrainRun run_plan(const TempDir& dir, const std::string& config_text, const std::string& args,
                  bool from_stdin) {
  const auto config = dir.write("plan.yaml", config_text);
  const auto out = dir.path() / "plan.json";
  const auto err = dir.path() / "plan-stderr.txt";
  const std::string input =
      from_stdin ? "- < '" + config.string() + "'" : "'" + config.string() + "'";
  const std::string command = "'" FLOTILLA_TRAIN_BINARY "' --plan " + args + " --config " + input +
                              " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(("/bin/bash -c \"" + command + "\"").c_str());
  TrainRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const auto read = [](const fs::path& file) {
    std::ifstream in(file);
    std::stringstream content;
    content << in.rdbuf();
    return content.str();
  };
  run.stderr_text = read(err);
  run.stdout_text = read(out);
  return run;
}

TrainRun run_train_ranks(const TempDir& dir, const std::string& config_text, int ranks,
                         const std::string& args) {
  const auto config = dir.write("run.yaml", config_text);
  const auto err = dir.path() / "stderr.txt";
  std::string script = "export WORLD_SIZE=" + std::to_string(ranks) +
                       " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_tcp_port()) +
                       "\nstatus=0\npids=\n";
  for (int rank = 0; rank < ranks; ++rank)
    script += "RANK=" + std::to_string(rank) + " '" FLOTILLA_TRAIN_BINARY "' " + args +
              " --config '" + config.string() + "' --records '" +
              (dir.path() / ("records-" + std::to_string(rank) + ".jsonl")).string() + "' 2>>'" +
              err.string() + "' &\npids=\"$pids $!\"\n";
  script += "for p in $pids; do wait $p || status=$?; done\nexit $status\n";
  const auto file = dir.write("ranks.sh", script);
  const int status = std::system(("/bin/bash '" + file.string() + "'").c_str());
  TrainRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err_in(err);
  std::stringstream text;
  text << err_in.rdbuf();
  run.stderr_text = text.str();
  for (int rank = 0; rank < ranks; ++rank) {
    std::ifstream in(dir.path() / ("records-" + std::to_string(rank) + ".jsonl"));
    for (std::string line; std::getline(in, line);)
      run.records.push_back(nlohmann::json::parse(line));
  }
  return run;
}

std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& records,
                                    const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& r : records)
    if (r.at("type") == type) out.push_back(r);
  return out;
}

namespace {
void write_records(const fs::path& file, int n, int label_bytes, int classes, std::mt19937& rng) {
  std::ofstream out(file, std::ios::binary);
  std::uniform_int_distribution<int> byte(0, 255), label(0, classes - 1);
  for (int i = 0; i < n; ++i) {
    const int l = label(rng);
    if (label_bytes == 2) out.put(static_cast<char>(l / 5));
    out.put(static_cast<char>(l));
    for (int p = 0; p < 3072; ++p) out.put(static_cast<char>(byte(rng)));
  }
}
}  // namespace

void write_cifar10(const fs::path& dir, int per_file, int test) {
  fs::create_directories(dir);
  std::mt19937 rng(10);
  for (int i = 1; i <= 5; ++i)
    write_records(dir / ("data_batch_" + std::to_string(i) + ".bin"), per_file, 1, 10, rng);
  write_records(dir / "test_batch.bin", test, 1, 10, rng);
}

void write_cifar100(const fs::path& dir, int train, int test) {
  fs::create_directories(dir);
  std::mt19937 rng(100);
  write_records(dir / "train.bin", train, 2, 100, rng);
  write_records(dir / "test.bin", test, 2, 100, rng);
}

}  // namespace flotilla::testing
