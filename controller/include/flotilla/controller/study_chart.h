#pragma once
// A study report's chart in its seed's shape (a sweep's `report: {chart:
// {x, y, series}}`): the compare column y against x, one line per value of
// the series keys, averaged over repeats, out-of-memory points marked, and
// the seed's published points beside ours where its table has them. Written
// as study_chart.json, which `flotilla-gui --render-points` draws
// (flotilla/charts/points_chart.h describes the format).

#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/seed_table.h"
#include "flotilla/controller/study.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

struct StudyChart {
  std::string json;   // what study_chart.json holds
  std::string title;  // the chart's: report.chart.title, or "<y's heading> against <x>"
  // Points with a figure or an out-of-memory mark, ours and the seed's.
  int our_points = 0, seed_points = 0;
};

// The chart's data. A seed row joins when it has x; its y cell "OOM" marks a
// batch that ran out of memory. Throws ConfigError when the chart's y is not
// a compare column.
StudyChart study_chart(const SweepSpec& spec, const StudyTable& table,
                       const std::vector<SweepPointRow>& points,
                       const std::optional<SeedTable>& seed);

}  // namespace flotilla::controller
