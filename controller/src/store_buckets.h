#pragma once
// The step buckets (table step_buckets, migration 0004), kept by the store's
// writer as it stores records. A trigger kept them until migration 0007: its
// SQL extracted some 60 JSON paths and ran a 150-column upsert for every step
// record, most of the writer's time. The writer now reads each step record's
// numbers once in C++ and upserts each bucket once a batch, storing exactly
// what the trigger stored (tests/unit/controller_store_buckets_test.cpp
// compares the two):
//  - a record is bucketed when its type is "step", its body is valid JSON and
//    its top-level "step" is a number; bucket (CAST(step AS INTEGER) - 1) / 256
//    per run and rank;
//  - a field counts when its top-level value is a number (the first of a
//    repeated key, as SQLite's json_extract reads it); null, text, booleans,
//    objects and arrays do not;
//  - per field: lowest and highest, the sum (NULL only while the bucket's one
//    record lacks the field, as the trigger's coalesce left it) and the count.

#include <QSqlQuery>
#include <QString>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

class QSqlDatabase;

namespace flotilla::controller {

// A step record's numbers, one per field of step_buckets (in its column order).
struct StepNumbers {
  int64_t bucket = 0;
  std::vector<std::optional<double>> values;
};

// Reads the numbers of step records for the fields of step_buckets.
class StepNumberReader {
 public:
  explicit StepNumberReader(std::vector<std::string> fields);
  const std::vector<std::string>& fields() const { return fields_; }
  // The body's numbers when the body is valid JSON whose top-level "step" is
  // a number, else nullopt (the record is in no bucket).
  std::optional<StepNumbers> read(std::string_view body) const;

 private:
  std::vector<std::string> fields_;
  std::unordered_map<std::string, size_t> index_;
  size_t step_field_ = 0;
};

// The field names of step_buckets, from its columns (<field>_min, _max, _sum,
// _n after run_id, rank, bucket, records).
std::vector<std::string> step_bucket_fields(QSqlDatabase& db);

// One batch's buckets: records added as they are inserted, each bucket read
// once from the table and written back once by flush(). Lives inside the
// writer's transaction; whatever throws leaves the rollback to the writer.
class StepBucketBatch {
 public:
  StepBucketBatch(QSqlDatabase& db, const QString& path, const StepNumberReader& reader);
  // A record the writer has just inserted (not one ignored as seen before).
  void add(const std::string& run, int64_t rank, const std::string& type, const std::string& body);
  // Writes every bucket touched since the last flush.
  void flush();

 private:
  struct Field {
    std::optional<double> min, max, sum;
    int64_t count = 0;
  };
  struct Bucket {
    int64_t records = 0;
    std::vector<Field> fields;
  };
  using Key = std::tuple<std::string, int64_t, int64_t>;  // run, rank, bucket
  Bucket& bucket_of(const Key& key);
  static void add_numbers(Bucket& bucket, const StepNumbers& numbers);

  const QString& path_;
  const StepNumberReader& reader_;
  QSqlQuery select_, upsert_;
  std::map<Key, Bucket> pending_;
};

}  // namespace flotilla::controller
