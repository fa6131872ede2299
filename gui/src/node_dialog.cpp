#include "node_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include <charconv>

#include "flotilla/controller/nodes.h"

namespace flotilla::gui {

NodeDialog::NodeDialog(const std::optional<NodeItem>& existing, QWidget* parent) : QDialog(parent) {
  setWindowTitle(existing ? "Edit node " + existing->name : "Add a node");
  setObjectName("nodeDialog");
  // First: every field's edit revalidates, which enables or disables OK.
  buttons_ = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons_->button(QDialogButtonBox::Ok)->setObjectName("nodeOk");
  auto* form = new QFormLayout;
  // validate_node's field names, the labels a person reads, and a hint each.
  const struct {
    const char* field;
    const char* label;
    const char* hint;
  } rows[] = {
      {"name", "Name", "what configs call it, e.g. gpu-01"},
      {"host", "Host", "host name or IP address"},
      {"port", "SSH port", "22"},
      {"user", "User", "empty: your login name"},
      {"key_file", "Key file", "empty: ssh-agent"},
      {"remote_dir", "Remote folder", "empty: ~/.flotilla"},
      {"tags", "Tags", "comma-separated, e.g. gpu,a100"},
      {"agent_path", "Installed agent", "empty: deploy the bundle"},
      {"torch", "LibTorch there", "empty: the bundled engine (python3's torch for GPUs)"},
      {"partition", "SLURM partition", "empty: the cluster's default"},
      {"account", "SLURM account", "empty: the login's default"},
  };
  // A SLURM login node: its runs are jobs; partition and account are its alone.
  slurm_ = new QCheckBox("The host is a SLURM cluster's login node (runs are submitted as jobs)");
  slurm_->setObjectName("node:slurm");
  connect(slurm_, &QCheckBox::toggled, this, &NodeDialog::revalidate);
  for (const auto& row : rows) {
    auto* edit = new QLineEdit;
    edit->setObjectName(QString("node:") + row.field);
    edit->setPlaceholderText(row.hint);
    auto* message = new QLabel;
    message->setObjectName(QString("nodeProblem:") + row.field);
    message->setStyleSheet("color: #c62828;");
    message->setWordWrap(true);
    message->hide();
    auto* cell = new QWidget;
    auto* cell_layout = new QVBoxLayout(cell);
    cell_layout->setContentsMargins(0, 0, 0, 0);
    cell_layout->setSpacing(2);
    if (QString(row.field) == "key_file") {
      auto* line = new QHBoxLayout;
      auto* browse = new QPushButton("Browse…");
      connect(browse, &QPushButton::clicked, this, [this, edit] {
        const QString file =
            QFileDialog::getOpenFileName(this, "Private key", QDir::homePath() + "/.ssh");
        if (!file.isEmpty()) edit->setText(file);
      });
      line->addWidget(edit, 1);
      line->addWidget(browse);
      cell_layout->addLayout(line);
    } else {
      cell_layout->addWidget(edit);
    }
    cell_layout->addWidget(message);
    if (QString(row.field) == "partition") form->addRow("", slurm_);
    form->addRow(row.label, cell);
    fields_[row.field] = edit;
    messages_[row.field] = message;
    connect(edit, &QLineEdit::textChanged, this, &NodeDialog::revalidate);
  }
  fields_["port"]->setText("22");
  if (existing) {
    fields_["name"]->setText(existing->name);
    fields_["name"]->setReadOnly(true);
    fields_["name"]->setToolTip("A node keeps its name: runs and configs refer to it");
    fields_["host"]->setText(existing->host);
    fields_["port"]->setText(QString::number(existing->port));
    fields_["user"]->setText(existing->user);
    fields_["key_file"]->setText(existing->key_file);
    fields_["remote_dir"]->setText(existing->remote_dir);
    fields_["tags"]->setText(existing->tags);
    fields_["agent_path"]->setText(existing->agent_path);
    fields_["torch"]->setText(existing->torch_prefix);
    slurm_->setChecked(existing->slurm);
    fields_["partition"]->setText(existing->slurm_partition);
    fields_["account"]->setText(existing->slurm_account);
  }
  connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(buttons_);
  resize(520, sizeHint().height());
  revalidate();
}

NodeItem NodeDialog::node() const {
  NodeItem n;
  n.name = fields_["name"]->text().trimmed();
  n.host = fields_["host"]->text().trimmed();
  const std::string port = fields_["port"]->text().trimmed().toStdString();
  int value = -1;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  n.port = ec == std::errc() && end == port.data() + port.size() ? value : -1;
  n.user = fields_["user"]->text().trimmed();
  n.key_file = fields_["key_file"]->text().trimmed();
  n.remote_dir = fields_["remote_dir"]->text();
  n.tags = fields_["tags"]->text().trimmed();
  n.agent_path = fields_["agent_path"]->text();
  n.torch_prefix = fields_["torch"]->text().trimmed();
  n.slurm = slurm_->isChecked();
  n.slurm_partition = fields_["partition"]->text().trimmed();
  n.slurm_account = fields_["account"]->text().trimmed();
  return n;
}

QString NodeDialog::messageAt(const QString& name) const {
  auto* label = messages_.value(name);
  return label && !label->isHidden() ? label->text() : QString();
}

void NodeDialog::revalidate() {
  // Partition and account only mean something for a SLURM node; what was
  // typed stays, and validate_node says why it is refused.
  for (const char* field : {"partition", "account"})
    fields_[field]->setEnabled(slurm_->isChecked() || !fields_[field]->text().isEmpty());
  const controller::NodeRow row = node_row_of(node());
  problems_.clear();
  QMap<QString, QStringList> at;
  for (const auto& p : controller::validate_node(row)) {
    const QString line = QString::fromStdString(p);
    problems_ << line;
    at[line.section(':', 0, 0)] << line;
  }
  // A port that is not a number is the port field's problem, in the same words.
  if (row.port < 0 && !fields_["port"]->text().trimmed().isEmpty() && !at.contains("port")) {
    const QString line = "port: must be in 1..65535, got \"" + fields_["port"]->text() + "\"";
    problems_ << line;
    at["port"] << line;
  }
  for (auto it = messages_.begin(); it != messages_.end(); ++it) {
    const QStringList lines = at.value(it.key());
    it.value()->setText(lines.join("\n"));
    it.value()->setVisible(!lines.isEmpty());
    fields_[it.key()]->setStyleSheet(lines.isEmpty() ? QString()
                                                     : "QLineEdit { border: 1px solid #c62828; }");
  }
  buttons_->button(QDialogButtonBox::Ok)->setEnabled(problems_.isEmpty());
}

}  // namespace flotilla::gui
