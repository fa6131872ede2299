#pragma once
// A compare table written out as a report a person can read and paste:
// DIR/report.md (the summary as a GitHub pipe table, what each column means,
// the config diff, and the overlaid charts it links) and DIR/summary.csv.
// The charts are PNG files drawn by the sibling `flotilla-gui --render`
// (the controller never links the charts library: DESIGN.md), one per panel,
// every run overlaid.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "flotilla/controller/compare.h"

namespace flotilla::controller {

struct ReportOptions {
  std::filesystem::path directory;  // created when missing
  std::filesystem::path database;   // what the renderer reads (--db)
  // What the report says its runs came from; empty: `database`.
  std::string database_named;
  std::string title;  // empty: made from the runs
  // The renderer; empty: flotilla-gui next to this program.
  std::filesystem::path renderer;
  std::vector<std::string> panels{"throughput", "step_time", "memory", "bandwidth"};
  std::string size = "1000x500";  // each chart's pixels, WxH
  std::chrono::seconds render_timeout{180};
  // Markdown placed before the summary (a study's own table), and a line
  // after the first paragraph (the command that made the report); optional.
  std::string lead_markdown;
  std::string command;
};

struct ReportResult {
  std::filesystem::path markdown, csv;
  std::vector<std::filesystem::path> images;  // those rendered
  // Charts that could not be drawn, each with the renderer's words; the
  // Markdown says so where the image would be.
  std::vector<std::string> problems;
};

// Runs a renderer's command line (argv[0] the program, offscreen) that
// writes the PNG `output`; empty on success, else the renderer's words.
std::string render_chart(const std::vector<std::string>& argv, const std::filesystem::path& output,
                         std::chrono::seconds timeout);

// The renderer's command line for one panel of `table`'s runs.
std::vector<std::string> render_arguments(const CompareTable& table, const ReportOptions& options,
                                          const std::string& panel,
                                          const std::filesystem::path& output);

// Writes the report; throws std::runtime_error when the directory or a file
// cannot be written. A chart that fails is a problem in the result, not a throw.
ReportResult write_report(const CompareTable& table, const ReportOptions& options);

}  // namespace flotilla::controller
