// Starting runs: a new run of a config, the all-reduce sweep of `nodes
// bench`, and a new attempt of an ended run (resume); each sends its StartRun
// to every node of the run, and a failure on the way ends the run failed.
#include <future>
#include <nlohmann/json.hpp>

#include "agent_link.h"
#include "event_loop.h"
#include "flotilla/controller/controller.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/node_profiles.h"
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

std::string Controller::start_block_profile(const ExperimentConfig& config) {
  if (config.nodes.size() != 1)
    throw ConfigError(
        {"nodes: a block profile runs on one node, got " + std::to_string(config.nodes.size())});
  return start(config, std::nullopt, protocol::RunMode::block_profile, {});
}

std::string Controller::start(const ExperimentConfig& config, std::optional<int64_t> experiment_id,
                              protocol::RunMode mode, const protocol::BenchOptions& bench,
                              const std::string& run_id) {
  refuse_on_loop("start_run");
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
  // Its rows are written on the loop, as every state of it will be.
  loop_->call([&] {
    store_.create_run(row);
    if (mode == protocol::RunMode::allreduce_bench)
      add_link_bench(store_,
                     {row.id, node_set_key(config.nodes), config.ranks_per_node,
                      std::string(name_of(config.device)), row.created_ms, RunState::created});
    if (mode == protocol::RunMode::block_profile)
      add_node_profile(store_, row.id, config.nodes.front(), row.created_ms);
    if (auto* observer = observer_.load()) observer->state_changed(row.id, RunState::created, "");
    move_run(row.id, RunState::starting);
    followed_.insert(row.id);
  });
  start_on_nodes(row.id, config, row.config_json, mode, bench, /*resume=*/false);
  return row.id;
}

void Controller::resume_run(const std::string& run) {
  refuse_on_loop("resume_run");
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
  loop_->call([&] {
    if (!store_.reopen(run, reason))
      throw std::runtime_error("run " + run + " changed state meanwhile and was not resumed");
    if (auto* observer = observer_.load()) observer->state_changed(run, RunState::starting, reason);
    {
      std::lock_guard lock(ended_mutex_);
      ended_.erase(run);
    }
    node_ends_.erase(run);
    killing_.erase(run);
    failing_.erase(run);
    followed_.insert(run);
  });
  start_on_nodes(run, config, row->config_json, protocol::RunMode::train, {}, /*resume=*/true);
}

void Controller::start_on_nodes(const std::string& run, const ExperimentConfig& config,
                                const std::string& config_json, protocol::RunMode mode,
                                const protocol::BenchOptions& bench, bool resume) {
  // Until its starts go out, a failure of the run stops no node.
  loop_->call([&] { starts_sent_[run]; });
  try {
    // Rank 0's node serves the rendezvous: this machine for local runs, else
    // the first node at its address, on a port its agent finds free.
    // Connecting, deploying and starting agents takes seconds a node: all
    // nodes at once, so that N nodes cost about one node's time. On this
    // thread, not the loop, which goes on with the other runs meanwhile.
    std::vector<std::future<std::shared_ptr<AgentLink>>> connecting;
    for (const auto& node : config.nodes)
      connecting.push_back(std::async(std::launch::async, [this, node] { return link_for(node); }));
    std::vector<std::shared_ptr<AgentLink>> links;
    for (auto& c : connecting) links.push_back(c.get());
    // Every node must understand the mode before any starts: an older agent
    // would ignore it and train.
    for (const auto& link : links) {
      if (mode == protocol::RunMode::allreduce_bench &&
          !link->has_capability(protocol::kAllreduceBenchCapability))
        throw std::runtime_error("node " + link->node() +
                                 ": its agent predates the all-reduce sweep (no \"" +
                                 protocol::kAllreduceBenchCapability +
                                 "\" capability); deploy this Flotilla's agent there");
      if (mode == protocol::RunMode::block_profile &&
          !link->has_capability(protocol::kBlockProfileCapability))
        throw std::runtime_error("node " + link->node() +
                                 ": its agent predates block profiles (no \"" +
                                 protocol::kBlockProfileCapability +
                                 "\" capability); deploy this Flotilla's agent there");
      if (resume && !link->has_capability(protocol::kResumeRunCapability))
        throw std::runtime_error(
            "node " + link->node() + ": its agent predates resuming runs (no \"" +
            protocol::kResumeRunCapability + "\" capability); deploy this Flotilla's agent there");
    }
    const auto& first = config.nodes.front();
    std::string master_addr = "127.0.0.1";
    int master_port = 0;
    // A SLURM job's first node serves the rendezvous, found once it runs.
    const bool slurm = config.slurm.enabled();
    if (!slurm) {
      master_port = probe(first).free_port;
      if (first != "local") {
        std::lock_guard lock(links_mutex_);
        master_addr = addresses_[first];
      }
      if (master_port == 0) throw std::runtime_error("node " + first + " has no free TCP port");
    }
    // What the login node was added with, unless the run says otherwise.
    const std::string sent_config = slurm ? with_login_defaults(config, config_json) : config_json;
    const int64_t ranks_a_node = slurm ? config.world_size() : config.ranks_per_node;
    std::vector<protocol::StartRun> starts;
    int64_t first_rank = 0;
    for (const auto& node : config.nodes) {
      protocol::StartRun start;
      start.run = run;
      start.node = node;
      start.config_json = sent_config;
      for (int64_t r = 0; r < ranks_a_node; ++r) start.ranks.push_back(first_rank + r);
      first_rank += ranks_a_node;
      start.world_size = config.world_size();
      start.master_addr = master_addr;
      start.master_port = master_port;
      start.mode = mode;
      start.bench = bench;
      start.resume = resume;
      starts.push_back(std::move(start));
    }
    // All starts in one loop task: a node's failure of the run (its data,
    // its ranks) is handled before them, and then none is sent, or after
    // them, and then it stops each node that had one (over the same link,
    // so that the stop arrives second).
    loop_->call([&] {
      try {
        for (size_t i = 0; i < starts.size(); ++i) {
          if (ended_.count(run) || failing_.count(run)) break;
          starts_sent_[run].insert(starts[i].node);  // from here on it may hold ranks
          if (!links[i]->send(starts[i]))
            throw std::runtime_error("node " + starts[i].node +
                                     ": the agent went away before the start");
        }
      } catch (const std::exception& e) {
        // Nodes that started their ranks would wait out the rendezvous for
        // the rest; they are stopped now (queued before the end is stored,
        // which may let the caller close this controller).
        const auto started = starts_sent_[run];
        stop_after_failure(run, "the start", {started.begin(), started.end()});
        end_run(run, RunState::failed, e.what());
      }
      starts_sent_.erase(run);
    });
  } catch (const std::exception& e) {
    const std::string why = e.what();
    loop_->call([&] {
      starts_sent_.erase(run);
      end_run(run, RunState::failed, why);
    });
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
