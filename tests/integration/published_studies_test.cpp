// The reports under docs/studies/ read back from the databases kept beside
// them (`study.db`, or `study.db.xz` where the database is over the
// repository's 2 MiB a file): each report's "Seed vs ours" is what its study.db gives today, its
// "ours" figures are those recomputed here from the stored records, each of
// the seed's findings carries its verdict, and no report names a path of the
// machine it was made on.
#include <gtest/gtest.h>

#include <QProcess>
#include <QString>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "flotilla/controller/seed_findings.h"
#include "flotilla/controller/seed_table.h"
#include "flotilla/controller/study.h"
#include "flotilla/controller/sweep_store.h"
#include "study_files.h"
#include "temp_dir.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;

const std::filesystem::path kStudies = FLOTILLA_DOCS_DIR "/studies";

// Rank 0's test accuracy of its last epoch, in percent.
std::optional<double> stored_accuracy(const controller::Store& store, const std::string& run) {
  std::optional<double> last;
  for (const auto& record : store.records(run))
    if (record.type == "epoch" && record.rank == 0)
      last = 100.0 * json::parse(record.body)["acc_test"].get<double>();
  return last;
}

// One epoch's work at the steady rate: rank 0's samples in its last
// recorded epoch over its steady throughput.
double stored_steady_epoch_s(const controller::Store& store, const std::string& run) {
  std::map<int64_t, double> samples_by_epoch;
  for (const auto& record : store.records(run))
    if (record.type == "step" && record.rank == 0) {
      const auto step = json::parse(record.body);
      samples_by_epoch[step["epoch"].get<int64_t>()] += step["samples"].get<double>();
    }
  return samples_by_epoch.empty()
             ? 0
             : samples_by_epoch.rbegin()->second / stored_throughput(store, run);
}

// The study's database, into `into`: a copy of study.db (opening may migrate
// it: not the tree's), or study.db.xz decompressed by xz(1).
void unpack_database(const std::filesystem::path& dir, const std::filesystem::path& into) {
  if (std::filesystem::exists(dir / "study.db")) {
    std::filesystem::copy_file(dir / "study.db", into);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(dir / "study.db.xz")) << dir << " keeps no study.db(.xz)";
  QProcess xz;
  xz.setStandardOutputFile(QString::fromStdString(into.string()));
  xz.start("xz",
           {"--decompress", "--stdout", QString::fromStdString((dir / "study.db.xz").string())});
  ASSERT_TRUE(xz.waitForFinished(60000)) << "xz: " << xz.errorString().toStdString();
  ASSERT_EQ(xz.exitCode(), 0) << "xz: " << xz.readAllStandardError().toStdString();
}

std::string strategy_of(const controller::SweepPointRow& point) {
  return json::parse(point.config_json).value("strategy", std::string("single"));
}

class PublishedStudy : public ::testing::TestWithParam<const char*> {};

TEST_P(PublishedStudy, ReadsBackFromTheDatabaseKeptBesideIt) {
  const auto dir = kStudies / GetParam();
  const auto report = read_text(dir / "report.md");
  ASSERT_FALSE(report.empty()) << dir;
  for (const char* path : {"/tmp/", "/work/", "/home/", "/root/"})
    EXPECT_EQ(report.find(path), std::string::npos) << GetParam() << " names " << path;

  TempDir scratch;
  const auto copy = scratch.path() / "study.db";
  ASSERT_NO_FATAL_FAILURE(unpack_database(dir, copy));
  controller::Store store(QString::fromStdString(copy.string()));
  controller::SweepStore sweeps(store);
  const auto all = sweeps.sweeps();
  ASSERT_EQ(all.size(), 1u) << GetParam();
  EXPECT_NE(report.find("# Study " + all[0].name), std::string::npos) << GetParam();
  const auto spec = parse_sweep(all[0].spec_json, "sweep");
  const auto points = sweeps.points(all[0].id);
  const auto table = controller::study_table(store, spec, points);
  const auto seed = controller::carried_seed_table(spec);
  if (!seed) {
    EXPECT_FALSE(std::filesystem::exists(dir / "seed_vs_ours.csv")) << GetParam();
    return;
  }

  // The report's seed table is the one its database gives now, number for number.
  const auto comparison = controller::compare_with_seed(*seed, spec, table, points);
  const auto published = read_text(dir / "seed_vs_ours.csv");
  EXPECT_EQ(published, controller::seed_comparison_csv(comparison)) << GetParam();

  // Its "ours" accuracy and (for DDP runs, led by rank 0) throughput, from the records.
  size_t recomputed = 0;
  for (const auto& row : csv_rows(published)) {
    std::vector<const controller::SweepPointRow*> matching;
    for (const auto& point : points) {
      if (point.run_id.empty()) continue;
      bool same = true;
      for (const auto& key : comparison.match_keys) {
        const auto value = json::parse(
            point_value_json(spec, point.values_json, point.config_json, key), nullptr, false);
        const auto& cell = row.at(key);
        same = same && (value.is_string()   ? value.get<std::string>() == cell
                        : value.is_number() ? std::abs(value.get<double>() - std::stod(cell)) < 1e-9
                                            : false);
      }
      if (same) matching.push_back(&point);
    }
    const auto check = [&](const std::string& figure, auto recompute) {
      const auto cell = row.find(figure + " ours");
      if (cell == row.end() || cell->second.empty() || matching.empty()) return;
      double sum = 0;
      for (const auto* point : matching) {
        const auto value = recompute(*point);
        if (!value) return;  // a figure this test does not recompute for such a run
        sum += *value;
      }
      const double ours = sum / static_cast<double>(matching.size());
      EXPECT_NEAR(std::stod(cell->second), ours, 1e-9 * std::abs(ours) + 1e-9)
          << GetParam() << " " << figure << " of " << matching.front()->values_json;
      ++recomputed;
    };
    check("acc_test_pct",
          [&](const controller::SweepPointRow& p) { return stored_accuracy(store, p.run_id); });
    check("throughput", [&](const controller::SweepPointRow& p) -> std::optional<double> {
      if (strategy_of(p) != "ddp") return std::nullopt;
      return stored_throughput(store, p.run_id);
    });
    check("steady_epoch_s", [&](const controller::SweepPointRow& p) -> std::optional<double> {
      if (strategy_of(p) != "ddp") return std::nullopt;
      return stored_steady_epoch_s(store, p.run_id);
    });
  }
  EXPECT_GT(recomputed, 0u) << GetParam() << ": no figure recomputed";

  // Each finding of the seed's with its verdict, in the report.
  for (const auto& v :
       controller::judge_findings(controller::carried_seed_findings(spec, *seed), comparison)) {
    EXPECT_NE(report.find("| " + v.says + " |"), std::string::npos) << GetParam() << ": " << v.says;
    EXPECT_NE(report.find("**" + v.verdict + "** | " + v.why + " |"), std::string::npos)
        << GetParam() << ": " << v.says << " " << v.verdict;
  }
}

INSTANTIATE_TEST_SUITE_P(Reports, PublishedStudy,
                         ::testing::Values("dp-scaling", "pipe-vs-ddp-memory", "pipeline-vs-dp",
                                           "pipetransformer", "sort-quantization",
                                           "vgg-freeze-traffic"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace flotilla::testing
