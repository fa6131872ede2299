// Window tests reach widgets by object name and fill the experiment form as a
// person does: each key's editor is named "key:<dotted key>" (a combo box
// for a choice, a line edit for the rest).
#pragma once

#include <gtest/gtest.h>

#include <QComboBox>
#include <QLineEdit>
#include <QWidget>
#include <initializer_list>
#include <utility>

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

}  // namespace flotilla::gui
