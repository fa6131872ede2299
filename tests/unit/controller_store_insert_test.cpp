// The writer's INSERT of records, bound through SQLite's own interface where
// Qt's driver calls the same libsqlite3 as this program, and through QtSql
// where it does not: the same rows stored either way.
#include <gtest/gtest.h>

#include <QSqlDatabase>

#include <string>
#include <vector>

#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "store_insert.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using testing::minimal_run;
using testing::TempDir;
using Binding = RecordInsert::Binding;
using Outcome = RecordInsert::Outcome;

QString db_in(const TempDir& dir) {
  return QString::fromStdString((dir.path() / "flotilla.db").string());
}

// Debian's Qt links its SQLite driver against the system libsqlite3, the one
// the controller links: the writer may use the driver's handle.
TEST(RecordInsert, DebiansQtSqliteDriverCallsTheLibsqlite3ThisProgramLinks) {
  TempDir dir;
  Store store(db_in(dir));
  bool shares = false, direct = false;
  store.write_transaction([&](QSqlDatabase& db) {
    shares = driver_shares_our_sqlite(db);
    direct = RecordInsert(db, store.path()).binds_directly();
  });
  EXPECT_TRUE(shares);
  EXPECT_TRUE(direct);
}

// A connection without a SQLite driver behind it is never taken for ours.
TEST(RecordInsert, AnInvalidConnectionIsNotTakenForOneSharingOurSqlite) {
  EXPECT_FALSE(driver_shares_our_sqlite(QSqlDatabase()));
}

class RecordInsertBinding : public ::testing::TestWithParam<Binding> {};

// What each binding stores, and what it says of a record seen before and of
// a record of no such run.
TEST_P(RecordInsertBinding, StoresTheSameRowsAndOutcomes) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(minimal_run("r1"));
  const std::string accented = "{\"note\":\"d\u00e9j\u00e0 \xf0\x9f\x9a\x80\"}";
  const std::string broken = "{\"note\":\"a\xff\xc3z\"}";
  std::vector<Outcome> outcomes;
  std::string error;
  store.write_transaction([&](QSqlDatabase& db) {
    RecordInsert insert(db, store.path(), GetParam());
    EXPECT_EQ(insert.binds_directly(), GetParam() == Binding::fastest);
    outcomes.push_back(insert.insert("r1", {1, "local", 0, "note", accented}));
    outcomes.push_back(insert.insert("r1", {2, "n\xe9", 1, "note\xff", broken}));
    outcomes.push_back(insert.insert("r1", {1, "local", 0, "note", "{\"again\":1}"}));
    outcomes.push_back(insert.insert("no-such-run", {1, "local", 0, "note", "{}"}));
    error = insert.error();
  });
  EXPECT_EQ(outcomes, (std::vector<Outcome>{Outcome::inserted, Outcome::inserted,
                                            Outcome::seen_before, Outcome::failed}));
  EXPECT_NE(error.find("FOREIGN KEY"), std::string::npos) << error;
  const auto rows = store.records("r1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].body, accented);
  EXPECT_EQ(rows[1].node, "n\xef\xbf\xbd");
  EXPECT_EQ(rows[1].rank, 1);
  EXPECT_EQ(rows[1].type, "note\xef\xbf\xbd");
  EXPECT_EQ(rows[1].body, "{\"note\":\"a\xef\xbf\xbd\xef\xbf\xbdz\"}");
}

INSTANTIATE_TEST_SUITE_P(Bindings, RecordInsertBinding,
                         ::testing::Values(Binding::fastest, Binding::qt),
                         [](const ::testing::TestParamInfo<Binding>& info) {
                           return info.param == Binding::fastest ? std::string("SqlitesOwn")
                                                                 : std::string("QtSql");
                         });

}  // namespace
}  // namespace flotilla::controller
