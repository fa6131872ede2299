// `flotilla compare` and `flotilla report` as real processes on two real
// runs (ddp on 1 and on 2 ranks, real Fashion-MNIST through the real agent),
// checked against the steady throughputs read back from the database here.
#include <gtest/gtest.h>

#include <QString>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "flotilla/controller/compare.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/numbers.h"
#include "processes.h"
#include "temp_dir.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A database and agent home of the suite's own; the CLI run to its end.
class Cli {
 public:
  std::string db() const { return (dir_.path() / "flotilla.db").string(); }
  const TempDir& dir() const { return dir_; }
  std::pair<int, std::string> run(const std::vector<std::string>& args,
                                  std::chrono::seconds limit = 300s) {
    std::vector<std::string> argv{FLOTILLA_CLI_BINARY, "--db", db()};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess child(argv, dir_.path() / ("out-" + std::to_string(++calls_) + ".txt"),
                       {"FLOTILLA_HOME=" + (dir_.path() / "agent-home").string()});
    const auto status = child.wait(limit);
    EXPECT_TRUE(status) << "flotilla " << args.front() << " still running after " << limit.count()
                        << " s";
    return {status.value_or(-1), child.output()};
  }

 private:
  TempDir dir_;
  int calls_ = 0;
};

// The run's throughput computed here from its stored rank-0 steps, apart
// from the code under test: after leaving out the first 10 % of steps (at
// least 5), their samples over their wall time (samples / samples_per_s).
double stored_throughput(const controller::Store& store, const std::string& run) {
  std::vector<json> steps;
  for (const auto& r : store.records(run, controller::RecordFilter{"step", 0, std::nullopt}))
    steps.push_back(json::parse(r.body));
  const size_t n = steps.size();
  const size_t skip = std::min(n - 1, std::max<size_t>(5, (n + 9) / 10));
  double samples = 0, seconds = 0;
  for (size_t i = skip; i < n; ++i) {
    samples += steps[i]["samples"].get<double>();
    seconds += steps[i]["samples"].get<double>() / steps[i]["samples_per_s"].get<double>();
  }
  return samples / seconds;
}

class CompareCli : public ::testing::Test {
 protected:
  // Two real runs, shared by the suite: DDP on one rank, then on two.
  static void SetUpTestSuite() {
    cli_ = new Cli;
    for (int ranks : {1, 2}) {
      const auto file = cli_->dir().path() / ("ddp" + std::to_string(ranks) + ".yaml");
      std::ofstream(file) << read_text(std::string(FLOTILLA_PRESETS_DIR) +
                                       "/fashion_mnist_small_cnn.yaml")
                          << "\nname: ddp" << ranks << "\nstrategy: ddp\nranks_per_node: " << ranks
                          << "\nthreads: 1\nepochs: 1\nmax_steps: 40\n";
      const auto [status, output] = cli_->run({"run", file.string()});
      ASSERT_EQ(status, 0) << output;
      std::smatch id;
      ASSERT_TRUE(
          std::regex_search(output, id, std::regex("run ([0-9]{8}-[0-9]{6}-[0-9a-f]{4}):")));
      runs_.push_back(id[1]);
    }
  }
  static void TearDownTestSuite() {
    delete cli_;
    cli_ = nullptr;
  }
  void SetUp() override {
    if (runs_.size() != 2) GTEST_FAIL() << "the two runs did not finish";
  }
  static Cli* cli_;
  static std::vector<std::string> runs_;
};
Cli* CompareCli::cli_ = nullptr;
std::vector<std::string> CompareCli::runs_;

TEST_F(CompareCli, MarkdownHasTheColumnsAndRatiosOfTheStoredMedians) {
  const auto [status, md] = cli_->run({"compare", runs_[0], runs_[1], "--format", "markdown"});
  ASSERT_EQ(status, 0) << md;
  // The header row holds every default column, in order.
  std::string header = "|";
  for (const auto& key : controller::default_compare_columns())
    header += " " + controller::find_compare_column(key)->header + " |";
  EXPECT_NE(md.find(header + "\n"), std::string::npos) << md;

  const double one =
      stored_throughput(controller::Store(QString::fromStdString(cli_->db())), runs_[0]);
  const double two =
      stored_throughput(controller::Store(QString::fromStdString(cli_->db())), runs_[1]);
  ASSERT_GT(one, 0);
  ASSERT_GT(two, 0);
  // The Markdown row of the 2-rank run: its throughput, speed-up and efficiency.
  std::smatch row;
  ASSERT_TRUE(std::regex_search(md, row, std::regex("\\| " + runs_[1] + " \\|[^\\n]*")));
  const std::string line = row[0];
  EXPECT_NE(line.find("| " + format_fixed(two, 1) + " |"), std::string::npos) << line;
  EXPECT_NE(
      line.find("| " + format_fixed(two / one, 3) + " | " + format_fixed(two / one / 2, 3) + " |"),
      std::string::npos)
      << line;

  // In full through JSON: equal to the ratio of the two throughputs.
  const auto [json_status, text] = cli_->run({"compare", runs_[0], runs_[1], "--format", "json"});
  ASSERT_EQ(json_status, 0) << text;
  const auto j = json::parse(text);
  EXPECT_EQ(j["baseline"], runs_[0]);
  const auto& values = j["rows"][1]["values"];
  EXPECT_DOUBLE_EQ(values["throughput"].get<double>(), two);
  EXPECT_DOUBLE_EQ(values["speedup"].get<double>(), two / one);
  EXPECT_DOUBLE_EQ(values["scaling_eff"].get<double>(), two / one / 2.0);
  EXPECT_EQ(values["ranks"], 2);
  EXPECT_EQ(values["global_batch"], 128);  // the preset's 64 per replica
  EXPECT_GT(values["sent_mb"].get<double>(), 0.0);
  EXPECT_GT(values["busbw_gbps"].get<double>(), 0.0);
  EXPECT_GT(values["peak_mem_mib"].get<double>(), 0.0);
  EXPECT_TRUE(j["rows"][0]["values"]["busbw_gbps"].is_null());  // one rank all-reduces nothing
  EXPECT_TRUE(j["config_diff"].contains("ranks_per_node"));
  EXPECT_TRUE(j["config_diff"].contains("name"));
  EXPECT_EQ(j["config_diff"].size(), 2u) << j["config_diff"].dump();
}

TEST_F(CompareCli, BadInputIsRefusedNamingIt) {
  const auto [unknown, unknown_out] = cli_->run({"compare", runs_[0], "20000101-000000-dead"});
  EXPECT_EQ(unknown, 2);
  EXPECT_NE(unknown_out.find("no run \"20000101-000000-dead\""), std::string::npos) << unknown_out;
  const auto [column, column_out] = cli_->run({"compare", runs_[0], "--columns", "run,speed"});
  EXPECT_EQ(column, 2);
  EXPECT_NE(column_out.find("unknown column \"speed\""), std::string::npos) << column_out;
  const auto [base, base_out] = cli_->run({"compare", runs_[0], "--baseline", runs_[1]});
  EXPECT_EQ(base, 2);
  EXPECT_NE(base_out.find("is not among the compared runs"), std::string::npos) << base_out;
  const auto [both, both_out] = cli_->run({"compare", runs_[0], "--experiment", "ddp1"});
  EXPECT_EQ(both, 2);
  const auto [exp, exp_out] = cli_->run({"compare", "--experiment", "ddp2", "--format", "csv"});
  EXPECT_EQ(exp, 0) << exp_out;
  EXPECT_EQ(std::count(exp_out.begin(), exp_out.end(), '\n'), 2) << exp_out;  // header, one run
}

TEST_F(CompareCli, ReportWithoutARendererSaysWhereEachChartWouldBe) {
  const auto out = cli_->dir().path() / "report-no-charts";
  // A panel the renderer does not know: the chart fails, the report does not.
  const auto [status, output] =
      cli_->run({"report", runs_[0], runs_[1], "-o", out.string(), "--panels", "nonesuch"});
  EXPECT_EQ(status, 1) << output;
  EXPECT_NE(output.find("flotilla report: chart nonesuch"), std::string::npos) << output;
  const auto md = read_text(out / "report.md");
  EXPECT_NE(md.find("*(not drawn: "), std::string::npos) << md;
  EXPECT_EQ(md.find("![", 0), std::string::npos) << md;  // no link to an image that is not there
  const auto csv = read_text(out / "summary.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
}

// flotilla is built without the window (no build dependency): it looks for
// flotilla-gui beside itself when it needs a chart, and says which file is
// missing when it is not there.
TEST_F(CompareCli, AFlotillaWithoutTheWindowBesideItSaysWhichRendererIsMissing) {
  const auto alone = cli_->dir().path() / "alone";
  std::filesystem::create_directories(alone);
  std::filesystem::copy_file(FLOTILLA_CLI_BINARY, alone / "flotilla");
  const auto missing = (alone / "flotilla-gui").string();
  const auto run_alone = [&](std::vector<std::string> args, const std::string& name) {
    args.insert(args.begin(), {(alone / "flotilla").string(), "--db", cli_->db()});
    ChildProcess process(args, alone / name);
    const auto status = process.wait(120s);
    return std::make_pair(status.value_or(-1), process.output());
  };
  const auto [plot, plot_out] =
      run_alone({"plot", runs_[0], "-o", (alone / "plot.png").string()}, "plot.txt");
  EXPECT_EQ(plot, 2) << plot_out;
  EXPECT_NE(plot_out.find(missing), std::string::npos) << plot_out;
  const auto out = alone / "report";
  const auto [report, report_out] =
      run_alone({"report", runs_[0], runs_[1], "-o", out.string()}, "report.txt");
  EXPECT_EQ(report, 1) << report_out;
  const auto md = read_text(out / "report.md");
  EXPECT_NE(md.find("*(not drawn: the chart renderer " + missing + " is not there"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("## Summary"), std::string::npos) << md;
}

TEST_F(CompareCli, ReportLinksChartsThatExistAndArePng) {
  // The charts are drawn by the flotilla-gui --render beside the CLI (this
  // test builds it): never skipped, a report without its images fails here.
  const auto out = cli_->dir().path() / "report";
  const auto [status, output] = cli_->run({"report", runs_[0], runs_[1], "-o", out.string()});
  ASSERT_EQ(status, 0) << output;
  const auto md = read_text(out / "report.md");
  EXPECT_NE(md.find("## Summary"), std::string::npos);
  EXPECT_NE(md.find("### Config diff"), std::string::npos);
  const std::regex link("!\\[[^\\]]*\\]\\(([^)]+)\\)");
  int links = 0;
  for (auto it = std::sregex_iterator(md.begin(), md.end(), link); it != std::sregex_iterator();
       ++it, ++links) {
    const auto image = out / (*it)[1].str();
    ASSERT_TRUE(std::filesystem::exists(image)) << image;
    EXPECT_EQ(read_text(image).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << image;
  }
  EXPECT_EQ(links, 4) << md;  // throughput, step time, memory, bandwidth
  const auto csv = read_text(out / "summary.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
}

}  // namespace
}  // namespace flotilla::testing
