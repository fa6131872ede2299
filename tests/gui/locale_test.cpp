// The window under a comma-decimal locale: what the fields show and what the
// form sends are the same numbers the YAML and the CLI use.
#include <gtest/gtest.h>

#include <QDoubleSpinBox>
#include <QLocale>
#include <clocale>
#include <nlohmann/json.hpp>
#include <string>

#include "experiment_form.h"

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

TEST(ExperimentFormLocale, ADecimalLearningRateIsValidUnderAGermanLocale) {
  GermanLocale german;
  if (!german.active())
    GTEST_SKIP() << "the de_DE.UTF-8 locale is not installed (scripts/setup.sh generates it)";
  ExperimentForm form;
  auto* lr = form.findChild<QDoubleSpinBox*>("lrSpin");
  ASSERT_TRUE(lr);
  lr->setValue(0.05);
  EXPECT_TRUE(form.problems().isEmpty()) << form.problems().join("; ").toStdString();
  const auto config = nlohmann::json::parse(form.configJson().toStdString());
  EXPECT_DOUBLE_EQ(config["optimizer"]["lr"].get<double>(), 0.05);
  EXPECT_EQ(lr->text(), "0.05000");  // the YAML's digits, not "0,05000"
}

}  // namespace
}  // namespace flotilla::gui
