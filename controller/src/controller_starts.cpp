// Starting runs: a new run of a config, the all-reduce sweep of `nodes
// bench`, and a new attempt of an ended run (resume); each sends its StartRun
// to every node of the run, and a failure on the way ends the run failed.
#include <future>
#include <nlohmann/json.hpp>

#include "agent_link.h"
#include "flotilla/controller/controller.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/nodes.h"

namespace flotilla::controller {

std::string Controller::start_run(const ExperimentConfig& config,
                                  std::optional<int64_t> experiment_id, const std::string& run_id) {
  return start(config, experiment_id, protocol::RunMode::train, {}, run_id);
}

std::string Controller::start_link_bench(const LinkBenchRequest& request) {
  // The ranks need a valid config to rendezvous and pick their device; the
  // model and data are never built. Synthetic data needs no files.
  ExperimentConfig config;
  config.name = "link bench " + join_list(request.nodes);
  config.strategy = Strategy::ddp;
  config.dataset = DatasetKind::synthetic;
  config.synthetic.shape = {1, 8, 8};
  config.synthetic.train_samples = 16;
  config.synthetic.test_samples = 16;
  config.batch_size = 1;
  config.max_steps = 1;
  config.threads = 1;
  config.nodes = request.nodes;
  config.ranks_per_node = request.ranks_per_node;
  config.device = request.device;
  if (config.world_size() < 2)
    throw ConfigError({"nodes: an all-reduce sweep needs at least 2 ranks, got " +
                       std::to_string(config.world_size()) +
                       "; name two or more nodes or give --ranks-per-node 2"});
  return start(config, std::nullopt, protocol::RunMode::allreduce_bench, request.sweep);
}

std::string Controller::start(const ExperimentConfig& config, std::optional<int64_t> experiment_id,
                              protocol::RunMode mode, const protocol::BenchOptions& bench,
                              const std::string& run_id) {
  auto problems = validate(config);
  for (auto& problem : hosting_problems(config)) problems.push_back(std::move(problem));
  if (!problems.empty()) throw ConfigError(problems);

  RunRow row;
  row.id = run_id.empty() ? new_run_id() : run_id;
  row.experiment_id = experiment_id;
  row.experiment_name = config.name;
  row.config_json = to_json(config);
  row.nodes = config.nodes;
  row.world_size = config.world_size();
  row.created_ms = now_ms();
  store_.create_run(row);
  if (mode == protocol::RunMode::allreduce_bench)
    add_link_bench(store_,
                   {row.id, node_set_key(config.nodes), config.ranks_per_node,
                    std::string(name_of(config.device)), row.created_ms, RunState::created});
  if (observer_) observer_->state_changed(row.id, RunState::created, "");
  move_run(row.id, RunState::starting);
  {
    std::lock_guard lock(mutex_);
    followed_.insert(row.id);
  }
  start_on_nodes(row.id, config, row.config_json, mode, bench, /*resume=*/false);
  return row.id;
}

void Controller::resume_run(const std::string& run) {
  const auto row = store_.run(run);
  if (!row) throw std::runtime_error("no run \"" + run + "\" in " + store_.path().toStdString());
  if (!is_terminal(row->state))
    throw std::runtime_error("run " + run + " is " + std::string(name_of(row->state)) +
                             ": only a run that has ended can be resumed");
  if (row->state == RunState::finished)
    throw std::runtime_error("run " + run + " finished: there is nothing to resume");
  const auto config = parse_experiment(row->config_json, "run " + run + "'s stored config");
  if (!config.save.enabled())
    throw ConfigError({"save: run " + run +
                       " saved no checkpoints (its config sets neither save.every_steps nor "
                       "save.every_minutes), so a resume would train from step 0; start a new "
                       "run instead"});
  if (auto problems = hosting_problems(config); !problems.empty()) throw ConfigError(problems);
  const std::string reason = "resumed: attempt " + std::to_string(store_.attempts(run) + 1);
  if (!store_.reopen(run, reason))
    throw std::runtime_error("run " + run + " changed state meanwhile and was not resumed");
  if (observer_) observer_->state_changed(run, RunState::starting, reason);
  {
    std::lock_guard lock(mutex_);
    ended_.erase(run);
    node_ends_.erase(run);
    killing_.erase(run);
    failing_.erase(run);
    followed_.insert(run);
  }
  start_on_nodes(run, config, row->config_json, protocol::RunMode::train, {}, /*resume=*/true);
}

void Controller::start_on_nodes(const std::string& run, const ExperimentConfig& config,
                                const std::string& config_json, protocol::RunMode mode,
                                const protocol::BenchOptions& bench, bool resume) {
  RunRow row;
  row.id = run;
  row.config_json = config_json;
  row.world_size = config.world_size();
  std::vector<std::string> started;  // the nodes a StartRun was sent to
  try {
    // Rank 0's node serves the rendezvous: this machine for local runs, else
    // the first node at its address, on a port its agent finds free.
    // Connecting, deploying and starting agents takes seconds a node: all
    // nodes at once, so that N nodes cost about one node's time.
    std::vector<std::future<void>> connecting;
    for (const auto& node : config.nodes)
      connecting.push_back(std::async(std::launch::async, [this, node] { link_for(node); }));
    for (auto& c : connecting) c.get();
    // Every node must understand the mode before any starts: an older agent
    // would ignore it and train.
    if (mode != protocol::RunMode::train)
      for (const auto& node : config.nodes)
        if (!link_for(node).has_capability(protocol::kAllreduceBenchCapability))
          throw std::runtime_error("node " + node +
                                   ": its agent predates the all-reduce sweep (no \"" +
                                   protocol::kAllreduceBenchCapability +
                                   "\" capability); deploy this Flotilla's agent there");
    if (resume)
      for (const auto& node : config.nodes)
        if (!link_for(node).has_capability(protocol::kResumeRunCapability))
          throw std::runtime_error("node " + node + ": its agent predates resuming runs (no \"" +
                                   protocol::kResumeRunCapability +
                                   "\" capability); deploy this Flotilla's agent there");
    const auto& first = config.nodes.front();
    std::string master_addr = "127.0.0.1";
    int master_port = 0;
    // A SLURM job's first node serves the rendezvous, found once it runs.
    const bool slurm = config.slurm.enabled();
    if (!slurm) {
      master_port = probe(first).free_port;
      if (first != "local") {
        std::lock_guard lock(mutex_);
        master_addr = addresses_[first];
      }
      if (master_port == 0) throw std::runtime_error("node " + first + " has no free TCP port");
    }
    // What the login node was added with, unless the run says otherwise.
    const std::string sent_config = slurm ? with_login_defaults(config, config_json) : config_json;
    const int64_t ranks_a_node = slurm ? config.world_size() : config.ranks_per_node;
    int64_t first_rank = 0;
    bool failed_meanwhile = false;
    {
      std::lock_guard order(start_order_mutex_);
      starts_sent_[row.id];
    }
    for (const auto& node : config.nodes) {
      protocol::StartRun start;
      start.run = row.id;
      start.node = node;
      start.config_json = sent_config;
      for (int64_t r = 0; r < ranks_a_node; ++r) start.ranks.push_back(first_rank + r);
      first_rank += ranks_a_node;
      start.world_size = row.world_size;
      start.master_addr = master_addr;
      start.master_port = master_port;
      start.mode = mode;
      start.bench = bench;
      start.resume = resume;
      auto& link = link_for(node);  // may take seconds: outside the lock
      std::lock_guard order(start_order_mutex_);
      {
        std::lock_guard lock(mutex_);
        // A node started before failed the run meanwhile (its data, its
        // ranks): the rest are not started; that failure stops those that were.
        if (ended_.count(row.id) || failing_.count(row.id)) {
          failed_meanwhile = true;  // its stop_after_failure reads starts_sent_
          break;
        }
      }
      started.push_back(node);  // from here on it may hold ranks
      starts_sent_[row.id].insert(node);
      if (!link.send(start))
        throw std::runtime_error("node " + node + ": the agent went away before the start");
    }
    if (!failed_meanwhile) {
      std::lock_guard order(start_order_mutex_);
      starts_sent_.erase(row.id);
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard order(start_order_mutex_);
      starts_sent_.erase(row.id);
    }
    end_run(row.id, RunState::failed, e.what());
    // Nodes that started their ranks would wait out the rendezvous for the
    // rest; they are stopped now.
    if (!started.empty()) stop_after_failure(row.id, "the start", started);
  }
}

std::string Controller::with_login_defaults(const ExperimentConfig& config,
                                            const std::string& config_json) const {
  const auto login = store_.node(config.nodes.front());
  if (!login) return config_json;
  auto json = nlohmann::json::parse(config_json, nullptr, false);
  if (!json.is_object()) return config_json;
  auto& slurm = json["slurm"];
  if (!slurm.is_object()) slurm = nlohmann::json::object();
  if (config.slurm.partition.empty() && !login->slurm_partition.empty())
    slurm["partition"] = login->slurm_partition;
  if (config.slurm.account.empty() && !login->slurm_account.empty())
    slurm["account"] = login->slurm_account;
  return json.dump();
}

std::vector<std::string> Controller::hosting_problems(const ExperimentConfig& config) const {
  return placement_problems(config, store_.nodes());
}

}  // namespace flotilla::controller
