// A node's link lost and found again: reconnecting and resuming its runs,
// telling a lost agent from an unreachable node, and ending a failed run
// that only unreachable nodes still hold.
#include <QDateTime>
#include <algorithm>

#include "agent_link.h"
#include "flotilla/controller/controller.h"
#include "node_connection.h"

namespace flotilla::controller {

bool Controller::node_answers(const std::string& node) const {
  const auto row = store_.node(node);
  return row && NodeConnection::answers(*row);
}

void Controller::reconnect_later(const std::string& node) {
  const int64_t closed_ms = now_ms();
  in_background([this, node, closed_ms] {
    // A node that still answers on its SSH port lost its agent (or its SSH
    // session); one that does not is unreachable: the path is gone.
    bool unreachable = false;
    const auto mark_unreachable = [&] {
      unreachable = true;
      {
        std::lock_guard lock(mutex_);
        unreachable_since_ms_.emplace(node, closed_ms);
      }
      note_problem("node " + node +
                   " is unreachable: its connection went silent and its SSH port does not "
                   "answer; its runs go on there, and this controller reconnects and resumes "
                   "them from the last stored record once it answers");
      end_runs_left_to_unreachable_nodes();
    };
    if (!node_answers(node))
      mark_unreachable();
    else
      note_problem("node " + node +
                   ": the connection to its agent closed; its runs go on, and this controller "
                   "reconnects and resumes them from the last stored record");
    while (!closing_) {
      pause_before_retry();
      std::vector<std::string> runs;
      {
        std::lock_guard lock(mutex_);
        runs.assign(followed_.begin(), followed_.end());
      }
      std::vector<std::string> here;
      for (const auto& run : runs) {
        const auto row = store_.run(run);
        if (!row || is_terminal(row->state)) continue;
        const auto nodes = row->nodes;
        if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) here.push_back(run);
      }
      if (here.empty() || closing_) return;
      // A quick check first: an SSH connect to a silent path would wait out
      // its whole timeout, and the path may come back meanwhile.
      if (!node_answers(node)) {
        if (!unreachable) mark_unreachable();
        continue;
      }
      try {
        auto& link = link_for(node);
        for (const auto& run : here)
          if (!link.send(protocol::Resume{run, store_.last_seq(run, node)}))
            throw std::runtime_error("the agent went away");
        note_problem("node " + node + ": reconnected; its runs are followed again");
        return;
      } catch (const std::exception&) {
      }
    }
  });
}

void Controller::end_runs_left_to_unreachable_nodes() {
  std::vector<std::string> runs;
  {
    std::lock_guard lock(mutex_);
    runs.assign(failing_.begin(), failing_.end());
  }
  for (const auto& run : runs) end_if_only_unreachable_nodes_left(run);
}

void Controller::end_if_only_unreachable_nodes_left(const std::string& run) {
  const auto row = store_.run(run);
  if (!row || is_terminal(row->state)) return;
  std::map<std::string, protocol::RunEnd> ends;
  std::map<std::string, int64_t> unreachable;
  {
    std::lock_guard lock(mutex_);
    // Only a run a node failed: a finished or killed node's peers are
    // waited for, however long they are away, so that their records arrive.
    if (!failing_.count(run) || killing_.count(run)) return;
    auto seen = node_ends_.find(run);
    if (seen == node_ends_.end()) return;
    for (const auto& node : row->nodes) {
      if (seen->second.count(node)) continue;
      const auto since = unreachable_since_ms_.find(node);
      if (since == unreachable_since_ms_.end()) return;  // reachable: its end will come
      unreachable.insert(*since);
    }
    if (unreachable.empty()) return;
    ends = std::move(seen->second);
    node_ends_.erase(seen);
    failing_.erase(run);
  }
  std::string reason;
  for (const auto& [name, e] : ends) {
    const auto outcome = run_state_from_name(e.outcome);
    if (outcome == RunState::finished || e.message.empty()) continue;
    reason += (reason.empty() ? "" : "; ") + ("node " + name + ": " + e.message);
  }
  for (const auto& [name, since_ms] : unreachable)
    reason +=
        (reason.empty() ? "" : "; ") +
        ("node " + name + ": unreachable since " +
         QDateTime::fromMSecsSinceEpoch(since_ms).toUTC().toString("HH:mm:ss 'UTC'").toStdString() +
         ", so its ranks could not be told to stop; its own "
         "stall watchdog stops them, and its records since "
         "then stay in its spool");
  end_run(run, RunState::failed, reason);
}

}  // namespace flotilla::controller
