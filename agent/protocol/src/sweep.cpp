#include "flotilla/protocol/sweep.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "yaml_json.h"

namespace flotilla {
namespace {

using nlohmann::json;
using Ordered = nlohmann::ordered_json;

const char* kTopKeys = "axes, base, base_file, description, name, on_nodes, repeat, report";

// Every dotted key an experiment has, mapped to whether it is a section (a
// mapping whose keys an axis value may set together).
const std::map<std::string, bool>& config_keys() {
  static const auto keys = [] {
    std::map<std::string, bool> out;
    std::function<void(const json&, const std::string&)> walk = [&](const json& j,
                                                                    const std::string& prefix) {
      for (const auto& [key, value] : j.items()) {
        const std::string path = prefix + key;
        out[path] = value.is_object();
        if (value.is_object()) walk(value, path + ".");
      }
    };
    // A named default, not a temporary: GCC 12 otherwise warns (falsely) of
    // an uninitialised vector when the temporary is inlined here.
    static const ExperimentConfig defaults;
    walk(json::parse(to_json(defaults)), "");
    return out;
  }();
  return keys;
}

std::string flow_text(const Ordered& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    std::string out;
    for (const auto& [key, item] : v.items())
      out += (out.empty() ? "" : ", ") + key + ": " + flow_text(item);
    return "{" + out + "}";
  }
  if (v.is_array()) {
    std::string out;
    for (const auto& item : v) out += (out.empty() ? "" : ", ") + flow_text(item);
    return "[" + out + "]";
  }
  return v.dump();
}

std::string describe(const Ordered& v) {
  if (v.is_object()) return "a mapping";
  if (v.is_null()) return "nothing";
  const std::string text = v.dump();
  if (v.is_array() && text.size() > 60) return "a list of " + std::to_string(v.size());
  return text;
}

// `value` over `target`: mappings merge key by key, anything else replaces.
void merge_into(Ordered& target, const Ordered& value) {
  if (value.is_object() && target.is_object()) {
    for (const auto& [key, item] : value.items()) merge_into(target[key], item);
    return;
  }
  target = value;
}

// Sets the dotted `key` of `config` to `value` (merged, when both are mappings).
void apply(Ordered& config, const std::string& key, const Ordered& value) {
  Ordered* at = &config;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    if (!at->is_object()) *at = Ordered::object();
    Ordered& next = (*at)[key.substr(start, dot - start)];
    if (dot == std::string::npos) {
      merge_into(next, value);
      return;
    }
    at = &next;
    start = dot + 1;
  }
}

class SweepReader {
 public:
  SweepReader(std::string_view source, std::filesystem::path base_dir)
      : source_(source), base_dir_(std::move(base_dir)) {}

  SweepSpec read(const Ordered& root, std::string_view default_name) {
    SweepSpec spec;
    if (!root.is_object())
      throw ConfigError(
          {source_ + ": expected a mapping with base and axes, got " + describe(root)});
    for (const auto& [key, value] : root.items())
      if (!is_top_key(key)) fail(key, "unknown key; allowed: " + std::string(kTopKeys));
    read_name(root, default_name, spec);
    if (const auto* d = find(root, "description")) {
      if (d->is_string())
        spec.description = d->get<std::string>();
      else
        fail("description", "expected text, got " + describe(*d));
    }
    read_base(root, spec);
    if (const auto* on_nodes = find(root, "on_nodes")) read_on_nodes(*on_nodes, spec);
    if (const auto* r = find(root, "repeat")) {
      if (r->is_number_integer() && r->get<int64_t>() >= 1 && r->get<int64_t>() <= 1000)
        spec.repeat = r->get<int64_t>();
      else
        fail("repeat",
             "must be an integer from 1 to 1000 (runs of each point), got " + describe(*r));
    }
    if (const auto* axes = find(root, "axes")) {
      if (!axes->is_object())
        fail("axes", "expected a mapping of config keys to their values, got " + describe(*axes));
      else
        for (const auto& [key, value] : axes->items()) read_axis(key, value, spec);
    }
    if (const auto* report = find(root, "report")) read_report(*report, spec);
    if (!problems_.empty()) throw ConfigError(problems_);
    return spec;
  }

 private:
  static bool is_top_key(const std::string& key) {
    static const std::set<std::string> keys{"axes", "base",     "base_file", "description",
                                            "name", "on_nodes", "repeat",    "report"};
    return keys.count(key) > 0;
  }

  static const Ordered* find(const Ordered& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }

  void fail(const std::string& key, const std::string& what) {
    problems_.push_back(key + ": " + what);
  }

  void read_name(const Ordered& root, std::string_view default_name, SweepSpec& spec) {
    if (const auto* n = find(root, "name")) {
      if (!n->is_string()) return fail("name", "expected text, got " + describe(*n));
      spec.name = n->get<std::string>();
    } else {
      spec.name = default_name;
    }
    if (spec.name.empty() && !find(root, "name"))
      fail("name", "missing: a sweep needs a name");
    else if (auto problem = sweep_name_problem(spec.name); !problem.empty())
      fail("name", problem);
  }

  void read_base(const Ordered& root, SweepSpec& spec) {
    const auto* base = find(root, "base");
    const auto* file = find(root, "base_file");
    if (base && file) return fail("base_file", "give base or base_file, not both");
    if (!base && !file)
      return fail("base",
                  "missing: give the base experiment inline (a mapping of config keys), a "
                  "stored experiment's name, or base_file");
    if (base) {
      if (base->is_object())
        spec.base_json = base->dump();
      else if (base->is_string() && !base->get<std::string>().empty())
        spec.base_experiment = base->get<std::string>();
      else
        fail("base", "expected a mapping of config keys or a stored experiment's name, got " +
                         describe(*base));
      return;
    }
    if (!file->is_string() || file->get<std::string>().empty())
      return fail("base_file", "expected a file name, got " + describe(*file));
    std::filesystem::path path = file->get<std::string>();
    if (path.is_relative()) path = base_dir_ / path;
    std::ifstream in(path);
    if (!in) return fail("base_file", "cannot read " + path.string());
    std::stringstream text;
    text << in.rdbuf();
    try {
      const auto loaded = detail::parse_yaml_or_json_ordered(text.str(), path.string());
      if (!loaded.is_object())
        return fail("base_file",
                    path.string() + ": expected a mapping of config keys, got " + describe(loaded));
      spec.base_json = loaded.dump();
    } catch (const std::runtime_error& e) {
      fail("base_file", e.what());
    }
  }

  void read_on_nodes(const Ordered& v, SweepSpec& spec) {
    if (!v.is_object())
      return fail("on_nodes",
                  "expected a mapping of config keys to set when the sweep runs on named "
                  "nodes (--nodes), e.g. {ranks_per_node: 1}, got " +
                      describe(v));
    const auto& keys = config_keys();
    for (const auto& [key, value] : v.items())
      if (keys.count(key) == 0 || key == "nodes" || key == "name")
        fail("on_nodes." + key,
             key == "nodes" || key == "name"
                 ? "cannot be set here (--nodes gives the nodes, the sweep names its runs)"
                 : "not a config key (docs/config.md)");
    spec.on_nodes_json = v.dump();
  }

  void read_axis(const std::string& key, const Ordered& v, SweepSpec& spec) {
    const std::string where = "axes." + key;
    SweepAxis axis;
    axis.key = key;
    const Ordered* values = nullptr;
    const Ordered* variants = nullptr;
    if (v.is_array()) {
      values = &v;
    } else if (v.is_object()) {
      for (const auto& [k, item] : v.items())
        if (k != "values" && k != "until" && k != "variants")
          fail(where + "." + k, "unknown key; allowed: until, values, variants");
      values = find(v, "values");
      variants = find(v, "variants");
      if (values && variants) return fail(where, "give values or variants, not both");
      if (const auto* until = find(v, "until")) {
        if (until->is_string() && until->get<std::string>() == "oom")
          axis.until_oom = true;
        else
          fail(where + ".until", "the only stop is \"oom\", got " + describe(*until));
      }
    }
    if (!values && !variants)
      return fail(where,
                  "expected a list of values, {values: [...], until: oom} or {variants: "
                  "{label: {...}}}, got " +
                      describe(v));
    const size_t before = problems_.size();
    if (values)
      read_values(where, *values, axis);
    else
      read_variants(where, *variants, axis);
    if (problems_.size() == before) spec.axes.push_back(std::move(axis));
  }

  void read_values(const std::string& where, const Ordered& values, SweepAxis& axis) {
    if (!values.is_array())
      return fail(where + ".values", "expected a list, got " + describe(values));
    if (axis.key == "name")
      return fail(where, "points are named by the sweep (<sweep>#<n>); name is not an axis");
    const auto& keys = config_keys();
    const auto known = keys.find(axis.key);
    if (known == keys.end())
      return fail(where, "\"" + axis.key +
                             "\" is not a config key (docs/sweeps.md lists them); an axis of "
                             "another name needs variants");
    if (values.empty()) return fail(where, "an empty axis has no values; give at least one");
    std::set<std::string> seen;
    for (const auto& value : values) {
      if (known->second && !value.is_object())
        return fail(where, axis.key +
                               " is a section: each value must be a mapping merged into "
                               "it, got " +
                               describe(value));
      if (!seen.insert(value.dump()).second)
        return fail(where, "lists " + flow_text(value) + " twice");
      axis.values.push_back(value.dump());
    }
    if (axis.until_oom) check_ascending(where, values);
  }

  void read_variants(const std::string& where, const Ordered& variants, SweepAxis& axis) {
    if (!variants.is_object() || variants.empty())
      return fail(where + ".variants",
                  "expected a mapping of labels to config keys, e.g. {DDP: {strategy: ddp}}, "
                  "got " +
                      describe(variants));
    if (axis.until_oom)
      return fail(where, "until: oom needs strictly ascending numbers, not variants");
    for (const auto& [label, fragment] : variants.items()) {
      if (!fragment.is_object())
        return fail(where + ".variants." + label,
                    "expected a mapping of config keys, got " + describe(fragment));
      axis.values.push_back(Ordered(label).dump());
      axis.variants.push_back(fragment.dump());
    }
  }

  // report: {columns: [...], group_by: [...], baseline: {...}}. The names of
  // group_by and baseline must be axes or config keys; columns are checked by
  // the controller, which knows the compare columns.
  void read_report(const Ordered& report, SweepSpec& spec) {
    if (!report.is_object())
      return fail("report",
                  "expected a mapping with columns, group_by, baseline, seed and chart, got " +
                      describe(report));
    for (const auto& [k, item] : report.items())
      if (k != "columns" && k != "group_by" && k != "baseline" && k != "seed" && k != "chart")
        fail("report." + k, "unknown key; allowed: baseline, chart, columns, group_by, seed");
    if (const auto* chart = find(report, "chart")) read_chart(*chart, spec);
    if (const auto* seed = find(report, "seed")) {
      if (!seed->is_string() || seed->get<std::string>().empty())
        fail("report.seed",
             "expected the name of a study's seed table (text), got " + describe(*seed));
      else
        spec.report.seed = seed->get<std::string>();
    }
    // A list of names; with `headers`, an entry may be {name: Header}.
    auto names = [&](const char* key, std::vector<std::string>& out,
                     std::vector<std::string>* headers) {
      const auto* list = find(report, key);
      if (!list) return;
      const std::string where = std::string("report.") + key;
      if (!list->is_array() || list->empty())
        return fail(where, "expected a non-empty list of names, got " + describe(*list));
      for (const auto& entry : *list) {
        std::string name, header;
        if (headers && entry.is_object() && entry.size() == 1 &&
            entry.begin().value().is_string()) {
          name = entry.begin().key();
          header = entry.begin().value().get<std::string>();
        } else if (entry.is_string()) {
          name = entry.get<std::string>();
        }
        if (name.empty())
          return fail(where, std::string("expected names (text)") +
                                 (headers ? " or {name: Header}" : "") + ", got " +
                                 describe(entry));
        if (std::find(out.begin(), out.end(), name) != out.end())
          return fail(where, "lists " + name + " twice");
        out.push_back(name);
        if (headers) headers->push_back(header);
      }
    };
    names("columns", spec.report.columns, &spec.report.headers);
    names("group_by", spec.report.group_by, nullptr);
    for (const auto& key : spec.report.group_by)
      if (!names_point_value(spec, key))
        fail("report.group_by",
             "\"" + key + "\" is neither an axis of this sweep nor a config key");
    if (const auto* baseline = find(report, "baseline")) {
      if (!baseline->is_object() || baseline->empty())
        return fail("report.baseline",
                    "expected a mapping of axes or config keys to values, e.g. {ranks_per_node: "
                    "1}, got " +
                        describe(*baseline));
      for (const auto& [key, value] : baseline->items())
        if (!names_point_value(spec, key))
          fail("report.baseline." + key,
               "\"" + key + "\" is neither an axis of this sweep nor a config key");
      spec.report.baseline_json = baseline->dump();
    }
  }

  // report.chart: {x: axis, y: compare column, series: axis or [axes], title: text}.
  // y is checked by the controller, which knows the compare columns.
  void read_chart(const Ordered& chart, SweepSpec& spec) {
    auto& out = spec.report.chart;
    if (!chart.is_object())
      return fail("report.chart",
                  "expected a mapping {x: AXIS, y: COLUMN, series: AXIS, title: TEXT}, got " +
                      describe(chart));
    for (const auto& [k, item] : chart.items())
      if (k != "x" && k != "y" && k != "series" && k != "title")
        fail("report.chart." + k, "unknown key; allowed: series, title, x, y");
    const auto text = [&](const char* key, std::string& into, bool required) {
      const auto* item = find(chart, key);
      const std::string where = std::string("report.chart.") + key;
      if (!item) {
        if (required) fail(where, "missing; expected a name");
        return;
      }
      if (!item->is_string() || item->get<std::string>().empty())
        return fail(where, "expected text, got " + describe(*item));
      into = item->get<std::string>();
    };
    text("x", out.x, true);
    text("y", out.y, true);
    text("title", out.title, false);
    if (!out.x.empty() && !names_point_value(spec, out.x))
      fail("report.chart.x", "\"" + out.x + "\" is neither an axis of this sweep nor a config key");
    if (const auto* series = find(chart, "series")) {
      if (series->is_string()) {
        out.series.push_back(series->get<std::string>());
      } else if (series->is_array() && !series->empty() &&
                 std::all_of(series->begin(), series->end(),
                             [](const Ordered& e) { return e.is_string(); })) {
        for (const auto& e : *series) out.series.push_back(e.get<std::string>());
      } else {
        return fail("report.chart.series",
                    "expected an axis name or a list of them, got " + describe(*series));
      }
      for (const auto& key : out.series)
        if (!names_point_value(spec, key))
          fail("report.chart.series",
               "\"" + key + "\" is neither an axis of this sweep nor a config key");
    }
  }

  static bool names_point_value(const SweepSpec& spec, const std::string& key) {
    for (const auto& axis : spec.axes)
      if (axis.key == key) return true;
    return config_keys().count(key) > 0;
  }

  void check_ascending(const std::string& where, const Ordered& values) {
    bool ascending = true;
    for (size_t i = 0; i < values.size() && ascending; ++i)
      ascending = values[i].is_number() &&
                  (i == 0 || values[i].get<double>() > values[i - 1].get<double>());
    if (!ascending)
      fail(where, "until: oom needs strictly ascending numbers, got " + flow_text(values));
  }

  std::string source_;
  std::filesystem::path base_dir_;
  std::vector<std::string> problems_;
};

}  // namespace

std::string sweep_name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return "\"" + std::string(name) +
             "\" may hold only letters, digits, '.', '_' and '-' (it names the sweep on the "
             "command line)";
  return {};
}

SweepSpec parse_sweep(std::string_view text, std::string_view source,
                      const std::filesystem::path& base_dir, std::string_view default_name) {
  Ordered root;
  try {
    root = detail::parse_yaml_or_json_ordered(text, source);
  } catch (const std::runtime_error& e) {
    throw ConfigError({e.what()});
  }
  return SweepReader(source, base_dir).read(root, default_name);
}

SweepSpec load_sweep(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError({file.string() + ": cannot read the file"});
  std::stringstream text;
  text << in.rdbuf();
  return parse_sweep(text.str(), file.string(), file.parent_path(), file.stem().string());
}

std::string sweep_to_json(const SweepSpec& spec) {
  Ordered out;
  out["name"] = spec.name;
  if (!spec.description.empty()) out["description"] = spec.description;
  if (!spec.base_json.empty())
    out["base"] = Ordered::parse(spec.base_json);
  else
    out["base"] = spec.base_experiment;
  if (!spec.on_nodes_json.empty()) out["on_nodes"] = Ordered::parse(spec.on_nodes_json);
  Ordered axes = Ordered::object();
  for (const auto& axis : spec.axes) {
    Ordered a;
    if (axis.has_variants()) {
      Ordered variants = Ordered::object();
      for (size_t i = 0; i < axis.values.size(); ++i)
        variants[Ordered::parse(axis.values[i]).get<std::string>()] =
            Ordered::parse(axis.variants[i]);
      a["variants"] = variants;
    } else {
      a["values"] = Ordered::array();
      for (const auto& v : axis.values) a["values"].push_back(Ordered::parse(v));
      if (axis.until_oom) a["until"] = "oom";
    }
    axes[axis.key] = a;
  }
  out["axes"] = axes;
  out["repeat"] = spec.repeat;
  if (!spec.report.empty()) {
    Ordered report = Ordered::object();
    if (!spec.report.columns.empty()) {
      report["columns"] = Ordered::array();
      for (size_t i = 0; i < spec.report.columns.size(); ++i) {
        const auto& header = spec.report.headers[i];
        if (header.empty())
          report["columns"].push_back(spec.report.columns[i]);
        else {
          Ordered entry = Ordered::object();
          entry[spec.report.columns[i]] = header;
          report["columns"].push_back(entry);
        }
      }
    }
    if (!spec.report.group_by.empty()) report["group_by"] = spec.report.group_by;
    if (!spec.report.baseline_json.empty())
      report["baseline"] = Ordered::parse(spec.report.baseline_json);
    if (!spec.report.seed.empty()) report["seed"] = spec.report.seed;
    if (!spec.report.chart.empty()) {
      const auto& c = spec.report.chart;
      Ordered chart = Ordered::object();
      chart["x"] = c.x;
      chart["y"] = c.y;
      if (!c.series.empty()) chart["series"] = c.series;
      if (!c.title.empty()) chart["title"] = c.title;
      report["chart"] = chart;
    }
    out["report"] = report;
  }
  return out.dump();
}

std::string point_value_json(const SweepSpec& spec, const std::string& values_json,
                             const std::string& config_json, const std::string& key) {
  for (const auto& axis : spec.axes)
    if (axis.key == key) {
      const auto values = Ordered::parse(values_json, nullptr, false);
      return values.is_object() && values.contains(key) ? values[key].dump() : "null";
    }
  const auto config = Ordered::parse(config_json, nullptr, false);
  const Ordered* at = &config;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    if (!at->is_object()) return "null";
    const auto it = at->find(key.substr(start, dot - start));
    if (it == at->end()) return "null";
    at = &*it;
    if (dot == std::string::npos) return at->dump();
    start = dot + 1;
  }
}

int64_t sweep_size(const SweepSpec& spec) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t size = spec.repeat;
  for (const auto& axis : spec.axes) {
    const auto n = static_cast<int64_t>(axis.values.size());
    if (n > 0 && size > kMax / n) return kMax;
    size *= n;
  }
  return size;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& spec, const std::vector<std::string>& nodes) {
  if (spec.base_json.empty())
    throw ConfigError({"base: the stored experiment \"" + spec.base_experiment +
                       "\" has not been resolved into the sweep"});
  Ordered base = Ordered::parse(spec.base_json);
  if (!nodes.empty()) {
    base["nodes"] = nodes;
    if (!spec.on_nodes_json.empty()) merge_into(base, Ordered::parse(spec.on_nodes_json));
  }
  std::vector<std::vector<Ordered>> values(spec.axes.size());
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    const auto& axis = spec.axes[a];
    for (size_t v = 0; v < axis.values.size(); ++v)
      values[a].push_back(Ordered::parse(axis.has_variants() ? axis.variants[v] : axis.values[v]));
  }
  std::vector<SweepPoint> points;
  std::vector<int64_t> coords(spec.axes.size(), 0);
  for (bool more = true; more;) {
    for (int64_t repeat = 0; repeat < spec.repeat; ++repeat) {
      SweepPoint point;
      point.index = static_cast<int64_t>(points.size());
      point.coords = coords;
      point.repeat = repeat;
      Ordered config = base;
      Ordered shown = Ordered::object();
      for (size_t a = 0; a < spec.axes.size(); ++a) {
        const auto& axis = spec.axes[a];
        const auto& value = values[a][coords[a]];
        if (axis.has_variants())
          merge_into(config, value);
        else
          apply(config, axis.key, value);
        shown[axis.key] = Ordered::parse(axis.values[coords[a]]);
      }
      point.values_json = shown.dump();
      const std::string name = spec.name + "#" + std::to_string(point.index + 1);
      config["name"] = name;
      if (repeat > 0) {
        const auto seed = config.find("seed");
        const int64_t first = seed == config.end()        ? 0
                              : seed->is_number_integer() ? seed->get<int64_t>()
                                                          : -1;
        if (first >= 0) config["seed"] = first + repeat;
      }
      try {
        point.config_json = to_json(parse_experiment(config.dump(), name), -1);
      } catch (const ConfigError& e) {
        point.problems = e.problems();
      }
      points.push_back(std::move(point));
    }
    // The next combination, the last axis fastest.
    more = false;
    for (size_t a = spec.axes.size(); a-- > 0;) {
      if (++coords[a] < static_cast<int64_t>(values[a].size())) {
        more = true;
        break;
      }
      coords[a] = 0;
    }
  }
  return points;
}

std::vector<DroppedPoint> dropped_after_oom(const std::vector<SweepAxis>& axes,
                                            const std::vector<std::vector<int64_t>>& coords,
                                            int64_t oom_point) {
  std::vector<DroppedPoint> dropped;
  std::set<int64_t> seen;
  const auto& at = coords.at(static_cast<size_t>(oom_point));
  for (size_t a = 0; a < axes.size(); ++a) {
    if (!axes[a].until_oom) continue;
    const std::string reason =
        "oom at " + axes[a].key + " " + value_text(axes[a].values.at(static_cast<size_t>(at[a])));
    for (size_t p = 0; p < coords.size(); ++p) {
      const auto& other = coords[p];
      bool same_elsewhere = other[a] > at[a];
      for (size_t b = 0; b < axes.size() && same_elsewhere; ++b)
        same_elsewhere = b == a || other[b] == at[b];
      if (same_elsewhere && seen.insert(static_cast<int64_t>(p)).second)
        dropped.push_back({static_cast<int64_t>(p), reason});
    }
  }
  std::sort(dropped.begin(), dropped.end(),
            [](const auto& x, const auto& y) { return x.index < y.index; });
  return dropped;
}

std::string value_text(std::string_view value_json) {
  const auto v = Ordered::parse(value_json, nullptr, false);
  return v.is_discarded() ? std::string(value_json) : flow_text(v);
}

}  // namespace flotilla
