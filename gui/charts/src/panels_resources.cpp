// The panels of the machine under the training: memory, bandwidth,
// communication and the nodes' CPUs and GPUs.
#include <cmath>

#include "panel_common.h"

namespace flotilla::charts::detail {
namespace {

double gib(double bytes) {
  return bytes / kGiB;
}

// Per node a colour after the ranks' (nodes and ranks share a panel).
int node_colour(const RunData& run, const std::string& node) {
  int i = 0;
  for (const auto& [name, system] : run.systems) {
    if (name == node) return int(run.ranks.size()) + i;
    ++i;
  }
  return int(run.ranks.size()) + i;
}

std::string gpu_label(const std::string& node, int64_t index, const SystemColumns::Gpu& gpu,
                      bool several_nodes) {
  std::string label = (several_nodes ? node + " " : "") + "GPU " + std::to_string(index);
  if (!gpu.name.empty()) label += " (" + gpu.name + ")";
  return label;
}

const RankColumns* lead_of(const RunData& run) {
  const auto it = run.ranks.find(run.lead_rank());
  return it == run.ranks.end() ? nullptr : &it->second;
}

// Why a run's bandwidth panel has nothing to draw.
std::string nothing_sent_reason(const RunData& run) {
  if (run.ranks.empty()) return no_steps_reason(run);
  if (run.shape.world_size <= 1)
    return "one rank (strategy " + run.shape.strategy + "): nothing crosses between ranks";
  return "no bytes sent or received by the ranks and nodes chosen";
}

std::string joined(const std::vector<std::string>& lines, const std::string& separator) {
  std::string text;
  for (const auto& line : lines) text += (text.empty() ? "" : separator) + line;
  return text;
}

}  // namespace

PanelDescription memory_panel(const std::vector<const RunData*>& runs, const PanelOptions& o) {
  PanelDescription panel;
  panel.title = "Memory";
  panel.y_axes = {{"memory (GiB)"}};
  if (runs.size() > 1) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& run = *runs[i];
      if (auto why = missing_times_reason(run, o.x)) {
        panel.empty_reason = *why;
        return panel;
      }
      if (const auto* lead = lead_of(run))
        add_rank_field(panel, run, *lead, "mem_peak",
                       {run_label(run) + " peak (" + rank_label(*lead) + ")", run.run.id, "GiB",
                        "mem_peak / 2^30", SeriesStyle::bold, int(i)},
                       o, gib);
    }
    return panel;
  }
  const RunData& run = *runs[0];
  if (auto why = missing_times_reason(run, o.x)) {
    panel.empty_reason = *why;
    return panel;
  }
  const bool gpu = run.shape.device == "cuda";
  for (const auto& [r, rank] : run.ranks) {
    if (!rank_shown(rank, o)) continue;
    const std::string who = rank_label(rank);
    if (gpu) {
      add_rank_field(
          panel, run, rank, "mem_reserved",
          {who + " reserved", run.run.id, "GiB", "mem_reserved / 2^30", SeriesStyle::thin, int(r)},
          o, gib);
      add_rank_field(
          panel, run, rank, "mem_alloc",
          {who + " allocated", run.run.id, "GiB", "mem_alloc / 2^30", SeriesStyle::dashed, int(r)},
          o, gib);
      add_rank_field(
          panel, run, rank, "mem_peak",
          {who + " peak", run.run.id, "GiB", "mem_peak / 2^30", SeriesStyle::dotted, int(r)}, o,
          gib);
    } else {
      add_rank_field(panel, run, rank, "mem_peak",
                     {who + " peak RSS (engine)", run.run.id, "GiB",
                      "mem_peak / 2^30 (the kernel's ru_maxrss of the rank, on the CPU)",
                      SeriesStyle::dashed, int(r)},
                     o, gib);
    }
  }
  const bool several_nodes = run.systems.size() > 1;
  for (const auto& [node, system] : run.systems) {
    if (!node_shown(node, o)) continue;
    const XFrame frame = system_frame(run, system, o.x);
    // Each rank's resident memory as its agent sampled it, once a second.
    for (const auto& [r, rss] : system.rank_rss) {
      const auto rank = run.ranks.find(r);
      if (o.ranks && !o.ranks->count(r)) continue;
      add_line(panel,
               {"rank " + std::to_string(r) + " RSS (agent, 1 s)", run.run.id, "GiB",
                "system rank_rss / 2^30", SeriesStyle::thin,
                rank == run.ranks.end() ? int(r) : int(rank->first)},
               frame, take(rss, frame, gib), o);
    }
    // What NVML says each GPU holds, under its total: the headroom to an OOM.
    for (const auto& [index, g] : system.gpus) {
      const int colour = node_colour(run, node) + int(index);
      add_line(panel,
               {gpu_label(node, index, g, several_nodes) + " used", run.run.id, "GiB",
                "system gpus[].mem_used / 2^30", SeriesStyle::bold, colour},
               frame, take(g.mem_used, frame, gib), o);
      if (std::isfinite(g.mem_total))
        panel.references.push_back({gpu_label(node, index, g, several_nodes) + " total " +
                                        label_number(gib(g.mem_total), 3) + " GiB",
                                    gpu_label(node, index, g, several_nodes) + " total",
                                    gib(g.mem_total), 0, kLimitColour});
    }
  }
  // On a CPU run the limit is the node's memory, when a probe has told it. A
  // line at 23.5 GiB would flatten RSS of a few hundred MiB to the axis: it is
  // drawn only once some RSS comes within half of it, and said in a note before.
  if (!gpu) {
    double highest = 0;
    for (const auto& s : panel.series)
      for (const double v : *s.y)
        if (std::isfinite(v)) highest = std::max(highest, v);
    for (const auto& node : run.nodes) {
      if (!std::isfinite(node.memory_bytes) || !node_shown(node.name, o) ||
          (!run.systems.count(node.name) && run.nodes.size() != 1))
        continue;
      const std::string memory =
          "node " + node.name + " memory " + label_number(gib(node.memory_bytes), 3) + " GiB";
      if (highest >= 0.5 * gib(node.memory_bytes))
        panel.references.push_back(
            {memory, "node " + node.name + " memory", gib(node.memory_bytes), 0, kLimitColour});
      else
        panel.notes.push_back(memory + " (far above the RSS: not drawn)");
    }
  }
  if (panel.series.empty()) {
    panel.references.clear();
    panel.empty_reason = run.ranks.empty() && run.systems.empty()
                             ? no_steps_reason(run)
                             : "no memory figures for the ranks and nodes chosen";
  }
  return panel;
}

PanelDescription bandwidth_panel(const std::vector<const RunData*>& runs, const PanelOptions& o) {
  PanelDescription panel;
  panel.title = "Bandwidth";
  panel.y_axes = {{"MB/s"}};
  auto mb_s = [](const RankColumns& rank, const char* bytes_field) {
    return [&rank, bytes_field](size_t row) {
      const auto* bytes = rank.field(bytes_field);
      const auto* step_ms = rank.field("step_ms");
      if (!bytes || !step_ms) return kMissing;
      // bytes per step over the step's milliseconds: bytes/ms / 1000 = MB/s.
      return (*bytes)[row] / (*step_ms)[row] / 1000;
    };
  };
  if (runs.size() > 1) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& run = *runs[i];
      if (auto why = missing_times_reason(run, o.x)) {
        panel.empty_reason = *why;
        return panel;
      }
      const auto* lead = lead_of(run);
      if (!lead || !lead->has("bytes_sent")) continue;
      // A run whose ranks sent nothing (one rank, or a filter) would draw a
      // line of zeros: it is named in a note instead.
      if (!any_nonzero(run, "bytes_sent", o) && !any_nonzero(run, "busbw_gbps", o)) {
        panel.notes.push_back(run_label(run) + ": " + nothing_sent_reason(run));
        continue;
      }
      const XFrame frame = rank_frame(run, *lead, o.x);
      add_line(panel,
               {run_label(run) + " sent (" + rank_label(*lead) + ")", run.run.id, "MB/s",
                "bytes_sent / step_ms / 1000", SeriesStyle::bold, int(i)},
               frame, take_rows(frame, mb_s(*lead, "bytes_sent")), o);
      add_rank_field(panel, run, *lead, "busbw_gbps",
                     {run_label(run) + " busbw", run.run.id, "MB/s", "all-reduce busbw_gbps x 1000",
                      SeriesStyle::dashed, int(i)},
                     o, [](double v) { return v * 1000; });
    }
    if (panel.series.empty() && !panel.notes.empty()) {
      panel.empty_reason = joined(panel.notes, "; ");
      panel.notes.clear();
    }
    return panel;
  }
  const RunData& run = *runs[0];
  if (auto why = missing_times_reason(run, o.x)) {
    panel.empty_reason = *why;
    return panel;
  }
  const bool traffic = any_nonzero(run, "bytes_sent", o) || any_nonzero(run, "bytes_recv", o);
  if (traffic)
    for (const auto& [r, rank] : run.ranks) {
      if (!rank_shown(rank, o) || !rank.has("bytes_sent")) continue;
      const XFrame frame = rank_frame(run, rank, o.x);
      add_line(panel,
               {rank_label(rank) + " sent", run.run.id, "MB/s", "bytes_sent / step_ms / 1000",
                SeriesStyle::thin, int(r)},
               frame, take_rows(frame, mb_s(rank, "bytes_sent")), o);
      add_line(panel,
               {rank_label(rank) + " received", run.run.id, "MB/s", "bytes_recv / step_ms / 1000",
                SeriesStyle::dashed, int(r)},
               frame, take_rows(frame, mb_s(rank, "bytes_recv")), o);
      if (!rank.has("recv_act_bytes") && !rank.has("recv_grad_bytes")) continue;
      // A pipeline stage's receives, as seed 001 measured bandwidth: bytes
      // received over the time from posting each receive to holding it.
      add_line(panel,
               {rank_label(rank) + " stage recv", run.run.id, "MB/s",
                "(recv_act_bytes + recv_grad_bytes) / (recv_act_ms + recv_grad_ms) / 1000",
                SeriesStyle::dotted, int(r)},
               frame,
               take_rows(frame,
                         [&rank](size_t row) {
                           const auto at = [&](const char* name) {
                             const auto* column = rank.field(name);
                             return column && std::isfinite((*column)[row]) ? (*column)[row] : 0.0;
                           };
                           const double ms = at("recv_act_ms") + at("recv_grad_ms");
                           return ms > 0
                                      ? (at("recv_act_bytes") + at("recv_grad_bytes")) / ms / 1000
                                      : kMissing;
                         }),
               o);
    }
  // The all-reduces' algbw and busbw, as nccl-tests define them: one figure
  // of the whole collective, read from the lead rank, or from the lowest
  // shown rank when the filter leaves the lead out.
  const RankColumns* lead = lead_of(run);
  if (lead && !rank_shown(*lead, o)) {
    lead = nullptr;
    for (const auto& [r, rank] : run.ranks)
      if (rank_shown(rank, o) && rank.has("algbw_gbps")) {
        lead = &rank;
        break;
      }
  }
  if (lead && any_nonzero(run, "algbw_gbps", o)) {
    add_rank_field(panel, run, *lead, "algbw_gbps",
                   {"all-reduce algbw (" + rank_label(*lead) + ")", run.run.id, "MB/s",
                    "algbw_gbps x 1000", SeriesStyle::bold, kJobColour},
                   o, [](double v) { return v * 1000; });
    add_rank_field(panel, run, *lead, "busbw_gbps",
                   {"all-reduce busbw (" + rank_label(*lead) + ")", run.run.id, "MB/s",
                    "busbw_gbps x 1000", SeriesStyle::dashed, kJobColour},
                   o, [](double v) { return v * 1000; });
  } else if (traffic && run.shape.strategy != "ddp") {
    panel.notes.push_back("no all-reduce in strategy " + run.shape.strategy +
                          ": no algbw or busbw");
  }
  bool nic_traffic = false;
  for (const auto& [node, system] : run.systems) {
    if (!node_shown(node, o)) continue;
    const XFrame frame = system_frame(run, system, o.x);
    auto rx = take(system.nic_rx_mb_s, frame), tx = take(system.nic_tx_mb_s, frame);
    for (const auto* column : {rx.get(), tx.get()})
      for (double v : *column) nic_traffic = nic_traffic || (std::isfinite(v) && v > 0);
    const int colour = node_colour(run, node);
    add_line(panel,
             {node + " NIC received", run.run.id, "MB/s", "delta nic_rx / delta time / 10^6",
              SeriesStyle::thin, colour},
             frame, rx, o);
    add_line(panel,
             {node + " NIC sent", run.run.id, "MB/s", "delta nic_tx / delta time / 10^6",
              SeriesStyle::dashed, colour},
             frame, tx, o);
  }
  if (!nic_traffic && !run.systems.empty() && run.run.nodes.size() <= 1)
    panel.notes.push_back("the NIC counters leave out loopback: ranks on one node talk over it");
  if (!traffic && !nic_traffic) {
    panel.series.clear();
    panel.notes.clear();
    panel.empty_reason = nothing_sent_reason(run);
  }
  return panel;
}

PanelDescription communication_panel(const std::vector<const RunData*>& runs,
                                     const PanelOptions& o) {
  PanelDescription panel;
  panel.title = "Communication";
  panel.y_axes = {{"time per step (ms)"}};
  if (runs.size() > 1) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& run = *runs[i];
      if (auto why = missing_times_reason(run, o.x)) {
        panel.empty_reason = *why;
        return panel;
      }
      const auto* lead = lead_of(run);
      if (!lead) continue;
      add_rank_field(
          panel, run, *lead, "comm_busy_ms",
          {run_label(run) + " busy", run.run.id, "ms", "comm_busy_ms", SeriesStyle::bold, int(i)},
          o);
      add_rank_field(
          panel, run, *lead, "comm_ms",
          {run_label(run) + " exposed", run.run.id, "ms", "comm_ms", SeriesStyle::dashed, int(i)},
          o);
    }
    return panel;
  }
  const RunData& run = *runs[0];
  if (auto why = missing_times_reason(run, o.x)) {
    panel.empty_reason = *why;
    return panel;
  }
  if (!any_nonzero(run, "comm_busy_ms", o) && !any_nonzero(run, "comm_ms", o)) {
    panel.empty_reason = run.ranks.empty() ? no_steps_reason(run)
                         : run.shape.world_size <= 1
                             ? "no communication: strategy " + run.shape.strategy + " runs one rank"
                             : "no communication by the ranks chosen";
    return panel;
  }
  // Busy is every operation's duration; exposed is what the step waited for.
  // The gap between them is communication hidden behind compute.
  const bool codec = any_nonzero(run, "compression_ratio", o);
  panel.y_axes.push_back({"operations/s"});
  if (codec) panel.y_axes.push_back({"compression ratio (fp32 / wire)"});
  for (const auto& [r, rank] : run.ranks) {
    if (!rank_shown(rank, o)) continue;
    const std::string who = rank_label(rank);
    add_rank_field(panel, run, rank, "comm_busy_ms",
                   {who + " busy", run.run.id, "ms", "comm_busy_ms", SeriesStyle::thin, int(r)}, o);
    add_rank_field(panel, run, rank, "comm_ms",
                   {who + " exposed", run.run.id, "ms", "comm_ms", SeriesStyle::dashed, int(r)}, o);
    add_rank_field(
        panel, run, rank, "comm_per_s",
        {who + " operations/s", run.run.id, "1/s", "comm_per_s", SeriesStyle::dotted, int(r), 1},
        o);
    if (!codec || !rank.has("compression_ratio")) continue;
    add_rank_field(panel, run, rank, "encode_ms",
                   {who + " encode", run.run.id, "ms", "encode_ms", SeriesStyle::thin,
                    int(run.ranks.size() + 2 * r)},
                   o);
    add_rank_field(panel, run, rank, "decode_ms",
                   {who + " decode", run.run.id, "ms", "decode_ms", SeriesStyle::dashed,
                    int(run.ranks.size() + 2 * r)},
                   o);
    add_rank_field(panel, run, rank, "compression_ratio",
                   {who + " compression ratio", run.run.id, "x", "compression_ratio",
                    SeriesStyle::bold, int(run.ranks.size() + 2 * r + 1), 2},
                   o);
  }
  return panel;
}

PanelDescription system_panel(const std::vector<const RunData*>& runs, const PanelOptions& o) {
  PanelDescription panel;
  panel.title = "System";
  panel.y_axes = {{"utilisation (%)", true}};
  const bool several = runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& run = *runs[i];
    const bool several_nodes = run.systems.size() > 1;
    for (const auto& [node, system] : run.systems) {
      if (!node_shown(node, o)) continue;
      const XFrame frame = system_frame(run, system, o.x);
      const int colour = several ? int(i) : node_colour(run, node);
      add_line(panel,
               {(several ? run_label(run) + " " : "") + node + " CPU", run.run.id, "%",
                "cpu_util x 100", several ? SeriesStyle::bold : SeriesStyle::thin, colour},
               frame, take(system.cpu_util, frame, [](double v) { return 100 * v; }), o);
      if (several) continue;
      for (const auto& [index, g] : system.gpus)
        add_line(panel,
                 {gpu_label(node, index, g, several_nodes) + " utilisation", run.run.id, "%",
                  "gpus[].util x 100", SeriesStyle::dashed, colour + 1 + int(index)},
                 frame, take(g.util, frame, [](double v) { return 100 * v; }), o);
    }
  }
  if (panel.series.empty() && runs.size() == 1) {
    const RunData& run = *runs[0];
    if (run.systems.empty())
      panel.empty_reason = run.skipped_records.count("system records without a time")
                               ? "the system records carry no time (stored before the agents "
                                 "stamped them)"
                               : "no system records yet";
    else if (o.x == XMode::step)
      panel.empty_reason = "no system sample fell between two steps yet: try x = relative time";
    else
      panel.empty_reason = "no system records for the nodes chosen";
  }
  return panel;
}

}  // namespace flotilla::charts::detail
