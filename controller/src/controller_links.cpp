// A node's link lost and found again: reconnecting and resuming its runs,
// telling a lost agent from an unreachable node, and ending a failed run
// that only unreachable nodes still hold.
#include <QDateTime>
#include <algorithm>

#include "agent_link.h"
#include "event_loop.h"
#include "flotilla/controller/controller.h"
#include "node_connection.h"

namespace flotilla::controller {

bool Controller::node_answers(const std::string& node) const {
  const auto row = store_.node(node);
  return row && NodeConnection::answers(*row);
}

void Controller::link_closed(const std::string& node, int64_t closed_ms) {
  // A node that still answers on its SSH port lost its agent (or its SSH
  // session); one that does not is unreachable: the path is gone. The port
  // check waits on the network, so off the loop.
  in_background([this, node, closed_ms] {
    const bool answers = node_answers(node);
    loop_->post([this, node, closed_ms, answers] {
      if (answers)
        note_problem("node " + node +
                     ": the connection to its agent closed; its runs go on, and this controller "
                     "reconnects and resumes them from the last stored record");
      else
        mark_unreachable(node, closed_ms);
      reconnect_later(node, !answers);
    });
  });
}

void Controller::mark_unreachable(const std::string& node, int64_t since_ms) {
  unreachable_since_ms_.emplace(node, since_ms);
  note_problem("node " + node +
               " is unreachable: its connection went silent and its SSH port does not "
               "answer; its runs go on there, and this controller reconnects and resumes "
               "them from the last stored record once it answers");
  end_runs_left_to_unreachable_nodes();
}

void Controller::reconnect_later(const std::string& node, bool unreachable) {
  loop_->post_after(options_.retry_interval, [this, node, unreachable] {
    std::vector<std::string> here;  // its live runs this controller follows
    for (const auto& run : followed_) {
      const auto row = store_.run(run);
      if (!row || is_terminal(row->state)) continue;
      if (std::find(row->nodes.begin(), row->nodes.end(), node) != row->nodes.end())
        here.push_back(run);
    }
    if (here.empty()) return;
    const int64_t tried_ms = now_ms();
    in_background([this, node, unreachable, here, tried_ms] {
      // A quick check first: an SSH connect to a silent path would wait out
      // its whole timeout, and the path may come back meanwhile.
      if (!node_answers(node)) {
        loop_->post([this, node, unreachable, tried_ms] {
          if (!unreachable) mark_unreachable(node, tried_ms);
          reconnect_later(node, true);
        });
        return;
      }
      try {
        const auto link = link_for(node);
        for (const auto& run : here)
          if (!link->send(protocol::Resume{run, store_.last_seq(run, node)}))
            throw std::runtime_error("the agent went away");
        note_problem("node " + node + ": reconnected; its runs are followed again");
      } catch (const std::exception&) {
        loop_->post([this, node, unreachable] { reconnect_later(node, unreachable); });
      }
    });
  });
}

void Controller::end_runs_left_to_unreachable_nodes() {
  // A copy: ending a run takes it out of failing_.
  const std::vector<std::string> runs(failing_.begin(), failing_.end());
  for (const auto& run : runs) end_if_only_unreachable_nodes_left(run);
}

void Controller::end_if_only_unreachable_nodes_left(const std::string& run) {
  const auto row = store_.run(run);
  if (!row || is_terminal(row->state)) return;
  // Only a run a node failed: a finished or killed node's peers are waited
  // for, however long they are away, so that their records arrive.
  if (!failing_.count(run) || killing_.count(run)) return;
  const auto seen = node_ends_.find(run);
  if (seen == node_ends_.end()) return;
  std::map<std::string, int64_t> unreachable;
  for (const auto& node : row->nodes) {
    if (seen->second.count(node)) continue;
    const auto since = unreachable_since_ms_.find(node);
    if (since == unreachable_since_ms_.end()) return;  // reachable: its end will come
    unreachable.insert(*since);
  }
  if (unreachable.empty()) return;
  const auto ends = std::move(seen->second);
  node_ends_.erase(seen);
  failing_.erase(run);
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
