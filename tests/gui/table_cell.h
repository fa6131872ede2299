#pragma once
// The text of a table's cell as the person reads it; empty where the cell
// has no item.
#include <QString>
#include <QTableWidget>

namespace flotilla::gui {

inline QString cell(const QTableWidget* table, int row, int column) {
  const auto* item = table->item(row, column);
  return item ? item->text() : QString();
}

}  // namespace flotilla::gui
