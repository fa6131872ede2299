#include "plan/process_sharing.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>

#include "flotilla/protocol/line_buffer.h"
#include "flotilla/protocol/record_reading.h"

extern char** environ;

namespace flotilla {
namespace {

using Clock = std::chrono::steady_clock;

// A folder of this measurement's files, removed with it.
class ScratchFolder {
 public:
  ScratchFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "flotilla-sharing-XXXXXX");
    if (!mkdtemp(pattern.data()))
      throw std::runtime_error("core sharing: cannot make a folder under " +
                               std::filesystem::temp_directory_path().string());
    path_ = pattern;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One training of the measurement: its process, the pipe its records come
// on, and when each of its steps arrived with the step's compute time.
struct Trainee {
  pid_t pid = -1;
  int records = -1;
  std::filesystem::path stderr_file;
  protocol::LineBuffer lines;
  std::vector<std::pair<Clock::time_point, double>> steps;
};

// This process's environment without what would make the child a rank of
// a distributed run (it is one rank alone) or inject a test's fault.
std::vector<std::string> child_environment() {
  static const std::vector<std::string> dropped{
      "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT=", "FLOTILLA_FAULT="};
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (std::none_of(dropped.begin(), dropped.end(),
                     [&](const std::string& d) { return entry.rfind(d, 0) == 0; }))
      out.push_back(entry);
  }
  return out;
}

void start(Trainee& t, const std::filesystem::path& engine, const std::filesystem::path& config) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("core sharing: no pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, t.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<std::string> args{engine.string(), "--config", config.string(),
                                "--records",     "-",        "--quiet"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto env = child_environment();
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&t.pid, engine.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error("core sharing: cannot start " + engine.string());
  }
  t.records = fds[0];
}

std::string last_words(const Trainee& t) {
  std::ifstream in(t.stderr_file);
  std::string text{std::istreambuf_iterator<char>(in), {}};
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
  return text.empty() ? "nothing on stderr" : text;
}

// When every one of the trainings has made its first step (which warms up):
// from then on all of them are training at once. Unset until then.
std::optional<Clock::time_point> all_training_since(const std::vector<Trainee>& trainees) {
  Clock::time_point since = Clock::time_point::min();
  for (const auto& t : trainees) {
    if (t.steps.empty()) return std::nullopt;
    since = std::max(since, t.steps.front().first);
  }
  return since;
}

// The compute times of a training's steps that ran wholly while all were
// training: those whose previous step had arrived by then.
std::vector<double> steps_while_all_trained(const Trainee& t, Clock::time_point since) {
  std::vector<double> out;
  for (size_t s = 1; s < t.steps.size(); ++s)
    if (t.steps[s - 1].first >= since) out.push_back(t.steps[s].second);
  return out;
}

// Runs n trainings at once until each has made `steps` steps while all of
// them were training, then stops them all at that moment: a training that
// got there first goes on computing beside the others (and is read, so that
// its records never block it), as ranks of one run do.
std::vector<Trainee> train_at_once(const std::filesystem::path& engine,
                                   const std::filesystem::path& config,
                                   const std::filesystem::path& folder, int64_t n, int64_t steps,
                                   double timeout_s) {
  std::vector<Trainee> trainees(static_cast<size_t>(n));
  const auto stop_all = [&] {
    for (auto& t : trainees) {
      if (t.pid > 0) {
        kill(t.pid, SIGKILL);
        waitpid(t.pid, nullptr, 0);
        t.pid = -1;
      }
      if (t.records >= 0) close(t.records);
      t.records = -1;
    }
  };
  const auto all_enough = [&] {
    const auto since = all_training_since(trainees);
    return since && std::all_of(trainees.begin(), trainees.end(), [&](const Trainee& t) {
             return static_cast<int64_t>(steps_while_all_trained(t, *since).size()) >= steps;
           });
  };
  try {
    for (size_t i = 0; i < trainees.size(); ++i) {
      trainees[i].stderr_file = folder / ("stderr-" + std::to_string(i));
      start(trainees[i], engine, config);
    }
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (!all_enough()) {
      std::vector<pollfd> polled;  // one per training, in order
      for (const auto& t : trainees) polled.push_back({t.records, POLLIN, 0});
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0)
        throw std::runtime_error("core sharing: " + std::to_string(n) +
                                 " trainings at once made too few steps in " +
                                 std::to_string(static_cast<int>(timeout_s)) + " s");
      if (poll(polled.data(), polled.size(), static_cast<int>(left.count())) < 0) continue;
      const auto now = Clock::now();
      for (size_t i = 0; i < polled.size(); ++i) {
        if (!(polled[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Trainee& t = trainees[i];
        char buffer[16384];
        const ssize_t got = read(t.records, buffer, sizeof buffer);
        if (got > 0) {
          t.lines.feed(
              std::string_view(buffer, static_cast<size_t>(got)),
              [&](std::string_view line) {
                if (const auto step = records::step_from_line(line))
                  t.steps.emplace_back(now,
                                       step->forward_ms + step->backward_ms + step->optimizer_ms);
              },
              [](size_t) {});
        } else if (got == 0) {
          // Each training is given steps enough to outlast the measurement:
          // one that ends first has failed.
          waitpid(t.pid, nullptr, 0);
          t.pid = -1;
          throw std::runtime_error("core sharing: the engine's one-rank training ended after " +
                                   std::to_string(t.steps.size()) + " of " + std::to_string(steps) +
                                   " steps: " + last_words(t));
        }
      }
    }
  } catch (...) {
    stop_all();
    throw;
  }
  stop_all();
  return trainees;
}

// The mean compute time of the steps each training made while all of them
// were training, averaged over the trainings. The mean, not the median:
// where more ranks than cores time-slice, a step is either left alone or
// preempted for a whole slice, and the median of such steps may land on
// either kind; the mean is what the step rate is.
double shared_step_ms(const std::vector<Trainee>& trainees) {
  const auto since = all_training_since(trainees);
  if (!since) return 0;
  double sum = 0;
  for (const auto& t : trainees) {
    const auto during = steps_while_all_trained(t, *since);
    double total = 0;
    for (double ms : during) total += ms;
    sum += during.empty() ? 0 : total / static_cast<double>(during.size());
  }
  return sum / static_cast<double>(trainees.size());
}

}  // namespace

ExperimentConfig one_rank_alone(const ExperimentConfig& config, int64_t micro_batch,
                                int64_t threads, int64_t steps) {
  ExperimentConfig alone = config;
  alone.name = config.name + "-alone";
  alone.strategy = Strategy::single;
  alone.nodes = {"local"};
  alone.ranks_per_node = 1;
  alone.replicas = 1;
  alone.devices = 0;
  alone.batch_size = micro_batch;
  alone.batch_scope = BatchScope::per_replica;
  alone.chunks = 1;
  alone.balance.clear();
  alone.checkpoint = false;
  // Epochs enough that max_steps ends it, however small the data set.
  alone.epochs = steps;
  alone.max_steps = steps;
  alone.elastic = {};
  alone.compression = {};
  alone.save = {};
  alone.slurm = {};
  alone.limits = {};
  alone.threads = threads;
  return alone;
}

std::vector<double> measure_core_sharing_in_processes(const std::filesystem::path& engine,
                                                      const ExperimentConfig& rank_config,
                                                      int64_t max_at_once, double timeout_s) {
  std::vector<double> slowdown{1.0};
  if (max_at_once <= 1) return slowdown;
  if (rank_config.max_steps < 4)
    throw std::invalid_argument("core sharing: the one-rank training needs at least 4 steps");
  ScratchFolder folder;
  const auto config = folder.path() / "rank.json";
  {
    // Steps enough that every training outlasts the measurement, which
    // stops them all once each has made rank_config.max_steps beside the
    // others.
    auto outlasting = rank_config;
    outlasting.max_steps = rank_config.max_steps * 20;
    outlasting.epochs = std::max(outlasting.epochs, outlasting.max_steps);
    std::ofstream out(config);
    out << to_json(outlasting);
    if (!out) throw std::runtime_error("core sharing: cannot write " + config.string());
  }
  const int64_t steps = rank_config.max_steps;
  const double alone =
      shared_step_ms(train_at_once(engine, config, folder.path(), 1, steps, timeout_s));
  for (int64_t n = 2; n <= max_at_once; ++n)
    slowdown.push_back(alone > 0 ? shared_step_ms(train_at_once(engine, config, folder.path(), n,
                                                                steps, timeout_s)) /
                                       alone
                                 : 1.0);
  return slowdown;
}

}  // namespace flotilla
