// Window tests reach widgets by object name, fill the experiment form and
// press Run as a person does: each key's editor is named "key:<dotted key>"
// (a combo box for a choice, a line edit for the rest).
#pragma once

#include <gtest/gtest.h>

#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QTest>
#include <QWidget>
#include <chrono>
#include <initializer_list>
#include <utility>

#include "dashboard.h"
#include "experiment_designer.h"
#include "main_window.h"
#include "wait_until.h"

namespace flotilla::gui {

template <typename T>
T* child(QWidget& parent, const char* name) {
  auto* widget = parent.findChild<T*>(name);
  EXPECT_TRUE(widget) << "no widget " << name;
  return widget;
}

// Sets each key's editor to its value, in the order given: a combo box to
// the item of that text (which must exist), a line edit to the text.
inline void set_form_keys(QWidget& window,
                          std::initializer_list<std::pair<const char*, const char*>> keys) {
  for (const auto& [key, value] : keys) {
    const QString name = QStringLiteral("key:") + QLatin1String(key);
    if (auto* combo = window.findChild<QComboBox*>(name)) {
      combo->setCurrentText(QString::fromUtf8(value));
      EXPECT_EQ(combo->currentText().toStdString(), value) << key << " has no item " << value;
    } else if (auto* edit = window.findChild<QLineEdit*>(name)) {
      edit->setText(QString::fromUtf8(value));
    } else {
      ADD_FAILURE() << "the form has no editor for " << key;
    }
  }
}

// Presses Run and waits up to a minute for the run to show in the
// dashboard: its id, or empty (said as a failure) when Run was refused, with
// the form's problems, or no run came.
inline QString press_run(MainWindow& window) {
  auto* run_button = child<QPushButton>(window, "runButton");
  if (!run_button || !run_button->isEnabled()) {
    ADD_FAILURE() << "Run is refused: " << window.form()->problems().join("; ").toStdString();
    return {};
  }
  QTest::mouseClick(run_button, Qt::LeftButton);
  Dashboard* dashboard = window.dashboard();
  if (!wait_until([&] { return dashboard->runs().size() == 1; }, std::chrono::seconds(60))) {
    ADD_FAILURE() << "no run showed in the dashboard within 60 s of Run";
    return {};
  }
  return dashboard->runs().front();
}

}  // namespace flotilla::gui
