#include "nodes_view.h"

#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "flotilla/controller/nodes.h"
#include "flotilla/protocol/numbers.h"
#include "node_dialog.h"

namespace flotilla::gui {
namespace {

// A State that is said in red: the node is out of reach or cannot run.
bool is_trouble(const QString& state) {
  return state.startsWith("unreachable") || state.contains("engine was not built");
}

QString gib(int64_t bytes) {
  return QString::fromStdString(format_fixed(double(bytes) / (1024.0 * 1024 * 1024), 1)) + " GiB";
}

QString gpus_text(const protocol::ProbeReply& probe) {
  if (probe.gpus.empty()) return "none";
  QStringList gpus;
  for (const auto& g : probe.gpus)
    gpus << QString::fromStdString(g.name) + " (" + gib(g.memory_bytes) + ")";
  return QString::number(probe.gpus.size()) + ": " + gpus.join(", ");
}

}  // namespace

NodesView::NodesView(QWidget* parent) : QWidget(parent) {
  table_ = new QTableWidget(0, kColumns);
  table_->setObjectName("nodeTable");
  table_->setHorizontalHeaderLabels({"Name", "Host", "User", "State", "OS", "CPUs", "Memory",
                                     "GPUs", "Free disk", "Last probe", "Cluster", "Engine",
                                     "Live runs"});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  // A width the person sets is theirs from then on (the stretched last
  // column follows the window, not the person).
  connect(table_->horizontalHeader(), &QHeaderView::sectionResized, this, [this](int section) {
    if (!fitting_ && section != table_->columnCount() - 1) columns_restored_ = true;
  });
  table_->setWordWrap(false);

  add_ = new QPushButton("Add…");
  add_->setObjectName("addNodeButton");
  edit_ = new QPushButton("Edit…");
  edit_->setObjectName("editNodeButton");
  remove_ = new QPushButton("Remove");
  remove_->setObjectName("removeNodeButton");
  probe_selected_ = new QPushButton("Probe selected");
  probe_selected_->setObjectName("probeSelectedButton");
  probe_all_ = new QPushButton("Probe all");
  probe_all_->setObjectName("probeAllButton");
  progress_ = new QProgressBar;
  progress_->setObjectName("probeProgress");
  progress_->setTextVisible(true);
  progress_->hide();
  message_ = new QLabel;
  message_->setObjectName("nodesMessage");
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* buttons = new QHBoxLayout;
  for (auto* b : {add_, edit_, remove_, probe_selected_, probe_all_}) buttons->addWidget(b);
  buttons->addWidget(progress_, 1);
  buttons->addStretch();
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(table_, 1);
  layout->addWidget(message_);

  connect(add_, &QPushButton::clicked, this, &NodesView::addNode);
  connect(edit_, &QPushButton::clicked, this, &NodesView::editSelected);
  connect(table_, &QTableWidget::cellDoubleClicked, this, &NodesView::editSelected);
  connect(remove_, &QPushButton::clicked, this, &NodesView::removeSelected);
  connect(probe_selected_, &QPushButton::clicked, this, [this] { probe(selectedNodes()); });
  connect(probe_all_, &QPushButton::clicked, this, [this] {
    QStringList names;
    for (const auto& n : nodes_) names << n.name;
    probe(names);
  });
  connect(table_, &QTableWidget::itemSelectionChanged, this, &NodesView::updateButtons);
  updateButtons();
}

QString NodesView::stateOf(const NodeItem& node) const {
  if (in_flight_.contains(node.name))
    return build_lines_.contains(node.name) ? "probing: " + build_lines_.value(node.name)
                                            : "probing…";
  if (const auto it = unreachable_.find(node.name); it != unreachable_.end())
    return "unreachable: " + it.value();
  if (const auto it = engine_problems_.find(node.name); it != engine_problems_.end())
    return "reachable; its engine was not built: " + it.value();
  if (node.probe_json.isEmpty()) return "never probed";
  return "reachable";
}

void NodesView::showNodes(const QVector<NodeItem>& nodes) {
  const QStringList selected = selectedNodes();
  nodes_ = nodes;
  QSignalBlocker block(table_);
  table_->setRowCount(int(nodes.size()));
  for (int row = 0; row < nodes.size(); ++row) {
    const auto& n = nodes[row];
    const auto probe = controller::parse_probe(n.probe_json.toStdString());
    QStringList cells(kColumns);
    cells[kName] = n.name;
    cells[kHost] = n.name == "local" ? "this machine" : n.host + ":" + QString::number(n.port);
    cells[kUser] = n.user;
    cells[kState] = stateOf(n);
    if (probe) {
      cells[kOs] = QString::fromStdString(probe->os);
      cells[kCpus] = QString::number(probe->cpus);
      cells[kMemory] = gib(probe->memory_bytes);
      cells[kGpus] = gpus_text(*probe);
      cells[kDisk] = gib(probe->disk_free_bytes);
    }
    cells[kCluster] = n.name == "local" ? QString()
                      : !n.slurm        ? QString("SSH")
                      : probe && probe->slurm
                          ? QString::fromStdString(controller::slurm_summary(*probe->slurm))
                          : QString("SLURM (not probed yet)");
    if (n.probed_ms > 0)
      cells[kProbed] = QDateTime::fromMSecsSinceEpoch(n.probed_ms).toString("yyyy-MM-dd HH:mm:ss");
    cells[kEngine] = n.engine;
    cells[kLiveRuns] = n.live_runs.isEmpty() ? QString("none") : n.live_runs.join(", ");
    for (int column = 0; column < kColumns; ++column) {
      auto* item = new QTableWidgetItem(cells[column]);
      item->setToolTip(cells[column]);
      if (column == kState && is_trouble(cells[column])) item->setForeground(QColor("#c62828"));
      table_->setItem(row, column, item);
    }
    if (selected.contains(n.name)) table_->selectRow(row);
  }
  if (!columns_restored_) {
    fitting_ = true;
    table_->resizeColumnsToContents();
    // The reason of an unreachable node can be long: its tool tip has it whole.
    table_->setColumnWidth(kState, std::min(table_->columnWidth(kState), 320));
    fitting_ = false;
  }
  updateButtons();
}

void NodesView::restoreColumns(const QByteArray& state) {
  columns_restored_ = table_->horizontalHeader()->restoreState(state);
}

void NodesView::nodeProbed(const NodeProbeResult& result) {
  in_flight_.remove(result.node);
  build_lines_.remove(result.node);
  engine_problems_.remove(result.node);
  if (result.reached) {
    unreachable_.remove(result.node);
    if (!result.engine_error.isEmpty()) engine_problems_[result.node] = result.engine_error;
  } else if (result.host_key == NodeProbeResult::HostKey::unknown) {
    unreachable_[result.node] = "host key not trusted yet";
    // Still in the round while the person decides: another node's answer
    // arriving under the question must not close the round and say this
    // one is unreachable, when its probe is about to go on.
    in_flight_.insert(result.node);
    const auto answer = QMessageBox::question(
        this, "Unknown host key",
        "Node " + result.node + " presents a host key this controller has not seen:\n\n" +
            result.fingerprint +
            "\n\nCompare it with the node's own (ssh-keygen -lf on its host key). Trust it and "
            "probe the node?",
        QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer == QMessageBox::Yes) {
      ++batch_size_;
      emit requestTrustAndProbe(result.node, result.fingerprint);
    } else {
      in_flight_.remove(result.node);
    }
  } else if (result.host_key == NodeProbeResult::HostKey::changed) {
    unreachable_[result.node] = "refused: its host key changed (" + result.fingerprint + ")";
    const QString text = "Node " + result.node +
                         "'s host key is not the one recorded: it now presents " +
                         result.fingerprint +
                         ". The probe was refused and the new key is not trusted. If the node "
                         "was reinstalled, remove its old line from the known_hosts file; "
                         "otherwise someone may be in between.\n\n" +
                         result.error;
    message_->setText(text);
    message_->setStyleSheet("color: #c62828;");
    // Said to the person's face, never only in a label, and never a question:
    // a changed key is refused, not offered for trust.
    QMessageBox::warning(this, "Host key changed: " + result.node, text);
  } else {
    unreachable_[result.node] = result.error;
  }
  // The row's state now; the refreshed list (with the stored answer) follows.
  showState(result.node, result.reached);
  showProgress();
}

void NodesView::nodeProgress(const QString& node, const QString& line) {
  if (!in_flight_.contains(node)) return;
  build_lines_[node] = line;
  showState(node, false);
}

void NodesView::showState(const QString& node, bool reached) {
  for (int row = 0; row < table_->rowCount(); ++row)
    if (table_->item(row, kName)->text() == node) {
      const QString state = stateOf(nodes_[row]) == "never probed" && reached
                                ? QString("reachable")
                                : stateOf(nodes_[row]);
      table_->item(row, kState)->setText(state);
      table_->item(row, kState)->setToolTip(state);
      table_->item(row, kState)->setForeground(is_trouble(state) ? QColor("#c62828") : QColor());
    }
}

void NodesView::showRefusal(const QString& message) {
  message_->setText(message);
  message_->setStyleSheet("color: #c62828;");
}

void NodesView::probe(const QStringList& names) {
  QStringList fresh;
  for (const auto& n : names)
    if (!in_flight_.contains(n)) fresh << n;
  if (fresh.isEmpty()) return;
  if (in_flight_.isEmpty()) batch_size_ = 0;
  for (const auto& n : fresh) in_flight_.insert(n);
  batch_size_ += int(fresh.size());
  message_->setStyleSheet({});
  message_->setText("Probing " + fresh.join(", ") + "…");
  for (int row = 0; row < table_->rowCount(); ++row)
    if (fresh.contains(table_->item(row, kName)->text()))
      table_->item(row, kState)->setText("probing…");
  showProgress();
  emit requestProbe(fresh);
}

void NodesView::showProgress() {
  progress_->setVisible(!in_flight_.isEmpty());
  progress_->setRange(0, batch_size_);
  progress_->setValue(batch_size_ - int(in_flight_.size()));
  progress_->setFormat("%v of %m probed");
  if (in_flight_.isEmpty() && message_->text().startsWith("Probing")) {
    const int failed = int(unreachable_.size());
    QString said = failed == 0 ? QString("Every node answered.")
                               : QString::number(failed) +
                                     " unreachable; the State column "
                                     "says why.";
    // A build's reason is long for a cell: said whole here.
    for (auto it = engine_problems_.begin(); it != engine_problems_.end(); ++it)
      said += "\n" + it.key() + ": its engine was not built: " + it.value();
    message_->setText(said);
    message_->setStyleSheet(failed == 0 && engine_problems_.isEmpty() ? QString()
                                                                      : "color: #c62828;");
  }
  updateButtons();
}

void NodesView::addNode() {
  NodeDialog dialog(std::nullopt, this);
  if (dialog.exec() == QDialog::Accepted) emit requestAdd(dialog.node());
}

void NodesView::editSelected() {
  const QStringList names = selectedNodes();
  if (names.size() != 1) return;
  for (const auto& n : nodes_)
    if (n.name == names.front()) {
      NodeDialog dialog(n, this);
      if (dialog.exec() == QDialog::Accepted) emit requestUpdate(dialog.node());
      return;
    }
}

void NodesView::removeSelected() {
  for (const auto& name : selectedNodes()) {
    const auto answer = QMessageBox::question(this, "Remove node",
                                              "Forget node " + name + "? Its runs stay stored.",
                                              QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer == QMessageBox::Yes) emit requestRemove(name);
  }
}

QStringList NodesView::selectedNodes() const {
  QStringList names;
  for (const auto& index : table_->selectionModel()->selectedRows())
    names << table_->item(index.row(), kName)->text();
  return names;
}

QString NodesView::cell(const QString& node, Column column) const {
  for (int row = 0; row < table_->rowCount(); ++row)
    if (table_->item(row, kName)->text() == node) return table_->item(row, column)->text();
  return {};
}

void NodesView::updateButtons() {
  const int selected = int(selectedNodes().size());
  edit_->setEnabled(selected == 1 && selectedNodes().front() != "local");
  // The local node is this machine's own agent, which the window always has.
  const bool local = selectedNodes().contains("local");
  remove_->setEnabled(selected > 0 && !local);
  remove_->setToolTip(local ? QString("The local node is this machine: it is always there and "
                                      "cannot be removed.")
                            : QString("Forget the selected nodes (refused while a live run uses "
                                      "one); their runs stay stored."));
  probe_selected_->setEnabled(selected > 0);
  probe_all_->setEnabled(!nodes_.isEmpty());
}

}  // namespace flotilla::gui
