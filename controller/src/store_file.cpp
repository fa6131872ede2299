#include "store_file.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "flotilla/controller/store.h"

namespace flotilla::controller {
namespace {

// SQLite's file header (https://www.sqlite.org/fileformat.html#the_database_header).
constexpr size_t kHeaderBytes = 100;
constexpr char kMagic[] = "SQLite format 3";  // and its terminating NUL: 16 bytes

uint32_t big_endian(const unsigned char* bytes, int count) {
  uint32_t value = 0;
  for (int i = 0; i < count; ++i) value = (value << 8) | bytes[i];
  return value;
}

std::string refusal(const QString& path, const std::string& what, const std::string& remedy) {
  return "database " + path.toStdString() + " " + what +
         "; Flotilla left the file as it is: " + remedy;
}

const char* kRestore = "restore it from a copy, or give another --db";

// The database files that Stores of this process have open, by their path
// with the folder's symbolic links resolved, and how many Stores each.
struct OpenFiles {
  std::mutex mutex;
  std::map<QString, int> stores;
};

OpenFiles& open_files() {
  static OpenFiles files;
  return files;
}

QString file_key(const QString& path) {
  const QFileInfo info(path);
  const QString folder = info.absoluteDir().canonicalPath();
  return folder.isEmpty() ? QDir::cleanPath(info.absoluteFilePath())
                          : folder + "/" + info.fileName();
}

}  // namespace

std::shared_ptr<void> claim_database_file(const QString& path) {
  auto& files = open_files();
  const QString key = file_key(path);
  std::lock_guard lock(files.mutex);
  // Checked under the lock: no Store of this process opens the file meanwhile.
  if (files.stores[key] == 0) {
    try {
      check_database_file(path);
    } catch (...) {
      files.stores.erase(key);
      throw;
    }
  }
  ++files.stores[key];
  return std::shared_ptr<void>(nullptr, [key](void*) {
    auto& files = open_files();
    std::lock_guard lock(files.mutex);
    if (--files.stores[key] == 0) files.stores.erase(key);
  });
}

void check_database_file(const QString& path) {
  const QFileInfo info(path);
  if (!info.exists() || !info.isFile() || info.size() == 0) return;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly))
    throw StoreError("cannot read database " + path.toStdString() + ": " +
                     file.errorString().toStdString());
  std::array<unsigned char, kHeaderBytes> header{};
  const qint64 read = file.read(reinterpret_cast<char*>(header.data()), header.size());
  const qint64 size = info.size();
  const size_t compared =
      std::min<size_t>(static_cast<size_t>(std::max<qint64>(read, 0)), sizeof kMagic);
  if (compared < sizeof kMagic && std::memcmp(header.data(), kMagic, compared) == 0)
    throw StoreError(refusal(path,
                             "is truncated: " + std::to_string(size) +
                                 " bytes, shorter than SQLite's header of " +
                                 std::to_string(kHeaderBytes),
                             kRestore));
  if (std::memcmp(header.data(), kMagic, sizeof kMagic) != 0)
    throw StoreError(refusal(path,
                             "is not a SQLite database (its first bytes are not SQLite's header)",
                             "move it away, or give another --db"));
  if (read < static_cast<qint64>(kHeaderBytes))
    throw StoreError(refusal(path,
                             "is truncated: " + std::to_string(size) +
                                 " bytes, shorter than SQLite's header of " +
                                 std::to_string(kHeaderBytes),
                             kRestore));
  const uint32_t page_field = big_endian(&header[16], 2);
  const int64_t page_size = page_field == 1 ? 65536 : page_field;
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0)
    throw StoreError(refusal(
        path,
        "is damaged: its header gives a page size of " + std::to_string(page_field) + " bytes",
        kRestore));
  if (size % page_size != 0)
    throw StoreError(refusal(path,
                             "is truncated: " + std::to_string(size) +
                                 " bytes are not a whole number of its " +
                                 std::to_string(page_size) + "-byte pages",
                             kRestore));
  // The header's page count holds when the change counter matches the
  // version it was written at. A write-ahead log beside the file may hold
  // pages not copied into it yet, so only a file without one is judged by it.
  const uint32_t pages = big_endian(&header[28], 4);
  const bool count_valid = pages > 0 && big_endian(&header[24], 4) == big_endian(&header[92], 4);
  const QFileInfo wal(path + "-wal");
  if (count_valid && !(wal.exists() && wal.size() > 0) && size < int64_t{pages} * page_size)
    throw StoreError(refusal(path,
                             "is truncated: its header counts " + std::to_string(pages) +
                                 " pages of " + std::to_string(page_size) + " bytes (" +
                                 std::to_string(int64_t{pages} * page_size) +
                                 " bytes), the file has " + std::to_string(size),
                             kRestore));
}

std::string with_damage_advice(const std::string& error) {
  // SQLite's words for SQLITE_CORRUPT and SQLITE_NOTADB; Qt passes on its text.
  const bool damaged = error.find("malformed") != std::string::npos ||
                       error.find("not a database") != std::string::npos;
  if (!damaged) return error;
  return error + "; Flotilla left the file as it is: " + kRestore;
}

}  // namespace flotilla::controller
