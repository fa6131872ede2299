#pragma once
// The seed studies: one sweep file per study and scale (resources/studies/,
// compiled into the controller), run by `flotilla study run` and written up
// as a report whose table has the seed's columns in the seed's order, each
// row's speed-up against its group's baseline (the sweep's `report:`
// section, flotilla/protocol/sweep.h). docs/studies.md is the reference.

#include <filesystem>
#include <string>
#include <vector>

#include "flotilla/controller/compare.h"
#include "flotilla/controller/report.h"
#include "flotilla/controller/store.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

// The studies the controller carries, "dp-scaling", ... (sorted), and the
// scales each is written for ("cpu", "gpu").
std::vector<std::string> study_names();
std::vector<std::string> study_scales(const std::string& study);

// The sweep of study `name` at `scale`: a carried study, or, when `name` is a
// path to a file (it ends in .yaml, .yml or .json), that file. Throws
// ConfigError naming the study, the scale or the field that is wrong, with
// the report's columns checked against the axes and the compare columns.
SweepSpec load_study(const std::string& name, const std::string& scale);

// The problems of a report section against the sweep's axes and the compare
// columns ("report.columns: unknown column ..."); empty when fine.
std::vector<std::string> study_report_problems(const SweepSpec& spec);

// A study column that is neither an axis nor a compare column.
// `sent_ratio`: the row's payload MB/step over its baseline's (a measured
// compression ratio, seed 001's).
inline constexpr const char* kSentRatioColumn = "sent_ratio";

// The study's table of a stored sweep: one row per point that has a run, in
// point order, the report's columns (or every axis and the default compare
// columns when it names none). `compare` is the runs' compare table with
// the speed-up of each row against its group's baseline; `run_of_row[i]`
// is row i's run.
struct StudyTable {
  std::vector<std::string> columns;  // keys
  std::vector<std::string> headers;  // what the table shows
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> runs;
  CompareTable compare;
  // Points without a run (skipped, refused, queued), each as one line.
  std::vector<std::string> not_run;
  // How the baselines were chosen, in words.
  std::string baseline_rule;
};

// Throws CompareError when the sweep has no run yet.
StudyTable study_table(const Store& store, const SweepSpec& spec,
                       const std::vector<SweepPointRow>& points);

// Markdown pipe table and CSV of a study table (numbers as the compare table
// prints them; CSV cells the same text).
std::string study_table_markdown(const StudyTable& table);
std::string study_table_csv(const StudyTable& table);

// The database of a study's runs that its report keeps beside itself.
inline constexpr const char* kStudyDatabase = "study.db";

struct StudyReportOptions {
  std::filesystem::path directory;
  std::filesystem::path database;
  std::string command;             // the command line that made it, shown in the report
  std::filesystem::path renderer;  // empty: flotilla-gui next to this program
};

// Writes DIR/report.md (the study table first, then `flotilla report`'s
// summary, column definitions and charts), DIR/study.csv, DIR/summary.csv and
// DIR/study.db (keep_runs: the sweep and its runs). A chart that cannot be
// drawn is a problem in the result.
ReportResult write_study_report(Store& store, const SweepRow& sweep,
                                const StudyReportOptions& options);

}  // namespace flotilla::controller
