// The sweep designer ("New sweep…") in the main window on a real SQLite
// store, planned by the window's controller worker with the code of
// `flotilla sweep --dry-run`: the run count and the refused points with the
// validator's words, the keys named in bad input with Start disabled, a
// study opened, and a sweep saved and opened again.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QTest>

#include <fstream>
#include <sstream>

#include "experiment_designer.h"
#include "flotilla/controller/study.h"
#include "flotilla/protocol/sweep.h"
#include "main_window.h"
#include "screenshot.h"
#include "sweep_designer.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

const char* const kBase =
    "name: sweep-base\nmodel: small_cnn\ndataset: synthetic\nmax_steps: 4\nthreads: 1\n";

class SweepDesignerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir_.path() / "agent-home").string()));
    window_ = std::make_unique<MainWindow>(
        QString::fromStdString((dir_.path() / "designer.db").string()), FLOTILLA_AGENT_BINARY);
    window_->form()->setConfigText(kBase);
    ASSERT_TRUE(window_->form()->problems().isEmpty())
        << window_->form()->problems().join("; ").toStdString();
    designer_ = window_->openSweepDesigner();
  }

  // Until what is shown is about the form as it is now; whether it is a plan.
  bool planned() {
    return wait_until([&] { return designer_->settled(); }, 10s) && designer_->planCurrent();
  }

  testing::TempDir dir_;
  std::unique_ptr<MainWindow> window_;
  SweepDesigner* designer_ = nullptr;
};

TEST_F(SweepDesignerTest, CountsTheRunsAndListsTheRefusedPointsWithTheValidatorsWords) {
  ASSERT_EQ(designer_->axesTable()->rowCount(), 1);  // one empty axis to fill in
  EXPECT_EQ(designer_->findChild<QLineEdit*>("sweepName")->text(), "sweep-base-sweep");
  designer_->setAxisKey(0, "batch_size");
  designer_->setAxisValues(0, "8, 16, 32");
  designer_->setAxisUntilOom(0, true);
  const int lr = designer_->addAxis("optimizer.lr", "0.05, -1");
  ASSERT_TRUE(planned());
  ASSERT_TRUE(designer_->problems().isEmpty()) << designer_->problems().join("; ").toStdString();
  EXPECT_EQ(designer_->plan().runs, 6);
  EXPECT_EQ(designer_->plan().to_run, 3);
  EXPECT_EQ(designer_->runCountLabel()->text(),
            "6 run(s) (3 batch_size x 2 optimizer.lr): 3 to run, 3 refused");
  auto* refused = designer_->refusedTable();
  ASSERT_EQ(refused->rowCount(), 3);
  EXPECT_EQ(refused->item(0, 0)->text(), "2");  // the grid's second point, lr -1
  EXPECT_EQ(refused->item(0, 1)->text(), "batch_size 8, optimizer.lr -1");
  EXPECT_TRUE(refused->item(0, 2)->text().contains("optimizer.lr: must be positive"))
      << refused->item(0, 2)->text().toStdString();
  EXPECT_TRUE(designer_->startButton()->isEnabled());

  // Repeat multiplies the runs; removing the refusing axis leaves none refused.
  designer_->setRepeat(2);
  ASSERT_TRUE(planned());
  EXPECT_EQ(designer_->plan().runs, 12);
  designer_->removeAxis(lr);
  ASSERT_TRUE(planned());
  EXPECT_EQ(designer_->plan().runs, 6);
  EXPECT_EQ(designer_->refusedTable()->rowCount(), 0);

  // Every point refused: nothing to start.
  designer_->setRepeat(1);
  designer_->setAxisValues(0, "0, -8");
  designer_->setAxisUntilOom(0, false);
  ASSERT_TRUE(planned());
  EXPECT_EQ(designer_->plan().to_run, 0);
  EXPECT_FALSE(designer_->startButton()->isEnabled());
}

// One kind of bad input in the axes: what is typed, and the words the
// message must hold (the key named).
struct BadAxis {
  const char* label;
  const char* key;
  const char* values;
  bool until_oom;
  const char* expected;
};

// What ctest lists beside the test's name: the case's label, not its bytes.
void PrintTo(const BadAxis& bad, std::ostream* out) {
  *out << bad.label;
}

class SweepDesignerBadInput : public SweepDesignerTest,
                              public ::testing::WithParamInterface<BadAxis> {};

TEST_P(SweepDesignerBadInput, NamesTheKeyAndDisablesStart) {
  const auto& bad = GetParam();
  // A good sweep first, so that Start was enabled before the bad edit.
  designer_->setAxisKey(0, "batch_size");
  designer_->setAxisValues(0, "8, 16");
  ASSERT_TRUE(planned());
  ASSERT_TRUE(designer_->startButton()->isEnabled());

  designer_->setAxisKey(0, bad.key);
  designer_->setAxisValues(0, bad.values);
  designer_->setAxisUntilOom(0, bad.until_oom);
  ASSERT_TRUE(wait_until([&] { return designer_->settled(); }, 10s));
  const QString shown = designer_->problemsLabel()->text();
  EXPECT_TRUE(shown.contains(bad.expected)) << shown.toStdString();
  EXPECT_TRUE(designer_->problemsLabel()->isVisibleTo(designer_));
  EXPECT_FALSE(designer_->startButton()->isEnabled());
  EXPECT_EQ(designer_->refusedTable()->rowCount(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Axes, SweepDesignerBadInput,
    ::testing::Values(
        BadAxis{"UnknownKey", "batch_sise", "8, 16", false,
                "axes.batch_sise: \"batch_sise\" is not a config key"},
        BadAxis{"EmptyAxis", "batch_size", "", false, "axes.batch_size: an empty axis"},
        BadAxis{"UntilOomDescending", "batch_size", "64, 32", true,
                "axes.batch_size: until: oom needs strictly ascending numbers"},
        BadAxis{"UntilOomOnNames", "strategy", "ddp, pipeline", true,
                "axes.strategy: until: oom needs strictly ascending numbers"},
        BadAxis{"UnclosedList", "batch_size", "[8, 16", false, "axes.batch_size: values:"}),
    [](const ::testing::TestParamInfo<BadAxis>& info) { return std::string(info.param.label); });

TEST_F(SweepDesignerTest, NoKeyAndAKeyGivenTwiceAreNamed) {
  designer_->setAxisValues(0, "8, 16");
  ASSERT_TRUE(wait_until([&] { return designer_->settled(); }, 10s));
  EXPECT_EQ(designer_->problems(), QStringList{"axis 1: choose a config key"});
  EXPECT_FALSE(designer_->startButton()->isEnabled());
  designer_->setAxisKey(0, "batch_size");
  designer_->addAxis("batch_size", "32");
  ASSERT_TRUE(wait_until([&] { return designer_->settled(); }, 10s));
  EXPECT_EQ(designer_->problems(), QStringList{"axes.batch_size: given twice; one row an axis"});
  EXPECT_FALSE(designer_->startButton()->isEnabled());
}

TEST_F(SweepDesignerTest, OpensAStudyAndSavesASweepThatOpensAgainTheSame) {
  ASSERT_TRUE(designer_->openStudy("dp-scaling", "cpu"));
  auto* axes = designer_->axesTable();
  ASSERT_EQ(axes->rowCount(), 2);
  auto key = [&](int row) {
    return qobject_cast<QComboBox*>(axes->cellWidget(row, SweepDesigner::kKeyColumn))
        ->currentText();
  };
  auto values = [&](int row) {
    return qobject_cast<QLineEdit*>(axes->cellWidget(row, SweepDesigner::kValuesColumn))->text();
  };
  auto until = [&](int row) {
    return qobject_cast<QCheckBox*>(axes->cellWidget(row, SweepDesigner::kUntilColumn))
        ->isChecked();
  };
  EXPECT_EQ(key(0), "gpu_nums");  // the seed's own axis, variants of ranks_per_node
  EXPECT_EQ(values(0), "1, 2, 4");
  EXPECT_FALSE(until(0));
  EXPECT_EQ(key(1), "batch_size");
  EXPECT_EQ(values(1), "32, 128, 512, 2048");
  EXPECT_TRUE(until(1));
  ASSERT_TRUE(planned());
  EXPECT_EQ(designer_->plan().runs, 12);
  EXPECT_EQ(designer_->plan().name, "dp-scaling-cpu");

  // Saved as YAML, it is the same sweep (report section and base included).
  const QString file = QString::fromStdString((dir_.path() / "saved.yaml").string());
  ASSERT_EQ(designer_->saveTo(file), "");
  const auto saved = load_sweep(file.toStdString());
  EXPECT_EQ(sweep_to_json(saved),
            sweep_to_json(parse_sweep(designer_->sweepText().toStdString(), "form")));
  EXPECT_EQ(saved.report.columns.size(), 12u);
  EXPECT_EQ(saved.report.seed, "dp-scaling");  // its seed vs ours table kept too
  std::stringstream text;
  text << std::ifstream(file.toStdString()).rdbuf();
  EXPECT_NE(text.str().find("until: oom"), std::string::npos) << text.str();

  // A fresh designer opens the file: the same rows and plan.
  designer_->close();
  designer_ = window_->openSweepDesigner();
  ASSERT_TRUE(designer_->openFile(file));
  ASSERT_EQ(designer_->axesTable()->rowCount(), 2);
  axes = designer_->axesTable();
  EXPECT_EQ(values(1), "32, 128, 512, 2048");
  EXPECT_TRUE(until(1));
  ASSERT_TRUE(planned());
  EXPECT_EQ(designer_->plan().runs, 12);
}

// Every carried study at every scale opens, named variants included (kept
// as the study has them, their labels shown, not editable here), plans to
// its full grid and saves as the same sweep.
TEST_F(SweepDesignerTest, EveryStudyOpensPlansAndSavesAsTheSameSweep) {
  int variant_rows = 0;
  for (const auto& study : controller::study_names())
    for (const auto& scale : controller::study_scales(study)) {
      SCOPED_TRACE(study + " " + scale);
      ASSERT_TRUE(
          designer_->openStudy(QString::fromStdString(study), QString::fromStdString(scale)));
      const auto spec = controller::load_study(study, scale);
      ASSERT_TRUE(planned()) << designer_->problems().join("; ").toStdString();
      EXPECT_TRUE(designer_->plan().problems.isEmpty())
          << designer_->plan().problems.join("; ").toStdString();
      EXPECT_EQ(designer_->plan().runs, sweep_size(spec));
      const auto* axes = designer_->axesTable();
      ASSERT_EQ(axes->rowCount(), int(spec.axes.size()));
      for (int row = 0; row < axes->rowCount(); ++row) {
        const auto* values =
            qobject_cast<QLineEdit*>(axes->cellWidget(row, SweepDesigner::kValuesColumn));
        EXPECT_EQ(values->isReadOnly(), spec.axes[row].has_variants());
        variant_rows += spec.axes[row].has_variants();
      }
      const QString file =
          QString::fromStdString((dir_.path() / (study + "." + scale + ".yaml")).string());
      ASSERT_EQ(designer_->saveTo(file), "");
      EXPECT_EQ(sweep_to_json(load_sweep(file.toStdString())), sweep_to_json(spec));
    }
  EXPECT_GT(variant_rows, 0);
  ASSERT_TRUE(designer_->openStudy("pipe-vs-ddp-memory", "cpu"));
  ASSERT_TRUE(planned());
  designer_->show();
  save_screenshot(*designer_, "sweep-designer-study");
}

TEST_F(SweepDesignerTest, AFileThatIsNotASweepIsRefusedNamingTheField) {
  const auto file =
      dir_.write("bad.yaml", "name: bad\nbase: {model: small_cnn}\naxes: {batch_size: 8}\n");
  EXPECT_FALSE(designer_->openFile(QString::fromStdString(file.string())));
  EXPECT_TRUE(designer_->problemsLabel()->text().contains("axes.batch_size: expected a list"))
      << designer_->problemsLabel()->text().toStdString();
}

}  // namespace
}  // namespace flotilla::gui
