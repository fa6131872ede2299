#pragma once
// The Nodes tab: every stored node with what its last probe found and the
// runs live on it; Add, Edit, Remove, and Probe selected or all. Everything
// goes to the controller worker as a request and comes back as a signal, so
// that a probe waiting on SSH never holds the window. A probe that stops at
// an unknown host key asks the person, with the key's fingerprint; a changed
// key is shown as the refusal it is.

#include <QMap>
#include <QSet>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "controller_worker.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace flotilla::gui {

class NodesView : public QWidget {
  Q_OBJECT
 public:
  explicit NodesView(QWidget* parent = nullptr);

  enum Column {
    kName,
    kHost,
    kUser,
    kState,
    kOs,
    kCpus,
    kMemory,
    kGpus,
    kDisk,
    kProbed,
    kCluster,  // a SLURM login node's cluster: partitions, nodes, GPUs
    kEngine,   // the bundle's flotilla-train or the one built on the node
    kLiveRuns,
    kColumns
  };
  // The text of `node`'s cell, empty when the node is not listed.
  QString cell(const QString& node, Column column) const;
  QStringList selectedNodes() const;
  bool probing() const { return !in_flight_.isEmpty(); }
  QTableWidget* table() const { return table_; }
  // Column widths as a person left them (QHeaderView::saveState); from then
  // on a refresh no longer fits the columns to their contents.
  void restoreColumns(const QByteArray& state);
  // Whether the widths are the person's (restored, or a header edge dragged):
  // only those are saved; widths fitted to the contents are not.
  bool columnsChosen() const { return columns_restored_; }

  // From the worker.
  void showNodes(const QVector<NodeItem>& nodes);
  void nodeProbed(const NodeProbeResult& result);
  // A line of a node's engine build while its probe runs: its State cell.
  void nodeProgress(const QString& node, const QString& line);
  void showRefusal(const QString& message);

  // The Add and Edit buttons' dialog, for tests to drive; normally modal.
  void addNode();
  void editSelected();
  void removeSelected();
  void probe(const QStringList& names);

 signals:
  void requestAdd(const flotilla::gui::NodeItem& node);
  void requestUpdate(const flotilla::gui::NodeItem& node);
  void requestRemove(const QString& name);
  void requestProbe(const QStringList& names);
  // `fingerprint`: the key the person was shown and confirmed.
  void requestTrustAndProbe(const QString& name, const QString& fingerprint);

 private:
  void updateButtons();
  void showProgress();
  QString stateOf(const NodeItem& node) const;
  // `node`'s State cell from stateOf (`reached`: the probe that just ended answered).
  void showState(const QString& node, bool reached);

  QVector<NodeItem> nodes_;
  // Why the last probe of this session did not reach a node; kept until a
  // probe reaches it (the store keeps only answers).
  QMap<QString, QString> unreachable_;
  QMap<QString, QString> build_lines_;      // the engine build's last line, while probing
  QMap<QString, QString> engine_problems_;  // reached, but its engine could not be built
  QSet<QString> in_flight_;
  int batch_size_ = 0;
  bool columns_restored_ = false;  // or set by the person: kept, never fitted again
  bool fitting_ = false;
  QTableWidget* table_;
  QLabel* message_;
  QProgressBar* progress_;
  QPushButton *add_, *edit_, *remove_, *probe_selected_, *probe_all_;
};

}  // namespace flotilla::gui
