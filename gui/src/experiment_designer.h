#pragma once
// The experiment designer: the grouped form of every config key, a YAML tab
// kept in step with it both ways, the list of what is wrong (each message
// takes you to its field), and the plan preview. The document it edits is
// the experiment as a person wrote it, valid or not: keys the form has no
// field for and values the validator refuses are kept, never dropped.
// Validation is the CLI's (read_experiment, then the controller's placement
// check against the stored nodes), run on every edit.

#include <QStringList>
#include <QVector>
#include <QWidget>

#include <nlohmann/json.hpp>
#include <optional>

#include "controller_worker.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/experiment_config.h"

class QLabel;
class QListWidget;
class QPlainTextEdit;
class QScrollArea;
class QTabWidget;

namespace flotilla::gui {

class DesignerForm;
class PlanPreview;

class ExperimentDesigner : public QWidget {
  Q_OBJECT
 public:
  explicit ExperimentDesigner(QWidget* parent = nullptr);

  // Shows a stored experiment (its JSON document).
  void setConfigJson(const QString& config_json);
  // Shows YAML or JSON text (a preset, a file). When it does not parse, the
  // YAML tab shows the text and the error, and this returns false.
  bool setConfigText(const QString& text);
  // The document as JSON, valid or not; what Save stores and Run starts.
  QString configJson() const;
  QStringList problems() const { return problems_; }
  QString name() const;
  // The experiment when it has no problem.
  const std::optional<ExperimentConfig>& config() const { return config_; }
  // The stored nodes: the node picker lists them with their GPUs and the
  // placement check refuses what they cannot run.
  void setNodes(const QVector<NodeItem>& nodes);
  // The stored link benches by node set, for the plan preview's prediction.
  void setLinkBenches(const QHash<QString, QString>& benches);
  // The stored block profiles by node, for the plan preview's prediction.
  void setNodeProfiles(const QHash<QString, QString>& profiles);

  // Shows the field a message is about, focused and marked (the YAML tab at
  // the error's line for a syntax error); false when nothing shows it.
  bool focusProblem(const QString& message);
  // The form at `key`'s field, scrolled to it, focused and marked.
  bool focusKey(const std::string& key);

  DesignerForm* form() const { return form_; }
  PlanPreview* planPreview() const { return plan_; }
  QPlainTextEdit* yamlEdit() const { return yaml_; }
  QListWidget* problemList() const { return problem_list_; }
  QTabWidget* tabs() const { return tabs_; }

 signals:
  // The experiment changed (an edit, a load), and with it problems().
  void edited();

 private:
  void setDocument(nlohmann::json document, bool from_yaml);
  void fieldEdited(const std::string& key, const std::optional<nlohmann::json>& value);
  void yamlEdited();
  void revalidate(bool from_yaml);
  void showProblems();
  void applyVitPreset(const std::string& preset);
  void expandVitPreset(nlohmann::json& document) const;

  nlohmann::json document_ = nlohmann::json::object();
  std::optional<ExperimentConfig> config_;
  QStringList problems_;
  QString yaml_error_;
  bool nodes_known_ = false;
  std::vector<controller::NodeRow> nodes_;
  DesignerForm* form_;
  QScrollArea* scroll_;
  QPlainTextEdit* yaml_;
  QLabel* yaml_status_;
  QLabel* form_banner_;
  QTabWidget* tabs_;
  QLabel* status_;
  QListWidget* problem_list_;
  PlanPreview* plan_;
};

}  // namespace flotilla::gui
