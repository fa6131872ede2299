// The window under a comma-decimal locale: what the fields show and what the
// form sends are the same numbers the YAML and the CLI use.
#include <gtest/gtest.h>

#include <QLineEdit>
#include <QLocale>
#include <clocale>
#include <nlohmann/json.hpp>
#include <string>

#include "designer_form.h"
#include "experiment_designer.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::gui {
namespace {

// The C library and Qt's default locale both set to German, as a German
// desktop session starts the window, and restored afterwards.
class GermanLocale {
 public:
  GermanLocale() : previous_qt_(QLocale()) {
    previous_c_ = std::setlocale(LC_ALL, nullptr);
    active_ = std::setlocale(LC_ALL, "de_DE.UTF-8") != nullptr;
    QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
  }
  ~GermanLocale() {
    std::setlocale(LC_ALL, previous_c_.c_str());
    QLocale::setDefault(previous_qt_);
  }
  bool active() const { return active_; }

 private:
  std::string previous_c_;
  QLocale previous_qt_;
  bool active_ = false;
};

TEST(DesignerLocale, ADecimalLearningRateIsValidUnderAGermanLocale) {
  GermanLocale german;
  if (!german.active())
    GTEST_SKIP() << "the de_DE.UTF-8 locale is not installed (scripts/setup.sh generates it)";
  ExperimentDesigner designer;
  auto* lr = designer.findChild<QLineEdit*>("key:optimizer.lr");
  ASSERT_TRUE(lr);
  lr->setText("0.05");
  EXPECT_TRUE(designer.problems().isEmpty()) << designer.problems().join("; ").toStdString();
  const auto config = nlohmann::json::parse(designer.configJson().toStdString());
  EXPECT_DOUBLE_EQ(config["optimizer"]["lr"].get<double>(), 0.05);
  // What the YAML holds comes back with the YAML's digits, not "0,05".
  ASSERT_TRUE(designer.setConfigText("name: de\noptimizer: {lr: 0.125, weight_decay: 5e-4}\n"));
  EXPECT_EQ(lr->text(), "0.125");
  const QString decay = designer.findChild<QLineEdit*>("key:optimizer.weight_decay")->text();
  EXPECT_FALSE(decay.contains(',')) << decay.toStdString();
  EXPECT_EQ(parse_number(decay.toStdString()), 5e-4) << decay.toStdString();
  // A comma is not a decimal point in a config: the validator says so at the field.
  lr->setText("0,05");
  EXPECT_TRUE(designer.form()->messagesAt("optimizer.lr").startsWith("optimizer.lr:"))
      << designer.problems().join("; ").toStdString();
}

}  // namespace
}  // namespace flotilla::gui
