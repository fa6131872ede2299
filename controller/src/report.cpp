#include "flotilla/controller/report.h"

#include <QByteArray>
#include <QDateTime>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "flotilla/controller/paths.h"

namespace flotilla::controller {
namespace {

namespace fs = std::filesystem;

const char* panel_title(const std::string& panel) {
  if (panel == "throughput") return "Throughput";
  if (panel == "step_time") return "Step time";
  if (panel == "memory") return "Memory";
  if (panel == "bandwidth") return "Bandwidth";
  if (panel == "communication") return "Communication";
  if (panel == "loss") return "Loss and accuracy";
  if (panel == "system") return "System";
  return "Chart";
}

bool is_png(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char signature[8] = {};
  in.read(signature, sizeof signature);
  return in.gcount() == 8 && std::string(signature, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!(out << text) || !out.flush()) throw std::runtime_error("cannot write " + file.string());
}

// What the renderer said went wrong: its first line that is not one of Qt's
// own start-up warnings ("QStandardPaths: XDG_RUNTIME_DIR not set ..."),
// which come first and say nothing about the chart.
std::string renderer_words(const QByteArray& output) {
  for (const auto& line : output.split('\n')) {
    const auto text = line.trimmed();
    if (text.isEmpty() || text.startsWith("QStandardPaths:") || text.startsWith("qt.") ||
        text.startsWith("QFont"))
      continue;
    return text.toStdString();
  }
  return {};
}

}  // namespace

std::string render_chart(const std::vector<std::string>& argv, const fs::path& output,
                         std::chrono::seconds timeout) {
  QProcess process;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");  // no display needed, none used
  process.setProcessEnvironment(env);
  process.setProcessChannelMode(QProcess::MergedChannels);
  QStringList args;
  for (size_t i = 1; i < argv.size(); ++i) args << QString::fromStdString(argv[i]);
  process.start(QString::fromStdString(argv.front()), args);
  if (!process.waitForStarted(10000))
    return "cannot start " + argv.front() + ": " + process.errorString().toStdString();
  if (!process.waitForFinished(static_cast<int>(timeout.count() * 1000))) {
    process.kill();
    process.waitForFinished(5000);
    return argv.front() + " did not finish within " + std::to_string(timeout.count()) + " s";
  }
  const auto words = renderer_words(process.readAll());
  if (process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0)
    return argv.front() + " failed (exit " + std::to_string(process.exitCode()) + ")" +
           (words.empty() ? "" : ": " + words);
  if (!is_png(output)) return argv.front() + " wrote no PNG at " + output.string();
  return {};
}

namespace {

std::string default_title(const CompareTable& table) {
  std::vector<std::string> experiments;
  for (const auto& row : table.rows)
    if (std::find(experiments.begin(), experiments.end(), row.run.experiment_name) ==
        experiments.end())
      experiments.push_back(row.run.experiment_name);
  if (experiments.size() == 1) return experiments.front();
  return std::to_string(table.rows.size()) + " runs compared";
}

}  // namespace

std::vector<std::string> render_arguments(const CompareTable& table, const ReportOptions& options,
                                          const std::string& panel, const fs::path& output) {
  const auto renderer =
      options.renderer.empty() ? sibling_program("flotilla-gui") : options.renderer;
  std::vector<std::string> argv{renderer.string(), "--render", "--db", options.database.string()};
  for (const auto& row : table.rows) {
    argv.push_back("--run");
    argv.push_back(row.run.id);
  }
  argv.insert(argv.end(), {"--panel", panel, "--size", options.size, "-o", output.string()});
  return argv;
}

ReportResult write_report(const CompareTable& table, const ReportOptions& options) {
  std::error_code error;
  fs::create_directories(options.directory, error);
  if (error || !fs::is_directory(options.directory))
    throw std::runtime_error("cannot create the report directory " + options.directory.string() +
                             (error ? ": " + error.message() : ""));
  ReportResult result;
  result.markdown = options.directory / "report.md";
  result.csv = options.directory / "summary.csv";

  std::ostringstream md;
  md << "# " << (options.title.empty() ? default_title(table) : options.title) << "\n\n";
  md << "Flotilla report of " << table.rows.size() << " run(s) from `"
     << (options.database_named.empty() ? options.database.string() : options.database_named)
     << "`, numbers as of "
     << QDateTime::fromMSecsSinceEpoch(table.as_of_ms).toString(Qt::ISODate).toStdString()
     << ". Baseline: `" << table.rows[table.baseline].run.id
     << "`. The same table is in `summary.csv`.\n\n";
  if (!options.command.empty()) md << "Made by `" << options.command << "`.\n\n";
  md << options.lead_markdown;
  md << "## Summary\n\n" << format_compare(table, CompareFormat::markdown) << "\n";
  md << "## Columns\n\n";
  for (const auto& key : table.columns)
    if (const auto* c = find_compare_column(key))
      md << "- **" << c->header << "** (`" << c->key << "`): " << c->definition << "\n";
  md << "\nThroughput is the steady one: the job's samples over their wall time after warm-up "
        "(the first 10 % of steps, at least 5, left out), so a speed-up is T(baseline)/T(run) for "
        "the same work; \"—\" marks a figure a run does not have.\n";

  md << "\n## Charts\n";
  // The renderer is found at run time, not built with the CLI: one that is
  // not there is said once a chart, by its path.
  const auto renderer =
      options.renderer.empty() ? sibling_program("flotilla-gui") : options.renderer;
  const std::string no_renderer = fs::exists(renderer)
                                      ? std::string()
                                      : "the chart renderer " + renderer.string() +
                                            " is not there (flotilla-gui is looked for beside this "
                                            "program; build or install it to draw charts)";
  for (const auto& panel : options.panels) {
    const auto file = options.directory / (panel + ".png");
    md << "\n### " << panel_title(panel) << "\n\n";
    const auto problem = no_renderer.empty()
                             ? render_chart(render_arguments(table, options, panel, file), file,
                                            options.render_timeout)
                             : no_renderer;
    if (problem.empty()) {
      result.images.push_back(file);
      md << "![" << panel_title(panel) << "](" << panel << ".png)\n";
    } else {
      result.problems.push_back(panel + ": " + problem);
      md << "*(not drawn: " << problem << ")*\n";
    }
  }
  write_file(result.markdown, md.str());
  write_file(result.csv, format_compare(table, CompareFormat::csv));
  return result;
}

}  // namespace flotilla::controller
