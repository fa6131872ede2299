#pragma once
// What a person sees, kept for looking at: with FLOTILLA_SCREENSHOT_DIR=DIR
// (tests/gui/screenshot.sh sets it, under Xvfb) a test saves its window as
// DIR/NAME.png; without it, nothing is saved.
#include <gtest/gtest.h>
#include <QGuiApplication>
#include <QPixmap>
#include <QScreen>
#include <QString>
#include <QTest>
#include <QWidget>

namespace flotilla::gui {

inline void save_screenshot(QWidget& window, const QString& name) {
  const QString dir = qEnvironmentVariable("FLOTILLA_SCREENSHOT_DIR");
  if (dir.isEmpty()) return;
  // Lets a repaint queued by the test's last change reach the screen first.
  QTest::qWait(200);
  // Under a real X server take the screen's pixels, as a person sees them;
  // offscreen there is no screen, only the widget's own rendering.
  const QPixmap shot = QGuiApplication::platformName() == "xcb"
                           ? window.screen()->grabWindow(window.winId())
                           : window.grab();
  const QString file = dir + "/" + name + ".png";
  EXPECT_TRUE(shot.save(file)) << "could not write " << file.toStdString();
}

}  // namespace flotilla::gui
