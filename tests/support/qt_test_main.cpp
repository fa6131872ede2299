// GoogleTest main for tests that use Qt: QtSql loads its SQLite driver
// through the application object, and widgets need a QApplication.
#include <gtest/gtest.h>

#ifdef FLOTILLA_TEST_WIDGETS
#include <QApplication>
#include <QSettings>
#include <QTemporaryDir>
using TestApplication = QApplication;
#else
#include <QCoreApplication>
using TestApplication = QCoreApplication;
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing the tests (CMake's discovery) needs no application and no display.
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
#ifdef FLOTILLA_TEST_WIDGETS
  // Windows are drawn off screen unless a platform (xcb under Xvfb) is asked for.
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
#ifdef FLOTILLA_TEST_SCALE_FACTOR
  // A HiDPI screen, as a binary's tests assume: set before the application exists.
  qputenv("QT_SCALE_FACTOR", FLOTILLA_TEST_SCALE_FACTOR);
#endif
  // The window keeps its settings (QSettings); a test's go to a directory
  // of its own, never the person's, and start from none.
  QTemporaryDir settings;
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settings.path());
#endif
  TestApplication app(argc, argv);
  return RUN_ALL_TESTS();
}
