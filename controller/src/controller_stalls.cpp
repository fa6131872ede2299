// The controller's stall watchdog: a node of a live run that sends nothing
// while its link is up (its host frozen, its agent and supervisor stopped)
// ends the run failed, naming the node and its ranks' last steps.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent_link.h"
#include "event_loop.h"
#include "flotilla/controller/controller.h"

namespace flotilla::controller {

namespace {
using Clock = std::chrono::steady_clock;

// The supervisor sends a system sample every second and the agent streams
// it at once, so a node is silent only when nothing there runs. A node is
// still allowed at least this long, whatever stall_timeout_s says: a run's
// first samples follow its start by a second or two, and a small
// stall_timeout_s (meant for a rank) must not fail a node for that.
constexpr std::chrono::seconds kLeastNodeSilence{10};
constexpr std::chrono::seconds kCheckEvery{1};

// The config's stall_timeout_s, as the agent's supervisor reads it (an older
// config without the key gets the default; 0 turns the watchdog off).
std::chrono::seconds stall_timeout_of(const std::string& config_json) {
  const auto config = nlohmann::json::parse(config_json, nullptr, false);
  int64_t seconds = kDefaultStallTimeoutSeconds;
  if (config.is_object())
    if (const auto it = config.find("stall_timeout_s");
        it != config.end() && it->is_number_integer())
      seconds = std::max<int64_t>(0, it->get<int64_t>());
  return std::chrono::seconds(seconds);
}

// Each rank's step, from its last step record (a record without one is left out).
std::map<int64_t, int64_t> steps_of(const std::map<int64_t, std::string>& last_step_record) {
  std::map<int64_t, int64_t> steps;
  for (const auto& [rank, json] : last_step_record) {
    const auto body = nlohmann::json::parse(json, nullptr, false);
    if (!body.is_object()) continue;
    if (const auto it = body.find("step"); it != body.end() && it->is_number_integer())
      steps[rank] = it->get<int64_t>();
  }
  return steps;
}

std::string ranks_and_steps(const std::vector<int64_t>& ranks,
                            const std::map<int64_t, int64_t>& last_step) {
  std::string text;
  for (const int64_t rank : ranks) {
    const auto step = last_step.find(rank);
    text +=
        (text.empty() ? "rank " : ", rank ") + std::to_string(rank) +
        (step == last_step.end() ? " no step yet" : " last step " + std::to_string(step->second));
  }
  return text;
}
}  // namespace

void Controller::heard_from(const std::string& run, const std::string& node,
                            const protocol::Record* record) {
  auto& heard = heard_[run].nodes[node];
  heard.at = Clock::now();
  if (record && record->rank >= 0 && record->record_type == "step")
    heard.last_step_record[record->rank] = record->record_json;
}

void Controller::check_stalls() {
  loop_->post_after(kCheckEvery, [this] { check_stalls(); });
  const auto now = Clock::now();
  std::set<std::string> linked;  // nodes whose link is open and not marked unreachable
  {
    std::lock_guard lock(links_mutex_);
    for (const auto& [node, link] : links_)
      if (link->open() && !unreachable_since_ms_.count(node)) linked.insert(node);
  }
  // A run is watched from the first word of any of its nodes (Started, a
  // record, an attach): before that the start has limits of its own.
  std::map<std::string, std::pair<std::chrono::seconds, std::vector<StalledNode>>> silent;
  for (auto it = heard_.begin(); it != heard_.end();) {
    auto& [run, heard] = *it;
    if (!followed_.count(run)) {
      it = heard_.erase(it);  // ended, or a late record of a run no longer followed
      continue;
    }
    ++it;
    if (!heard.stall_timeout) {
      // The store may refuse a read for a while (a locked database): the
      // next check tries again.
      try {
        const auto row = store_.run(run);
        if (!row) continue;
        heard.stall_timeout = stall_timeout_of(row->config_json);
        heard.members = row->nodes;
      } catch (const std::exception& e) {
        note_problem(std::string("stall watchdog: ") + e.what());
        continue;
      }
    }
    if (*heard.stall_timeout == std::chrono::seconds(0) || stall_checks_.count(run)) continue;
    const auto allowed = std::max(*heard.stall_timeout, kLeastNodeSilence);
    const auto ends = node_ends_.find(run);
    for (const auto& node : heard.members) {
      if (ends != node_ends_.end() && ends->second.count(node)) continue;
      auto [at, first_seen] = heard.nodes.try_emplace(node);
      // A node without a link has nothing to say: its clock starts again
      // when the link is back (the stream resumes from its last record).
      if (first_seen || !linked.count(node)) {
        at->second.at = now;
        continue;
      }
      if (now - at->second.at < allowed) continue;
      auto& found = silent[run];
      found.first = *heard.stall_timeout;
      found.second.push_back({node, steps_of(at->second.last_step_record)});
    }
  }
  for (auto& [run, found] : silent) {
    // A silent path is not a frozen host: a node whose SSH port does not
    // answer is about to be marked unreachable (kUnreachableWithin), and its
    // run goes on and is resumed when the path is back. Only a node that
    // answers yet sends nothing is stalled. The ports are tried off the loop.
    stall_checks_.insert(run);
    in_background([this, run = run, timeout = found.first, silent_nodes = found.second] {
      std::vector<StalledNode> stalled;
      for (const auto& node : silent_nodes)
        if (node_answers(node.node)) stalled.push_back(node);
      loop_->post([this, run, timeout, stalled = std::move(stalled)]() mutable {
        stall_checks_.erase(run);
        // A node heard from while its port was tried is not stalled after all.
        const auto heard = heard_.find(run);
        if (heard == heard_.end() || !followed_.count(run)) return;
        const auto allowed = std::max(timeout, kLeastNodeSilence);
        const auto spoke = [&](const StalledNode& node) {
          const auto at = heard->second.nodes.find(node.node);
          return at != heard->second.nodes.end() && Clock::now() - at->second.at < allowed;
        };
        stalled.erase(std::remove_if(stalled.begin(), stalled.end(), spoke), stalled.end());
        if (!stalled.empty()) end_stalled(run, timeout, stalled);
      });
    });
  }
}

void Controller::end_stalled(const std::string& run, std::chrono::seconds timeout,
                             const std::vector<StalledNode>& stalled) {
  heard_.erase(run);
  const auto row = store_.run(run);
  if (!row || is_terminal(row->state)) return;
  const auto& nodes = row->nodes;
  const int64_t ranks_per_node =
      nodes.empty() ? 0 : row->world_size / static_cast<int64_t>(nodes.size());
  std::string reason = "stalled: no record for " + std::to_string(timeout.count()) + " s from ";
  std::string named;
  for (const auto& node : stalled) {
    const auto at = std::find(nodes.begin(), nodes.end(), node.node) - nodes.begin();
    std::vector<int64_t> ranks;
    for (int64_t r = 0; r < ranks_per_node; ++r) ranks.push_back(at * ranks_per_node + r);
    named += (named.empty() ? "node " : ", node ") + node.node + " (" +
             ranks_and_steps(ranks, node.last_step) + ")";
  }
  reason += named + (stalled.size() == 1 ? "; its supervisor or host is not running"
                                         : "; their supervisors or hosts are not running");
  std::vector<std::string> to_stop;
  // What other nodes said as they ended (often their ranks stalled in a
  // collective with the frozen one) follows the cause.
  const auto ends = node_ends_.find(run);
  for (const auto& node : nodes) {
    if (ends == node_ends_.end() || !ends->second.count(node)) {
      to_stop.push_back(node);
      continue;
    }
    const auto& end = ends->second.at(node);
    if (end.outcome != name_of(RunState::finished) && !end.message.empty())
      reason += "; node " + node + ": " + end.message;
  }
  end_run(run, RunState::failed, reason);
  // The existing stop path: reachable nodes stop their ranks now; a frozen
  // node's agent reads the stop when it runs again (its link is up, so the
  // stop is written to it), and its own watchdog would stop its ranks then
  // anyway; a node whose link closed meanwhile gets the stop retried.
  std::string failed_nodes;
  for (const auto& node : stalled)
    failed_nodes += (failed_nodes.empty() ? "node " : ", node ") + node.node;
  stop_after_failure(run, failed_nodes, to_stop);
}

}  // namespace flotilla::controller
