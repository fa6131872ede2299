#include "experiment_designer.h"

#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTabWidget>
#include <QTextBlock>
#include <QVBoxLayout>

#include <algorithm>

#include "designer_form.h"
#include "flotilla/controller/nodes.h"
#include "flotilla/protocol/config_keys.h"
#include "flotilla/protocol/numbers.h"
#include "plan_preview.h"

namespace flotilla::gui {
namespace {

using nlohmann::json;

// Sets (or, given nothing, removes) `key` ("optimizer.lr") in `document`.
void set_key(json& document, const std::string& key, const std::optional<json>& value) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    if (value)
      document[key] = *value;
    else
      document.erase(key);
    return;
  }
  const std::string top = key.substr(0, dot);
  if (!document.contains(top) || !document[top].is_object()) {
    if (!value) return;
    document[top] = json::object();
  }
  set_key(document[top], key.substr(dot + 1), value);
}

QString gib(int64_t bytes) {
  return QString::fromStdString(format_fixed(double(bytes) / (1024.0 * 1024 * 1024), 1)) + " GiB";
}

// "2 GPUs: NVIDIA A100 40.0 GiB", "no GPU", "not probed yet".
QString gpus_of(const QString& probe_json) {
  const auto probe = controller::parse_probe(probe_json.toStdString());
  if (!probe) return "not probed yet";
  if (probe->gpus.empty()) return "no GPU, " + QString::number(probe->cpus) + " CPUs";
  QStringList names;
  for (const auto& g : probe->gpus)
    names << QString::fromStdString(g.name) + " " + gib(g.memory_bytes);
  names.removeDuplicates();
  const auto n = probe->gpus.size();
  return QString::number(n) + (n == 1 ? " GPU: " : " GPUs: ") + names.join(", ");
}

}  // namespace

ExperimentDesigner::ExperimentDesigner(QWidget* parent) : QWidget(parent) {
  form_ = new DesignerForm;
  scroll_ = new QScrollArea;
  scroll_->setObjectName("formScroll");
  scroll_->setWidgetResizable(true);
  scroll_->setWidget(form_);
  form_banner_ = new QLabel;
  form_banner_->setObjectName("formBanner");
  form_banner_->setWordWrap(true);
  form_banner_->setStyleSheet("background: #fff3cd; color: #5c4400; padding: 4px;");
  form_banner_->hide();
  auto* form_page = new QWidget;
  auto* form_layout = new QVBoxLayout(form_page);
  form_layout->setContentsMargins(0, 0, 0, 0);
  form_layout->addWidget(form_banner_);
  form_layout->addWidget(scroll_, 1);

  yaml_ = new QPlainTextEdit;
  yaml_->setObjectName("yamlEdit");
  QFont mono("monospace");
  mono.setStyleHint(QFont::TypeWriter);
  yaml_->setFont(mono);
  yaml_->setLineWrapMode(QPlainTextEdit::NoWrap);
  yaml_status_ = new QLabel;
  yaml_status_->setObjectName("yamlStatus");
  yaml_status_->setWordWrap(true);
  auto* yaml_page = new QWidget;
  auto* yaml_layout = new QVBoxLayout(yaml_page);
  yaml_layout->setContentsMargins(0, 0, 0, 0);
  yaml_layout->addWidget(yaml_, 1);
  yaml_layout->addWidget(yaml_status_);

  tabs_ = new QTabWidget;
  tabs_->setObjectName("designerTabs");
  tabs_->addTab(form_page, "Form");
  tabs_->addTab(yaml_page, "YAML");

  status_ = new QLabel;
  status_->setObjectName("designerStatus");
  status_->setWordWrap(true);
  problem_list_ = new QListWidget;
  problem_list_->setObjectName("problemList");
  problem_list_->setMaximumHeight(120);
  problem_list_->setToolTip("Click a problem to go to its field");
  QPalette red = problem_list_->palette();
  red.setColor(QPalette::Text, QColor("#c62828"));
  problem_list_->setPalette(red);

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(tabs_, 1);
  left_layout->addWidget(status_);
  left_layout->addWidget(problem_list_);

  plan_ = new PlanPreview;
  plan_->setObjectName("planPreview");
  auto* splitter = new QSplitter;
  splitter->setObjectName("designerSplitter");
  splitter->addWidget(left);
  splitter->addWidget(plan_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(splitter);

  connect(form_, &DesignerForm::fieldEdited, this, &ExperimentDesigner::fieldEdited);
  connect(yaml_, &QPlainTextEdit::textChanged, this, &ExperimentDesigner::yamlEdited);
  connect(problem_list_, &QListWidget::itemClicked, this,
          [this](QListWidgetItem* item) { focusProblem(item->text()); });
  connect(problem_list_, &QListWidget::itemActivated, this,
          [this](QListWidgetItem* item) { focusProblem(item->text()); });

  setConfigJson(QString::fromStdString(to_json(ExperimentConfig())));
}

void ExperimentDesigner::setConfigJson(const QString& config_json) {
  auto document = json::parse(config_json.toStdString(), nullptr, false);
  if (!document.is_object()) {
    // A stored experiment is always a mapping; say so rather than show defaults as if they were it.
    yaml_error_ = "the stored experiment is not a JSON mapping";
    document = json::object();
  } else {
    yaml_error_.clear();
  }
  setDocument(std::move(document), false);
}

bool ExperimentDesigner::setConfigText(const QString& text) {
  yaml_->setPlainText(text);  // parsed (or refused) by yamlEdited, as if typed
  return yaml_error_.isEmpty();
}

QString ExperimentDesigner::configJson() const {
  return QString::fromStdString(document_.dump(2));
}

QString ExperimentDesigner::name() const {
  const auto it = document_.find("name");
  return it != document_.end() && it->is_string() ? QString::fromStdString(it->get<std::string>())
                                                  : QString();
}

void ExperimentDesigner::setLinkBenches(const QHash<QString, QString>& benches) {
  plan_->setLinkBenches(benches);
}

void ExperimentDesigner::setNodeProfiles(const QHash<QString, QString>& profiles) {
  plan_->setNodeProfiles(profiles);
}

void ExperimentDesigner::setNodes(const QVector<NodeItem>& nodes) {
  std::vector<controller::NodeRow> rows;
  QVector<NodeChoice> choices;
  // The window's own machine is a node without a row in the store.
  QVector<NodeItem> all = nodes;
  if (std::none_of(all.begin(), all.end(), [](const NodeItem& n) { return n.name == "local"; })) {
    NodeItem local;
    local.name = "local";
    all.prepend(local);
  }
  for (const auto& n : all) {
    controller::NodeRow row;
    row.name = n.name.toStdString();
    row.probe_json = n.probe_json.toStdString();
    rows.push_back(row);
    choices.push_back({n.name, n.name == "local" && n.probe_json.isEmpty()
                                   ? QString("this machine")
                                   : gpus_of(n.probe_json)});
  }
  form_->nodesEditor()->setChoices(choices);
  const bool changed = !nodes_known_ || rows.size() != nodes_.size() ||
                       !std::equal(rows.begin(), rows.end(), nodes_.begin(), [](auto& a, auto& b) {
                         return a.name == b.name && a.probe_json == b.probe_json;
                       });
  nodes_known_ = true;
  nodes_ = std::move(rows);
  if (changed && yaml_error_.isEmpty()) revalidate(true);
}

void ExperimentDesigner::setDocument(json document, bool from_yaml) {
  expandVitPreset(document);
  document_ = std::move(document);
  form_->load(document_);
  revalidate(from_yaml);
}

void ExperimentDesigner::fieldEdited(const std::string& key, const std::optional<json>& value) {
  if (key == "vit.preset") {
    if (value && value->is_string()) applyVitPreset(value->get<std::string>());
    return;
  }
  set_key(document_, key, value);
  revalidate(false);
}

void ExperimentDesigner::yamlEdited() {
  try {
    auto document =
        json::parse(config_document_from_text(yaml_->toPlainText().toStdString(), "YAML tab"));
    yaml_error_.clear();
    setDocument(std::move(document), true);
  } catch (const ConfigError& e) {
    // The text stays as typed; the form waits for it to parse.
    yaml_error_ = QString::fromStdString(e.problems().front());
    config_.reset();
    problems_ = QStringList{yaml_error_};
    showProblems();
    plan_->request(std::nullopt);
    emit edited();
  }
}

void ExperimentDesigner::revalidate(bool from_yaml) {
  std::vector<std::string> lines;
  const auto config = read_experiment(document_.dump(), "the experiment", lines);
  // Until the worker has listed the nodes, only what needs no node list is checked.
  std::vector<controller::NodeRow> nodes = nodes_;
  if (!nodes_known_)
    for (const auto& name : config.nodes) nodes.emplace_back().name = name;
  for (auto& p : controller::placement_problems(config, nodes)) lines.push_back(std::move(p));
  problems_.clear();
  if (!yaml_error_.isEmpty()) problems_ << yaml_error_;
  for (const auto& line : lines) problems_ << QString::fromStdString(line);
  config_ = problems_.isEmpty() ? std::optional<ExperimentConfig>(config) : std::nullopt;

  // Which preset the ViT sizes are, if any: the preset field shows it.
  if (auto* preset = form_->editorFor("vit.preset")) {
    std::vector<std::string> ignored;
    const auto b16 = read_experiment(R"({"model": "vit", "vit": {"preset": "b16"}})", "", ignored);
    const VitConfig small;
    auto same = [](const VitConfig& a, const VitConfig& b) {
      return a.patch == b.patch && a.dim == b.dim && a.depth == b.depth && a.heads == b.heads &&
             a.mlp_dim == b.mlp_dim;
    };
    preset->load(json(same(config.vit, small)     ? "small"
                      : same(config.vit, b16.vit) ? "b16"
                                                  : "custom"));
  }
  form_->showState(problems_, config);
  showProblems();
  if (!from_yaml) {
    const QSignalBlocker block(yaml_);
    yaml_->setPlainText(QString::fromStdString(config_document_to_yaml(document_.dump())));
  }
  plan_->request(config_);
  emit edited();
}

void ExperimentDesigner::showProblems() {
  const bool broken = !yaml_error_.isEmpty();
  form_->setEnabled(!broken);
  form_banner_->setVisible(broken);
  form_banner_->setText("The YAML tab does not parse, so the form waits for it: " + yaml_error_);
  yaml_status_->setText(broken ? yaml_error_ : "In step with the form.");
  yaml_status_->setStyleSheet(broken ? "color: #c62828;" : "color: #2e7d32;");
  problem_list_->clear();
  for (const auto& p : problems_) {
    auto* item = new QListWidgetItem(p);
    item->setToolTip(p);
    problem_list_->addItem(item);
  }
  problem_list_->setVisible(!problems_.isEmpty());
  if (problems_.isEmpty()) {
    status_->setStyleSheet("color: #2e7d32;");
    status_->setText("Ready to run.");
  } else {
    status_->setStyleSheet("color: #c62828;");
    status_->setText(problems_.size() == 1 ? "1 problem; click it to go to its field:"
                                           : QString::number(problems_.size()) +
                                                 " problems; click one to go to its field:");
  }
}

bool ExperimentDesigner::focusProblem(const QString& message) {
  const std::string key = key_of_message(message.toStdString());
  if (!key.empty() && yaml_error_.isEmpty()) return focusKey(key);
  // A syntax error: the YAML tab, at the line it names.
  tabs_->setCurrentIndex(1);
  yaml_->setFocus(Qt::OtherFocusReason);
  const auto match = QRegularExpression("line (\\d+), column (\\d+)").match(message);
  if (match.hasMatch()) {
    const QTextBlock block = yaml_->document()->findBlockByNumber(match.captured(1).toInt() - 1);
    if (block.isValid()) {
      QTextCursor cursor(block);
      cursor.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor,
                          std::min(match.captured(2).toInt() - 1, block.length() - 1));
      yaml_->setTextCursor(cursor);
    }
  }
  return true;
}

bool ExperimentDesigner::focusKey(const std::string& key) {
  FieldEditor* editor = form_->editorFor(key);
  if (!editor) return false;
  tabs_->setCurrentIndex(0);
  form_->focusKey(key);
  scroll_->ensureWidgetVisible(editor->widget(), 20, 40);
  return true;
}

void ExperimentDesigner::applyVitPreset(const std::string& preset) {
  if (preset != "small" && preset != "b16") return;  // "custom": the sizes as they are
  json sized = {{"model", "vit"}, {"vit", {{"preset", preset}}}};
  expandVitPreset(sized);
  set_key(document_, "vit", sized["vit"]);
  form_->load(document_);
  revalidate(false);
}

void ExperimentDesigner::expandVitPreset(json& document) const {
  // A preset only fills in sizes (the parser's rule): write the sizes it
  // gives, the keys beside it still overriding them, so that each size has
  // its field. An unknown preset stays for the validator to name.
  if (!document.contains("vit") || !document["vit"].is_object()) return;
  json& vit = document["vit"];
  if (!vit.contains("preset") || !vit["preset"].is_string()) return;
  const std::string preset = vit["preset"];
  if (preset != "small" && preset != "b16") return;
  std::vector<std::string> ignored;
  const json only = {{"model", "vit"}, {"vit", {{"preset", preset}}}};
  const auto sizes = read_experiment(only.dump(), "", ignored).vit;
  const json given = vit;
  vit = {{"patch", sizes.patch},
         {"dim", sizes.dim},
         {"depth", sizes.depth},
         {"heads", sizes.heads},
         {"mlp_dim", sizes.mlp_dim}};
  for (const auto& [k, v] : given.items())
    if (k != "preset") vit[k] = v;
}

}  // namespace flotilla::gui
