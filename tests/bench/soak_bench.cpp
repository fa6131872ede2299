// The soak benchmark (issue 15, Load): a fast run kept going for an hour
// (small_cnn on synthetic data, 4 DDP ranks on the local node, batch 4, a
// 16-sample test split, so the ranks print step records as fast as they can)
// through the real controller (`flotilla run`) into a fresh SQLite database,
// with the window (`flotilla-gui --db DB --run RUN`, offscreen) open on the
// same run. Every minute it prints the records stored (COUNT in SQLite), the
// database's size (and its -wal), the controller's and the window's resident
// memory (VmRSS) and the bytes a record takes. At the end it kills the run
// with `flotilla kill`, then compares the records stored with the agent's
// spool seq by seq (records lost), and prints the growth of both RSS from
// the first minute to the last and of the database per record. Measured and
// printed, never asserted.
// Usage: soak_bench [--minutes M] [--bin DIR] [--no-window] [--keep]
#include <QCoreApplication>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QVariant>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

#include "flotilla/protocol/messages.h"

namespace {

namespace fs = std::filesystem;
namespace protocol = flotilla::protocol;
using Clock = std::chrono::steady_clock;

struct Options {
  int minutes = 60;
  fs::path bin = FLOTILLA_BIN_DIR;
  bool window = true;
  bool keep = false;
};

// The experiment: the most records a second this machine can produce. Epochs
// of 4096 synthetic samples keep the data small; the 16-sample test split
// makes the evaluation after each epoch negligible.
constexpr const char* kExperiment = R"(name: soak
model: small_cnn
dataset: synthetic
synthetic:
  shape: [1, 28, 28]
  classes: 10
  train_samples: 4096
  test_samples: 16
strategy: ddp
ranks_per_node: 4
batch_size: 4
epochs: 1000000
optimizer:
  name: sgd
  lr: 0.01
device: cpu
threads: 1
seed: 1
)";

// VmRSS of `pid` in KiB, -1 when it has gone.
int64_t rss_kib(qint64 pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) {
      const auto digits = line.find_first_of("0123456789");
      int64_t kib = -1;
      if (digits != std::string::npos)
        std::from_chars(line.data() + digits, line.data() + line.size(), kib);
      return kib;
    }
  return -1;
}

int64_t file_size_or_zero(const fs::path& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : int64_t(size);
}

double mib(int64_t bytes) {
  return double(bytes) / (1024.0 * 1024.0);
}

// A read-only connection of its own; each query ends its read transaction,
// so the bench never holds a snapshot that would keep the WAL from being
// checkpointed.
class Database {
 public:
  explicit Database(const fs::path& path) {
    db_ = QSqlDatabase::addDatabase("QSQLITE", "soak");
    db_.setDatabaseName(QString::fromStdString(path.string()));
    db_.setConnectOptions("QSQLITE_OPEN_READONLY;QSQLITE_BUSY_TIMEOUT=10000");
    if (!db_.open()) throw std::runtime_error("cannot open " + path.string() + " read-only");
  }
  int64_t records(const std::string& run) {
    QSqlQuery q(db_);
    q.prepare("SELECT count(*) FROM records WHERE run_id = ?");
    q.addBindValue(QString::fromStdString(run));
    return q.exec() && q.next() ? q.value(0).toLongLong() : -1;
  }
  std::set<int64_t> seqs(const std::string& run) {
    std::set<int64_t> seqs;
    QSqlQuery q(db_);
    q.prepare("SELECT seq FROM records WHERE run_id = ?");
    q.addBindValue(QString::fromStdString(run));
    if (q.exec())
      while (q.next()) seqs.insert(q.value(0).toLongLong());
    return seqs;
  }
  std::string state(const std::string& run) {
    QSqlQuery q(db_);
    q.prepare("SELECT state || ': ' || reason FROM runs WHERE id = ?");
    q.addBindValue(QString::fromStdString(run));
    return q.exec() && q.next() ? q.value(0).toString().toStdString() : "missing";
  }

 private:
  QSqlDatabase db_;
};

struct Sample {
  double elapsed_s = 0;
  int64_t records = 0;
  int64_t db_bytes = 0, wal_bytes = 0;
  int64_t controller_kib = -1, window_kib = -1;
};

// The run id `flotilla run` prints first ("run ID: ..."), once it has.
std::optional<std::string> run_id_from(const fs::path& log) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("run ", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon > 4) return line.substr(4, colon - 4);
    }
  return std::nullopt;
}

// The agent's spool: the seqs of the records and of the run's end, which the
// controller stores one row each; lines of any other kind are counted apart.
struct Spool {
  std::set<int64_t> seqs;
  int64_t other_lines = 0;
};
Spool read_spool(const fs::path& path) {
  Spool spool;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      const auto message = protocol::decode(line);
      if (const auto* r = std::get_if<protocol::Record>(&message))
        spool.seqs.insert(r->seq);
      else if (const auto* e = std::get_if<protocol::RunEnd>(&message))
        spool.seqs.insert(e->seq);
      else
        ++spool.other_lines;
    } catch (const std::exception&) {
      ++spool.other_lines;
    }
  }
  return spool;
}

void print_sample(int minute, const Sample& s, int64_t records_before) {
  const int64_t total = s.db_bytes + s.wal_bytes;
  std::printf("%6d %9.0f %10lld %9lld %9.1f %8.1f %10.1f %10.1f %9.0f\n", minute, s.elapsed_s,
              static_cast<long long>(s.records), static_cast<long long>(s.records - records_before),
              mib(s.db_bytes), mib(s.wal_bytes),
              s.controller_kib < 0 ? -1.0 : double(s.controller_kib) / 1024.0,
              s.window_kib < 0 ? -1.0 : double(s.window_kib) / 1024.0,
              s.records > 0 ? double(total) / double(s.records) : 0.0);
  std::fflush(stdout);
}

void print_growth(const char* what, int64_t first_kib, int64_t last_kib, int64_t max_kib) {
  if (first_kib < 0 || last_kib < 0) {
    std::printf("%s RSS: not measured (the process was not running)\n", what);
    return;
  }
  std::printf(
      "%s RSS: %.1f MiB at minute 1, %.1f MiB at the last minute (%+.1f MiB, %+.1f %%), "
      "at most %.1f MiB\n",
      what, double(first_kib) / 1024.0, double(last_kib) / 1024.0,
      double(last_kib - first_kib) / 1024.0,
      100.0 * double(last_kib - first_kib) / double(first_kib), double(max_kib) / 1024.0);
}

std::optional<Options> parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--no-window") {
      options.window = false;
    } else if (arg == "--keep") {
      options.keep = true;
    } else if (arg == "--bin" && i + 1 < argc) {
      options.bin = argv[++i];
    } else if (arg == "--minutes" && i + 1 < argc) {
      const std::string_view value(argv[++i]);
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), options.minutes);
      if (ec != std::errc() || end != value.data() + value.size() || options.minutes <= 0) {
        std::fprintf(stderr, "soak_bench: --minutes \"%s\": expected a positive whole number\n",
                     argv[i]);
        return std::nullopt;
      }
    } else {
      std::fprintf(stderr,
                   "soak_bench: unknown argument \"%s\"; usage: soak_bench [--minutes M] "
                   "[--bin DIR] [--no-window] [--keep]\n",
                   argv[i]);
      return std::nullopt;
    }
  }
  for (const char* program : {"flotilla", "flotilla-gui", "flotilla-agent", "flotilla-train"})
    if (!fs::exists(options.bin / program) &&
        (options.window || program != std::string("flotilla-gui"))) {
      std::fprintf(stderr, "soak_bench: --bin %s: no %s there (build it, or name its folder)\n",
                   options.bin.c_str(), program);
      return std::nullopt;
    }
  return options;
}

bool wait_for_exit(QProcess& process, std::chrono::seconds limit) {
  return process.state() == QProcess::NotRunning ||
         process.waitForFinished(int(std::chrono::milliseconds(limit).count()));
}

int soak(const Options& options) {
  const fs::path dir =
      fs::temp_directory_path() / ("flotilla-soak-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  const fs::path db = dir / "soak.db", home = dir / "agent-home";
  std::ofstream(dir / "soak.yaml") << kExperiment;

  // The agents the controller and the window start keep their run
  // directories in the scratch folder; the window keeps its settings there.
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("FLOTILLA_HOME", QString::fromStdString(home.string()));
  env.insert("XDG_CONFIG_HOME", QString::fromStdString((dir / "config").string()));
  env.insert("QT_QPA_PLATFORM", "offscreen");

  const auto program = [&](const char* name) {
    return QString::fromStdString((options.bin / name).string());
  };
  const QString db_arg = QString::fromStdString(db.string());
  std::printf(
      "Soak: %d minutes of small_cnn, 4 DDP ranks on this node, batch 4, records into\n"
      "%s; programs from %s; %u hardware threads\n",
      options.minutes, db.c_str(), options.bin.c_str(), std::thread::hardware_concurrency());

  QProcess run;
  run.setProcessEnvironment(env);
  run.setProcessChannelMode(QProcess::MergedChannels);
  run.setStandardOutputFile(QString::fromStdString((dir / "run.log").string()));
  run.start(program("flotilla"),
            {"--db", db_arg, "run", QString::fromStdString((dir / "soak.yaml").string()), "--nodes",
             "local"});
  if (!run.waitForStarted()) {
    std::fprintf(stderr, "soak_bench: cannot start %s\n", qPrintable(program("flotilla")));
    return 1;
  }
  std::optional<std::string> run_id;
  for (const auto until = Clock::now() + std::chrono::minutes(2);
       !run_id && Clock::now() < until && run.state() != QProcess::NotRunning;) {
    run.waitForFinished(200);  // returns at once if it ends; else polls the log
    run_id = run_id_from(dir / "run.log");
  }
  if (!run_id) {
    std::fprintf(stderr, "soak_bench: `flotilla run` printed no run id; its output is in %s\n",
                 (dir / "run.log").c_str());
    run.kill();
    run.waitForFinished();
    return 1;
  }
  const auto started = Clock::now();
  std::printf("run %s; controller (flotilla run) pid %lld\n", run_id->c_str(),
              static_cast<long long>(run.processId()));

  QProcess window;
  if (options.window) {
    window.setProcessEnvironment(env);
    window.setProcessChannelMode(QProcess::MergedChannels);
    window.setStandardOutputFile(QString::fromStdString((dir / "window.log").string()));
    window.start(program("flotilla-gui"),
                 {"--db", db_arg, "--run", QString::fromStdString(*run_id)});
    if (!window.waitForStarted()) std::fprintf(stderr, "soak_bench: the window did not start\n");
    std::printf("window (flotilla-gui, offscreen) pid %lld\n",
                static_cast<long long>(window.processId()));
  }
  const qint64 run_pid = run.processId(), window_pid = options.window ? window.processId() : -1;

  Database database(db);
  std::printf(
      "\nminute   elapsed    records  +records    db MiB  wal MiB  ctl RSS MiB  win RSS MiB  "
      "B/record\n");
  std::vector<Sample> samples;
  int64_t records_before = 0;
  for (int minute = 1; minute <= options.minutes; ++minute) {
    const auto due = started + std::chrono::minutes(minute);
    while (Clock::now() < due && run.state() != QProcess::NotRunning)
      run.waitForFinished(1000);  // the sampling cadence; returns early if the run ends
    if (run.state() == QProcess::NotRunning) {
      std::printf("the run ended on its own before minute %d; see %s\n", minute,
                  (dir / "run.log").c_str());
      break;
    }
    Sample s;
    s.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
    s.controller_kib = rss_kib(run_pid);
    s.window_kib = window_pid > 0 ? rss_kib(window_pid) : -1;
    s.records = database.records(*run_id);
    s.db_bytes = file_size_or_zero(db);
    s.wal_bytes = file_size_or_zero(fs::path(db.string() + "-wal"));
    print_sample(minute, s, records_before);
    records_before = s.records;
    samples.push_back(s);
  }

  // The end: `flotilla kill`, then `flotilla run` follows the run to its end.
  std::printf("\nkilling the run: flotilla kill %s --grace 10\n", run_id->c_str());
  QProcess kill;
  kill.setProcessEnvironment(env);
  kill.setProcessChannelMode(QProcess::MergedChannels);
  kill.start(program("flotilla"),
             {"--db", db_arg, "kill", QString::fromStdString(*run_id), "--grace", "10"});
  const bool kill_done = kill.waitForFinished(120000);
  std::printf("  flotilla kill: %s exit %d: %s", kill_done ? "done," : "still running after 2 min,",
              kill.exitCode(), kill.readAll().constData());
  const bool run_ended = wait_for_exit(run, std::chrono::seconds(120));
  std::printf("  flotilla run: %s, exit status %d\n",
              run_ended ? "ended" : "still running 2 min after the kill", run.exitCode());
  if (!run_ended) {
    run.kill();
    run.waitForFinished();
  }
  if (options.window) {
    window.terminate();
    if (!wait_for_exit(window, std::chrono::seconds(30))) {
      window.kill();
      window.waitForFinished();
    }
  }

  // Records lost: the spool's seqs against the stored ones.
  const Spool spool = read_spool(home / "runs" / *run_id / "spool.jsonl");
  const std::set<int64_t> stored = database.seqs(*run_id);
  std::vector<int64_t> lost, extra;
  std::set_difference(spool.seqs.begin(), spool.seqs.end(), stored.begin(), stored.end(),
                      std::back_inserter(lost));
  std::set_difference(stored.begin(), stored.end(), spool.seqs.begin(), spool.seqs.end(),
                      std::back_inserter(extra));
  std::printf("\nrun state in the database: %s\n", database.state(*run_id).c_str());
  std::printf(
      "records: %zu in the agent's spool (seq %lld..%lld, %lld other lines), %zu stored;"
      " lost %zu, stored but not spooled %zu\n",
      spool.seqs.size(), spool.seqs.empty() ? 0LL : static_cast<long long>(*spool.seqs.begin()),
      spool.seqs.empty() ? 0LL : static_cast<long long>(*spool.seqs.rbegin()),
      static_cast<long long>(spool.other_lines), stored.size(), lost.size(), extra.size());
  for (size_t i = 0; i < std::min<size_t>(lost.size(), 10); ++i)
    std::printf("  lost seq %lld\n", static_cast<long long>(lost[i]));

  if (!samples.empty()) {
    const auto& first = samples.front();
    const auto& last = samples.back();
    int64_t max_controller = 0, max_window = 0;
    for (const auto& s : samples) {
      max_controller = std::max(max_controller, s.controller_kib);
      max_window = std::max(max_window, s.window_kib);
    }
    print_growth("controller", first.controller_kib, last.controller_kib, max_controller);
    print_growth("window", first.window_kib, last.window_kib, max_window);
    // Linear in records: the bytes each record added over the first half of
    // the samples against the second half.
    const auto& middle = samples[samples.size() / 2];
    const auto bytes_per_record = [](const Sample& a, const Sample& b) {
      const int64_t records = b.records - a.records;
      return records > 0
                 ? double((b.db_bytes + b.wal_bytes) - (a.db_bytes + a.wal_bytes)) / double(records)
                 : 0.0;
    };
    std::printf(
        "database: %.1f MiB + %.1f MiB wal for %lld records at the last minute, %.0f B a "
        "record; added per record minute 1 -> %d: %.0f B, minute %d -> %d: %.0f B\n",
        mib(last.db_bytes), mib(last.wal_bytes), static_cast<long long>(last.records),
        double(last.db_bytes + last.wal_bytes) / double(std::max<int64_t>(last.records, 1)),
        int(samples.size() / 2) + 1, bytes_per_record(first, middle), int(samples.size() / 2) + 1,
        int(samples.size()), bytes_per_record(middle, last));
  }
  if (options.keep)
    std::printf("scratch folder kept: %s\n", dir.c_str());
  else
    fs::remove_all(dir);
  return lost.empty() ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const auto options = parse(argc, argv);
  if (!options) return 2;
  try {
    return soak(*options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak_bench: %s\n", e.what());
    return 1;
  }
}
