#include "store_buckets.h"

#include <QSqlDatabase>
#include <QSqlError>
#include <QVariant>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "flotilla/controller/store.h"
#include "sql_query.h"

namespace flotilla::controller {
namespace {

constexpr int64_t kLargest = std::numeric_limits<int64_t>::max();
constexpr int64_t kSmallest = std::numeric_limits<int64_t>::min();

// SQLite's CAST(x AS INTEGER) of a real: toward zero, clamped to 64 bits.
int64_t sqlite_integer_of(double x) {
  if (std::isnan(x)) return 0;
  if (x <= double(kSmallest)) return kSmallest;
  if (x >= double(kLargest)) return kLargest;
  return int64_t(x);
}

// (step - 1) / 256 as SQLite computes it: integer division toward zero; the
// one step whose "- 1" overflows is computed in reals, which lands on the
// same exact quotient.
int64_t bucket_of_step(int64_t step) {
  if (step == kSmallest) return kSmallest / kStepsPerBucket;
  return (step - 1) / kStepsPerBucket;
}

// The top-level members of a JSON object, first occurrence of a key only (as
// SQLite's json_extract finds it); fields named in `index` keep their value
// when it is a number. The parse goes to the end, as json_valid does.
class TopLevelNumbers {
 public:
  using json = nlohmann::json;
  TopLevelNumbers(const std::unordered_map<std::string, size_t>& index, size_t step_field,
                  StepNumbers& out, std::vector<bool>& seen)
      : index_(index), step_field_(step_field), out_(out), seen_(seen) {}

  bool object_at_top() const { return object_at_top_; }
  bool step_is_number() const { return step_is_number_; }

  bool null() { return scalar(); }
  bool boolean(bool) { return scalar(); }
  bool number_integer(json::number_integer_t v) {
    if (take(double(v))) integer_step(v);
    return true;
  }
  bool number_unsigned(json::number_unsigned_t v) {
    // Above the 64-bit range SQLite reads the integer as a real.
    if (take(double(v))) integer_step(v <= uint64_t(kLargest) ? int64_t(v) : kLargest);
    return true;
  }
  bool number_float(json::number_float_t v, const json::string_t&) {
    if (take(v)) integer_step(sqlite_integer_of(v));
    return true;
  }
  bool string(json::string_t&) { return scalar(); }
  bool binary(json::binary_t&) { return scalar(); }
  bool start_object(std::size_t) {
    if (depth_ == 0) object_at_top_ = true;
    scalar();
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    scalar();
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key(json::string_t& name) {
    field_ = kNone;
    if (depth_ != 1 || !object_at_top_) return true;
    const auto it = index_.find(name);
    if (it == index_.end() || seen_[it->second]) return true;
    seen_[it->second] = true;  // a repeated key is not read again
    field_ = it->second;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  // A value that is not a number: the pending field (if any) stays absent.
  bool scalar() {
    field_ = kNone;
    return true;
  }
  // Keeps a number for the pending field; whether that field is "step".
  bool take(double v) {
    if (field_ == kNone) return false;
    out_.values[field_] = v;
    const bool is_step = field_ == step_field_;
    field_ = kNone;
    return is_step;
  }
  void integer_step(int64_t step) {
    step_is_number_ = true;
    out_.bucket = bucket_of_step(step);
  }

  const std::unordered_map<std::string, size_t>& index_;
  size_t step_field_;
  StepNumbers& out_;
  std::vector<bool>& seen_;
  int depth_ = 0;
  bool object_at_top_ = false;
  bool step_is_number_ = false;
  size_t field_ = kNone;
};

QSqlQuery prepared(QSqlDatabase& db, const QString& path, const QString& sql) {
  QSqlQuery query(db);
  if (!query.prepare(sql)) {
    const std::string message =
        "database " + path.toStdString() +
        ": preparing the step buckets' statement: " + query.lastError().text().toStdString();
    if (refuses_writes(query.lastError())) throw DatabaseRefused(message);
    throw StoreError(message);
  }
  return query;
}

void run(QSqlQuery& query, const QString& path) {
  if (query.exec()) return;
  const std::string message = "database " + path.toStdString() + ": storing the step buckets: " +
                              query.lastError().text().toStdString();
  if (refuses_writes(query.lastError())) throw DatabaseRefused(message);
  throw StoreError(message);
}

QVariant value_or_null(const std::optional<double>& v) {
  return v ? QVariant(*v) : QVariant();
}

std::optional<double> optional_double(const QVariant& v) {
  if (v.isNull()) return std::nullopt;
  return v.toDouble();
}

// SQLite's arithmetic: a NaN result is NULL.
std::optional<double> sqlite_sum(double a, double b) {
  const double sum = a + b;
  if (std::isnan(sum)) return std::nullopt;
  return sum;
}

}  // namespace

StepNumberReader::StepNumberReader(std::vector<std::string> fields) : fields_(std::move(fields)) {
  for (size_t i = 0; i < fields_.size(); ++i) index_.emplace(fields_[i], i);
  const auto step = index_.find("step");
  if (step == index_.end())
    throw StoreError("the table step_buckets has no step column (migration 0004)");
  step_field_ = step->second;
}

std::optional<StepNumbers> StepNumberReader::read(std::string_view body) const {
  StepNumbers numbers;
  numbers.values.resize(fields_.size());
  std::vector<bool> seen(fields_.size(), false);
  TopLevelNumbers handler(index_, step_field_, numbers, seen);
  if (!nlohmann::json::sax_parse(body.begin(), body.end(), &handler)) return std::nullopt;
  if (!handler.object_at_top() || !handler.step_is_number()) return std::nullopt;
  return numbers;
}

std::vector<std::string> step_bucket_fields(QSqlDatabase& db) {
  QSqlQuery columns(db);
  if (!columns.exec("SELECT name FROM pragma_table_info('step_buckets') ORDER BY cid"))
    throw StoreError("reading the columns of step_buckets: " +
                     columns.lastError().text().toStdString());
  std::vector<std::string> fields;
  while (columns.next()) {
    const QString name = columns.value(0).toString();
    if (name.endsWith("_min")) fields.push_back(name.chopped(4).toStdString());
  }
  return fields;
}

StepBucketBatch::StepBucketBatch(QSqlDatabase& db, const QString& path,
                                 const StepNumberReader& reader)
    : path_(path), reader_(reader) {
  QString columns = "records", placeholders = "?, ?, ?, ?", updates = "records = excluded.records";
  for (const auto& field : reader_.fields()) {
    for (const char* part : {"_min", "_max", "_sum", "_n"}) {
      const QString column = QString::fromStdString(field) + part;
      columns += ", " + column;
      placeholders += ", ?";
      updates += ", " + column + " = excluded." + column;
    }
  }
  select_ = prepared(
      db, path_,
      "SELECT " + columns + " FROM step_buckets WHERE run_id = ? AND rank = ? AND bucket = ?");
  upsert_ =
      prepared(db, path_,
               "INSERT INTO step_buckets (run_id, rank, bucket, " + columns + ") VALUES (" +
                   placeholders + ") ON CONFLICT (run_id, rank, bucket) DO UPDATE SET " + updates);
}

void StepBucketBatch::add(const std::string& run, int64_t rank, const std::string& type,
                          const std::string& body) {
  if (type != "step") return;
  auto numbers = reader_.read(body);
  if (!numbers) {
    // The trigger read the stored text, in which QString's decoding has
    // replaced bytes that are not UTF-8; a body that fails to parse is read
    // again as stored (bodies that parse are unchanged by the round trip).
    const QByteArray stored = QString::fromStdString(body).toUtf8();
    if (std::string_view(stored.constData(), size_t(stored.size())) == body) return;
    numbers = reader_.read(std::string_view(stored.constData(), size_t(stored.size())));
    if (!numbers) return;
  }
  add_numbers(bucket_of({run, rank, numbers->bucket}), *numbers);
}

StepBucketBatch::Bucket& StepBucketBatch::bucket_of(const Key& key) {
  if (const auto it = pending_.find(key); it != pending_.end()) return it->second;
  Bucket bucket;
  bucket.fields.resize(reader_.fields().size());
  select_.addBindValue(QString::fromStdString(std::get<0>(key)));
  select_.addBindValue(QVariant::fromValue<qlonglong>(std::get<1>(key)));
  select_.addBindValue(QVariant::fromValue<qlonglong>(std::get<2>(key)));
  run(select_, path_);
  if (select_.next()) {
    bucket.records = select_.value(0).toLongLong();
    for (size_t f = 0; f < bucket.fields.size(); ++f) {
      const int c = 1 + 4 * int(f);
      bucket.fields[f] = {optional_double(select_.value(c)), optional_double(select_.value(c + 1)),
                          optional_double(select_.value(c + 2)), select_.value(c + 3).toLongLong()};
    }
  }
  select_.finish();
  return pending_.emplace(key, std::move(bucket)).first->second;
}

// One record joins its bucket as the trigger's upsert had it join.
void StepBucketBatch::add_numbers(Bucket& bucket, const StepNumbers& numbers) {
  const bool first = bucket.records == 0;
  ++bucket.records;
  for (size_t f = 0; f < bucket.fields.size(); ++f) {
    Field& field = bucket.fields[f];
    const std::optional<double>& v = numbers.values[f];
    if (first) {
      field = {v, v, v, v ? 1 : 0};
      continue;
    }
    if (v) {
      // SQLite's min(a, b) is NULL when a is; of equal values it returns b.
      if (field.count == 0) {
        field.min = field.max = v;
      } else {
        if (field.min) field.min = *v <= *field.min ? *v : *field.min;
        if (field.max) field.max = *v > *field.max ? *v : *field.max;
      }
      ++field.count;
    }
    field.sum = sqlite_sum(field.sum.value_or(0), v.value_or(0));
  }
}

void StepBucketBatch::flush() {
  for (const auto& [key, bucket] : pending_) {
    upsert_.addBindValue(QString::fromStdString(std::get<0>(key)));
    upsert_.addBindValue(QVariant::fromValue<qlonglong>(std::get<1>(key)));
    upsert_.addBindValue(QVariant::fromValue<qlonglong>(std::get<2>(key)));
    upsert_.addBindValue(QVariant::fromValue<qlonglong>(bucket.records));
    for (const Field& field : bucket.fields) {
      upsert_.addBindValue(value_or_null(field.min));
      upsert_.addBindValue(value_or_null(field.max));
      upsert_.addBindValue(value_or_null(field.sum));
      upsert_.addBindValue(QVariant::fromValue<qlonglong>(field.count));
    }
    run(upsert_, path_);
  }
  pending_.clear();
}

}  // namespace flotilla::controller
