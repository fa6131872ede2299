#pragma once
// What the study tests read back: a report's files (CSV as rows of
// {header: field}) and a run's steady throughput recomputed from its stored
// step records, apart from the code under test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"
#include "flotilla/protocol/run_metrics.h"

namespace flotilla::testing {

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted) {
      fields.push_back(field);
      field.clear();
    } else
      field += c;
  }
  fields.push_back(field);
  return fields;
}

// The CSV as rows of {header: field}.
inline std::vector<std::map<std::string, std::string>> csv_rows(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  const auto header = csv_fields(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto fields = csv_fields(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < fields.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

// Rank 0's samples after warm-up over their wall time, from the stored step
// records, apart from the code under test.
inline double stored_throughput(const controller::Store& store, const std::string& run) {
  std::vector<nlohmann::json> steps;
  for (const auto& record : store.records(run))
    if (record.type == "step" && record.rank == 0)
      steps.push_back(nlohmann::json::parse(record.body));
  const auto skip = static_cast<size_t>(metrics::warmup_steps(static_cast<int64_t>(steps.size())));
  EXPECT_LT(skip, steps.size()) << run;
  double samples = 0, seconds = 0;
  for (size_t i = skip; i < steps.size(); ++i) {
    samples += steps[i]["samples"].get<double>();
    seconds += steps[i]["samples"].get<double>() / steps[i]["samples_per_s"].get<double>();
  }
  return seconds > 0 ? samples / seconds : 0;
}

}  // namespace flotilla::testing
