// A database file that is damaged, cut short or not a database at all is
// refused with a message naming the file, by the CLI's store (read-write)
// and the window's (read-only) alike, and the file is left byte for byte as
// it was: nothing Flotilla does may make a damaged database worse.
#include <gtest/gtest.h>

#include <QSqlDatabase>
#include <QSqlQuery>
#include <filesystem>
#include <fstream>
#include <random>

#include "flotilla/controller/store.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A real database of this Flotilla with a run and 400 records, checkpointed
// into its one file, as a database looks between commands.
std::string healthy_database(const TempDir& dir) {
  const fs::path file = dir.path() / "healthy.db";
  {
    Store store(QString::fromStdString(file.string()));
    RunRow run;
    run.id = "r1";
    run.experiment_name = "exp";
    run.config_json = "{}";
    run.nodes = {"local"};
    run.created_ms = now_ms();
    store.create_run(run);
    const std::string pad(300, 'p');
    for (int64_t seq = 1; seq <= 400; ++seq)
      store.append_record("r1", {seq, "local", 0, "step", "{\"pad\":\"" + pad + "\"}"});
    store.flush();
  }
  {
    auto db = QSqlDatabase::addDatabase("QSQLITE", "checkpoint");
    db.setDatabaseName(QString::fromStdString(file.string()));
    EXPECT_TRUE(db.open());
    EXPECT_TRUE(QSqlQuery(db).exec("PRAGMA wal_checkpoint(TRUNCATE)"));
    db.close();
  }
  QSqlDatabase::removeDatabase("checkpoint");
  fs::remove(file.string() + "-wal");
  fs::remove(file.string() + "-shm");
  return bytes_of(file);
}

struct Damage {
  const char* name;
  // The damaged file's bytes, made from a healthy database's.
  std::string (*make)(const std::string& healthy);
  const char* said;  // words the refusal must hold
};

std::string random_bytes(const std::string&) {
  std::mt19937 random(15);
  std::string bytes(8192, '\0');
  for (auto& b : bytes) b = static_cast<char>(random());
  return bytes;
}

const Damage kDamages[] = {
    {"random_bytes", random_bytes, "is not a SQLite database"},
    {"a_yaml_file_given_by_mistake",
     [](const std::string&) { return std::string("name: mnist\nmodel: small_cnn\n"); },
     "is not a SQLite database"},
    {"cut_to_one_byte", [](const std::string& h) { return h.substr(0, 1); }, "is truncated"},
    {"cut_inside_the_header", [](const std::string& h) { return h.substr(0, 50); }, "is truncated"},
    {"cut_to_its_first_page", [](const std::string& h) { return h.substr(0, 4096); },
     "is truncated"},
    {"cut_to_half_its_pages",
     [](const std::string& h) { return h.substr(0, h.size() / 2 / 4096 * 4096); }, "is truncated"},
    {"cut_inside_its_last_page", [](const std::string& h) { return h.substr(0, h.size() - 1); },
     "is truncated"},
    {"schema_page_overwritten",
     [](const std::string& h) {
       std::string bytes = h;
       for (size_t i = 100; i < 4096; ++i) bytes[i] = static_cast<char>(0xA5);
       return bytes;
     },
     "malformed"},
};

struct Case {
  Damage damage;
  StoreAccess access;
};

// How a failure prints the case.
void PrintTo(const Case& c, std::ostream* out) {
  *out << c.damage.name << (c.access == StoreAccess::read_only ? " (read-only)" : " (read-write)");
}

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.damage.name) +
         (info.param.access == StoreAccess::read_only ? "_ReadOnly" : "_ReadWrite");
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const auto& damage : kDamages)
    for (auto access : {StoreAccess::read_write, StoreAccess::read_only})
      all.push_back({damage, access});
  return all;
}

class DamagedDatabase : public ::testing::TestWithParam<Case> {};

TEST_P(DamagedDatabase, IsRefusedNamingTheFileAndLeftByteForByteAsItWas) {
  TempDir dir;
  const std::string healthy = healthy_database(dir);
  ASSERT_GT(healthy.size(), 8u * 4096) << "the healthy database is smaller than expected";
  const fs::path file = dir.path() / "flotilla.db";
  const std::string damaged = GetParam().damage.make(healthy);
  write_bytes(file, damaged);
  try {
    Store store(QString::fromStdString(file.string()), GetParam().access);
    FAIL() << "a damaged database was opened";
  } catch (const StoreError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    EXPECT_NE(message.find(GetParam().damage.said), std::string::npos) << message;
    EXPECT_NE(message.find("left the file as it is"), std::string::npos) << message;
  }
  EXPECT_TRUE(bytes_of(file) == damaged) << "the damaged file was changed";
  // A read-only connection to a database in WAL mode may leave an empty log
  // beside it (it may not remove one another process could be using); no
  // page of the damaged file is in it.
  const fs::path wal = file.string() + "-wal";
  EXPECT_TRUE(!fs::exists(wal) || fs::file_size(wal) == 0);
  EXPECT_FALSE(fs::exists(file.string() + "-journal"));
}

INSTANTIATE_TEST_SUITE_P(Store, DamagedDatabase, ::testing::ValuesIn(cases()), name_of);

TEST(Store, TakesAnEmptyFileForANewDatabase) {
  TempDir dir;
  const auto file = dir.write("flotilla.db", "");
  Store store(QString::fromStdString(file.string()));
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
}

TEST(Store, OpensAHealthyDatabaseThatTheDamageChecksLookAt) {
  TempDir dir;
  const std::string healthy = healthy_database(dir);
  const fs::path file = dir.path() / "flotilla.db";
  write_bytes(file, healthy);
  EXPECT_EQ(
      Store(QString::fromStdString(file.string()), StoreAccess::read_only).records("r1").size(),
      400u);
  EXPECT_EQ(Store(QString::fromStdString(file.string())).records("r1").size(), 400u);
}

}  // namespace
}  // namespace flotilla::controller
