// GoogleTest main for tests that use Qt: QtSql loads its SQLite driver
// through the application object, and widgets need a QApplication.
#include <gtest/gtest.h>

#ifdef FLOTILLA_TEST_WIDGETS
#include <QApplication>
using TestApplication = QApplication;
#else
#include <QCoreApplication>
using TestApplication = QCoreApplication;
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  TestApplication app(argc, argv);
  return RUN_ALL_TESTS();
}
