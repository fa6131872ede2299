// The experiment designer driven through its own widgets, offscreen: every
// key of the key table goes form -> YAML -> form unchanged on every preset,
// and bad values are named at their field (click: focus and mark) while Run
// stays disabled.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <nlohmann/json.hpp>

#include "designer_form.h"
#include "experiment_designer.h"
#include "flotilla/protocol/config_keys.h"
#include "form_keys.h"
#include "main_window.h"
#include "plan_preview.h"
#include "screenshot.h"
#include "temp_dir.h"

// A preset's path as ctest lists it beside the test's name, not QString's
// bytes. QString lives in the global namespace, where gtest looks for it.
void PrintTo(const QString& text, std::ostream* out) {
  *out << text.toStdString();
}

namespace flotilla::gui {
namespace {

using nlohmann::json;

QString read_text(const QString& file) {
  QFile f(file);
  EXPECT_TRUE(f.open(QIODevice::ReadOnly)) << file.toStdString();
  return QString::fromUtf8(f.readAll());
}

QStringList preset_files() {
  QStringList files;
  for (const auto& name : QDir(FLOTILLA_PRESETS_DIR).entryList({"*.yaml"}, QDir::Files))
    files << QString(FLOTILLA_PRESETS_DIR) + "/" + name;
  return files;
}

// Changes `key`'s field as a person would, to a value no preset holds.
void edit_as_a_person(FieldEditor& editor) {
  const ConfigKey& key = editor.key();
  QWidget* input = editor.input();
  switch (key.type) {
    case ConfigKeyType::choice: {
      auto* combo = qobject_cast<QComboBox*>(input);
      ASSERT_TRUE(combo) << key.key;
      combo->setCurrentIndex((combo->currentIndex() + 1) % int(key.choices.size()));
      return;
    }
    case ConfigKeyType::boolean: {
      auto* box = qobject_cast<QCheckBox*>(input);
      ASSERT_TRUE(box) << key.key;
      box->toggle();
      return;
    }
    case ConfigKeyType::mapping_list: {
      auto* add = editor.widget()->findChild<QPushButton*>(
          "key:" + QString::fromStdString(key.key) + ":add");
      ASSERT_TRUE(add) << key.key;
      QTest::mouseClick(add, Qt::LeftButton);
      auto* table = qobject_cast<QTableWidget*>(input);
      table->item(table->rowCount() - 1, 0)->setText("37");
      return;
    }
    case ConfigKeyType::text:
    case ConfigKeyType::integer:
    case ConfigKeyType::unsigned_integer:
    case ConfigKeyType::number:
    case ConfigKeyType::integer_list:
    case ConfigKeyType::name_list:
      break;
  }
  auto* edit = qobject_cast<QLineEdit*>(input);
  ASSERT_TRUE(edit) << key.key;
  const std::map<ConfigKeyType, QString> typed = {
      {ConfigKeyType::text, "edited-text"},    {ConfigKeyType::integer, "37"},
      {ConfigKeyType::unsigned_integer, "41"}, {ConfigKeyType::number, "0.375"},
      {ConfigKeyType::integer_list, "2, 3"},   {ConfigKeyType::name_list, "n1, n2"},
  };
  edit->setText(typed.at(key.type));
}

class PresetRoundTrip : public ::testing::TestWithParam<QString> {};

TEST_P(PresetRoundTrip, EveryKeyGoesFormToYamlToFormUnchanged) {
  const QString preset = read_text(GetParam());
  ExperimentDesigner form_side, yaml_side;
  int keys = 0;
  for (const auto& key : config_keys()) {
    if (key.is_list_field()) continue;  // edited in its list's table
    SCOPED_TRACE(key.key);
    ASSERT_TRUE(form_side.setConfigText(preset));
    FieldEditor* editor = form_side.form()->editorFor(key.key);
    ASSERT_TRUE(editor) << "no field for " << key.key;
    const auto before = editor->value();
    edit_as_a_person(*editor);
    const auto edited = editor->value();
    ASSERT_NE(before, edited) << "the edit changed nothing";

    const QString yaml = form_side.yamlEdit()->toPlainText();
    ASSERT_TRUE(yaml_side.setConfigText(yaml)) << yaml.toStdString();
    EXPECT_EQ(yaml_side.form()->editorFor(key.key)->value(), edited) << yaml.toStdString();
    EXPECT_EQ(json::parse(yaml_side.configJson().toStdString()),
              json::parse(form_side.configJson().toStdString()));
    ++keys;
  }
  EXPECT_GT(keys, 40);
}

std::string preset_name(const ::testing::TestParamInfo<QString>& info) {
  QString name = QFileInfo(info.param).completeBaseName();
  name.replace(QRegularExpression("[^A-Za-z0-9]"), "_");
  return name.toStdString();
}

INSTANTIATE_TEST_SUITE_P(Presets, PresetRoundTrip, ::testing::ValuesIn(preset_files()),
                         preset_name);

TEST(Designer, AYamlSyntaxErrorIsShownAndKeptAndTheFormWaits) {
  ExperimentDesigner designer;
  designer.yamlEdit()->setPlainText("name: broken\noptimizer: {lr: [\n");
  ASSERT_FALSE(designer.problems().isEmpty());
  EXPECT_TRUE(designer.problems().front().contains("line"))
      << designer.problems().front().toStdString();
  EXPECT_FALSE(designer.form()->isEnabled());
  EXPECT_EQ(designer.yamlEdit()->toPlainText(), "name: broken\noptimizer: {lr: [\n");
  // Fixed in the YAML tab: the form follows.
  designer.yamlEdit()->setPlainText("name: fixed\noptimizer: {lr: 0.25}\n");
  EXPECT_TRUE(designer.form()->isEnabled());
  EXPECT_EQ(designer.form()->editorFor("optimizer.lr")->value(), json(0.25));
  EXPECT_EQ(designer.name(), "fixed");
}

TEST(Designer, AGroupShowsOnlyWhenTheStrategyMakesItApply) {
  ExperimentDesigner designer;
  designer.show();
  ASSERT_TRUE(designer.setConfigText("name: g\nstrategy: single\n"));
  EXPECT_FALSE(designer.form()->rowShown("chunks"));
  EXPECT_FALSE(designer.form()->rowShown("compression.method"));
  ASSERT_TRUE(designer.setConfigText("name: g\nstrategy: pipeline\nnodes: [local]\n"));
  EXPECT_TRUE(designer.form()->rowShown("chunks"));
  EXPECT_TRUE(designer.form()->rowShown("compression.method"));
}

// Checkpoints are asked for in the Experiment group: how often, and then how
// many are kept and where, which apply only once saving is on.
TEST(Designer, SavingShowsHowManyCheckpointsAreKeptOnceItIsOn) {
  ExperimentDesigner designer;
  designer.resize(900, 1000);
  designer.show();
  ASSERT_TRUE(designer.setConfigText("name: s\n"));
  EXPECT_TRUE(designer.form()->rowShown("save.every_steps"));
  EXPECT_FALSE(designer.form()->rowShown("save.keep"));
  set_form_keys(designer, {{"save.every_steps", "100"}});
  EXPECT_TRUE(designer.form()->rowShown("save.keep"));
  EXPECT_TRUE(designer.form()->rowShown("save.dir"));
  EXPECT_TRUE(designer.yamlEdit()->toPlainText().contains("every_steps: 100"))
      << designer.yamlEdit()->toPlainText().toStdString();
  save_screenshot(designer, "designer-save-keys");
}

// One bad value typed into one field, and the words the validator says about it.
struct BadValue {
  const char* label;
  const char* base;  // YAML the designer starts from
  const char* key;
  const char* typed;
};
// Its label, for the test's name in ctest (not the struct's bytes).
void PrintTo(const BadValue& bad, std::ostream* out) {
  *out << bad.label;
}

const char* const kBase = "name: bad-values\nmax_steps: 5\nthreads: 1\ndataset: synthetic\n";
const char* const kPipeline =
    "name: bad-values\ndataset: synthetic\nmodel: resnet18\nstrategy: pipeline\n"
    "ranks_per_node: 2\nmax_steps: 5\n";

const BadValue kBadValues[] = {
    {"EmptyName", kBase, "name", ""},
    {"ZeroEpochs", kBase, "epochs", "0"},
    {"NegativeMaxSteps", kBase, "max_steps", "-1"},
    {"SeedNotANumber", kBase, "seed", "twelve"},
    {"DropoutOne", kBase, "dropout", "1.5"},
    {"ZeroBatch", kBase, "batch_size", "0"},
    {"ZeroRanks", kBase, "ranks_per_node", "0"},
    {"UnknownNode", kBase, "nodes", "nowhere"},
    {"NegativeLearningRate", kBase, "optimizer.lr", "-0.1"},
    {"LearningRateWithAComma", kBase, "optimizer.lr", "0,1"},
    {"NegativeThreads", kBase, "threads", "-2"},
    {"ZeroSyntheticClasses", kBase, "synthetic.classes", "0"},
    {"NegativeSaveEverySteps", kBase, "save.every_steps", "-5"},
    {"BalanceNotSummingToTheBlocks", kPipeline, "balance", "1, 2"},
    {"ZeroChunks", kPipeline, "chunks", "0"},
    {"CodecBitsTooMany", kPipeline, "compression.bits", "40"},
};

class BadValueTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadValueTest, IsNamedAtItsFieldAndDisablesRun) {
  const BadValue& bad = GetParam();
  testing::TempDir dir;
  MainWindow window(QString::fromStdString((dir.path() / "designer.db").string()),
                    FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  ExperimentDesigner* designer = window.form();
  auto* run = window.findChild<QPushButton*>("runButton");
  // The worker has listed the stored nodes (none but this machine) to the picker.
  ASSERT_TRUE(
      QTest::qWaitFor([&] { return window.findChild<QAction*>("pick:local") != nullptr; }, 10000));
  ASSERT_TRUE(designer->setConfigText(bad.base));
  if (std::string(bad.key) == "compression.bits") {
    auto* method = window.findChild<QComboBox*>("key:compression.method");
    method->setCurrentText("uniform");
  }
  ASSERT_TRUE(designer->problems().isEmpty()) << designer->problems().join("; ").toStdString();
  ASSERT_TRUE(run->isEnabled());

  auto* field = window.findChild<QLineEdit*>(QString("key:") + bad.key);
  ASSERT_TRUE(field) << bad.key;
  field->setText(bad.typed);

  ASSERT_FALSE(designer->problems().isEmpty()) << bad.key << " = " << bad.typed;
  EXPECT_FALSE(run->isEnabled());
  const QString at_field = designer->form()->messagesAt(bad.key);
  EXPECT_TRUE(at_field.startsWith(QString(bad.key) + ":"))
      << "at the field: \"" << at_field.toStdString()
      << "\"; problems: " << designer->problems().join("; ").toStdString();
  // Every problem is the validator's line about this key, shown at this field.
  for (const auto& p : designer->problems()) EXPECT_TRUE(at_field.contains(p)) << p.toStdString();

  // Clicking the message in the list takes the person to the field, marked.
  field->clearFocus();
  QListWidget* list = designer->problemList();
  ASSERT_GT(list->count(), 0);
  const QRect rect = list->visualItemRect(list->item(0));
  QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, rect.center());
  EXPECT_TRUE(field->hasFocus() || QApplication::focusWidget() == field);
  EXPECT_TRUE(field->property("marked").toBool());

  // Put right, the message goes and Run comes back.
  designer->setConfigText(bad.base);
  if (std::string(bad.key) == "compression.bits")
    window.findChild<QComboBox*>("key:compression.method")->setCurrentText("uniform");
  EXPECT_TRUE(designer->form()->messagesAt(bad.key).isEmpty());
  EXPECT_TRUE(run->isEnabled());
}

INSTANTIATE_TEST_SUITE_P(Fifteen, BadValueTest, ::testing::ValuesIn(kBadValues),
                         [](const ::testing::TestParamInfo<BadValue>& info) {
                           return std::string(info.param.label);
                         });

TEST(PlanPreview, SaysWhatIsMissingWhenFlotillaTrainIsNotThere) {
  PlanPreview preview;
  preview.setProgram("/nonexistent/flotilla-train");
  preview.setDelay(0);
  ExperimentConfig config;
  config.name = "plan";
  preview.request(config);
  ASSERT_TRUE(
      QTest::qWaitFor([&] { return preview.state() == PlanPreview::State::unavailable; }, 5000));
  EXPECT_TRUE(preview.statusText().contains("flotilla-train"))
      << preview.statusText().toStdString();
  EXPECT_TRUE(preview.shownText().isEmpty());
}

}  // namespace
}  // namespace flotilla::gui
