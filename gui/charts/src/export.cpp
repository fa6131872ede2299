#include "flotilla/charts/export.h"

#include <QApplication>
#include <QBuffer>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QSaveFile>
#include <QSvgGenerator>

#include <charconv>
#include <cmath>
#include <memory>

#include "flotilla/charts/panel_widget.h"
#include "flotilla/charts/run_loader.h"
#include "panel_chart_view.h"
#include "view_image.h"

namespace flotilla::charts {
namespace {

// The shortest text that reads back as the same double, whatever the locale.
void put_number(std::string& out, double v) {
  if (!std::isfinite(v)) return;  // an empty cell
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  out.append(buffer, result.ptr);
}

void put_text(std::string& out, const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) {
    out += text;
    return;
  }
  out += '"';
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

// Writes `bytes` to `file` whole or not at all; an error message or empty.
QString write_file(const QString& file, const QByteArray& bytes) {
  QSaveFile out(file);
  if (!out.open(QIODevice::WriteOnly)) return "cannot write " + file + ": " + out.errorString();
  out.write(bytes);
  if (!out.commit()) return "cannot write " + file + ": " + out.errorString();
  return {};
}

QString writable(const QString& file) {
  const QFileInfo info(file);
  if (!QFileInfo(info.absolutePath()).isDir())
    return "cannot write " + file + ": no directory " + info.absolutePath();
  if (info.exists() && !info.isWritable()) return "cannot write " + file + ": permission denied";
  return {};
}

}  // namespace

std::string panel_csv(const PanelDescription& panel) {
  const char* x_name = panel.x_mode == XMode::step        ? "step"
                       : panel.x_mode == XMode::wall_time ? "time_s"
                                                          : "relative_s";
  bool smoothed = false;
  for (const auto& s : panel.series) smoothed = smoothed || s.style == SeriesStyle::faint_raw;
  std::string out =
      std::string("run,series,unit,") + x_name + ",value" + (smoothed ? ",smoothed\n" : "\n");
  for (size_t i = 0; i < panel.series.size(); ++i) {
    const auto& s = panel.series[i];
    if (s.style == SeriesStyle::faint_raw) continue;
    // A smoothed line's raw values are its faint twin's.
    const Series* raw = nullptr;
    for (const auto& other : panel.series)
      if (other.style == SeriesStyle::faint_raw && other.raw_of == int(i)) raw = &other;
    const auto& values = raw ? *raw->y : *s.y;
    for (size_t p = 0; p < s.x->size() && p < values.size(); ++p) {
      put_text(out, s.run);
      out += ',';
      put_text(out, s.name);
      out += ',';
      put_text(out, s.unit);
      out += ',';
      put_number(out, (*s.x)[p]);
      out += ',';
      put_number(out, values[p]);
      if (smoothed) {
        out += ',';
        if (raw) put_number(out, (*s.y)[p]);
      }
      out += '\n';
    }
  }
  return out;
}

QString save_view_image(const QGraphicsView& view, const QString& file, QSize size,
                        const QString& title, const QString& description) {
  if (const QString error = writable(file); !error.isEmpty()) return error;
  const QString suffix = QFileInfo(file).suffix().toLower();
  if (suffix != "png" && suffix != "svg")
    return "cannot write " + file + ": the file must end in .png or .svg";
  const QSize target = size.isEmpty() ? view.size() : size;
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  // The view draws itself; const_cast: QGraphicsView::render is not const.
  auto& drawn = const_cast<QGraphicsView&>(view);
  if (suffix == "png") {
    QImage image(target, QImage::Format_ARGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    drawn.render(&painter, QRectF(QPointF(0, 0), target), view.rect());
    painter.end();
    if (!image.save(&buffer, "PNG")) return "cannot encode " + file + " as PNG";
  } else {
    QSvgGenerator svg;
    svg.setOutputDevice(&buffer);
    svg.setSize(target);
    svg.setViewBox(QRect(QPoint(0, 0), target));
    svg.setTitle(title);
    svg.setDescription(description);
    QPainter painter(&svg);
    painter.fillRect(QRect(QPoint(0, 0), target), Qt::white);
    drawn.render(&painter, QRectF(QPointF(0, 0), target), view.rect());
    painter.end();
  }
  return write_file(file, bytes);
}

QString PanelWidget::saveCsv(const QString& file) const {
  if (!panel_) return "nothing to export: no panel";
  if (panel_->description.coarse)
    return "the run is still loading at full resolution: export the CSV again in a moment";
  if (const QString error = writable(file); !error.isEmpty()) return error;
  return write_file(file, QByteArray::fromStdString(panel_csv(panel_->description)));
}

QString PanelWidget::saveImage(const QString& file, QSize size) const {
  return save_view_image(
      *view_, file, size,
      panel_ ? QString::fromStdString(panel_->description.title) : QString("Flotilla panel"),
      "Flotilla run dashboard panel");
}

QString render_panel(const RenderRequest& request) {
  const QString suffix = QFileInfo(request.output).suffix().toLower();
  if (suffix != "png" && suffix != "svg")
    return "-o " + request.output + ": the file must end in .png or .svg";
  if (const QString error = writable(request.output); !error.isEmpty()) return error;
  if (request.runs.empty()) return "no run given: name one with --run";
  std::vector<RunData> runs;
  try {
    const controller::Store store(QString::fromStdString(request.database),
                                  controller::StoreAccess::read_only);
    for (const auto& id : request.runs) runs.push_back(load_run(store, id));
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  std::vector<const RunData*> pointers;
  for (const auto& run : runs) pointers.push_back(&run);
  PanelWidget widget(nullptr);
  widget.setChrome(false);
  widget.setAttribute(Qt::WA_DontShowOnScreen);
  widget.resize(request.size);
  widget.show();
  widget.setPanel(prepare(build_panel(request.panel, pointers, request.options)));
  QApplication::processEvents();
  widget.setPanel(prepare(build_panel(request.panel, pointers, request.options)));
  return widget.saveImage(request.output, request.size);
}

}  // namespace flotilla::charts
