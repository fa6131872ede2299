// The store's one writer thread: batches of queued writes, each write all or
// nothing, and a database that refuses writes waited out without losing or
// reordering anything queued, in bounded memory (store.h says how).
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <set>
#include <thread>

#include "flotilla/controller/store.h"
#include "migrations.h"
#include "sql_query.h"
#include "store_buckets.h"
#include "store_insert.h"

namespace flotilla::controller {
namespace {

using Clock = std::chrono::steady_clock;

// Switching a file to WAL takes its exclusive lock, and SQLite answers BUSY
// at once, past its busy handler, where waiting could deadlock: two stores
// opening one new file together (the window and a CLI). WAL is kept in the
// file, so the first opener switches it and the others find it switched;
// until then they try again, for as long as the busy timeout allows.
void use_wal(QSqlDatabase& db, const QString& path, std::chrono::milliseconds busy_timeout) {
  const auto give_up = Clock::now() + busy_timeout;
  for (auto pause = std::chrono::milliseconds(1);;
       pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    try {
      SqlQuery mode(db, path);
      if (mode.run("PRAGMA journal_mode").next() && mode.at(0).toString() == "wal") return;
      mode.run("PRAGMA journal_mode = WAL");
      return;
    } catch (const DatabaseRefused&) {
      if (Clock::now() >= give_up) throw;
      std::this_thread::sleep_for(pause);
    }
  }
}

// WAL, so that readers never wait for the writer; NORMAL sync, which WAL
// keeps safe; foreign keys, which SQLite leaves off unless asked.
void open_writer(QSqlDatabase& db, const QString& path, std::chrono::milliseconds busy_timeout) {
  open_connection(db, path, false, busy_timeout);
  use_wal(db, path, busy_timeout);
  SqlQuery pragmas(db, path);
  pragmas.run("PRAGMA synchronous = NORMAL");
  pragmas.run("PRAGMA foreign_keys = ON");
}

std::string seconds_text(std::chrono::milliseconds ms) {
  return QString::number(ms.count() / 1000.0, 'g', 3).toStdString() + " s";
}

std::string joined(const std::set<std::string>& runs) {
  std::string text;
  for (const auto& run : runs) text += (text.empty() ? "" : ", ") + run;
  return text;
}

}  // namespace

void Store::release_locked(const Item& item) {
  if (!std::holds_alternative<QueuedRecord>(item.what)) return;
  --use_.records;
  use_.bytes -= item.bytes;
}

bool Store::has_room_locked(int64_t bytes) const {
  // One record always fits, however long: the queue is never stuck.
  return use_.records == 0 || (use_.records < options_.queue_limit_records &&
                               use_.bytes + bytes <= options_.queue_limit_bytes);
}

bool Store::append_record(const std::string& run, RecordRow record) {
  check_writable();
  const int64_t bytes = static_cast<int64_t>(sizeof(Item) + run.size() + record.node.size() +
                                             record.type.size() + record.body.size());
  {
    std::unique_lock lock(mutex_);
    const auto key = std::make_pair(run, record.node);
    if (auto gap = gaps_.find(key); gap != gaps_.end()) {
      // Its records come again from the agent's spool: until they are asked
      // for, and then ahead of the next one asked for, they are let go.
      if (!gap->second.refetch_asked || record.seq > gap->second.next_seq) {
        ++use_.dropped;
        return false;
      }
      if (record.seq == gap->second.next_seq) ++gap->second.next_seq;
    }
    const auto can_drop = [&] { return refused_ && refetch_listener_count_ > 0; };
    room_.wait(lock, [&] { return stopping_ || can_drop() || has_room_locked(bytes); });
    if (!has_room_locked(bytes)) {
      // Let go of: the agent's spool holds it, and everything queued before
      // it is stored before it is asked for again.
      gaps_[key] = Gap{items_queued_, false, 0};
      ++use_.dropped;
      return false;
    }
    queue_.push_back({QueuedRecord{run, std::move(record)}, nullptr, {}, bytes});
    ++items_queued_;
    ++use_.records;
    use_.bytes += bytes;
    use_.peak_records = std::max(use_.peak_records, use_.records);
    use_.peak_bytes = std::max(use_.peak_bytes, use_.bytes);
  }
  queued_.notify_one();
  return true;
}

StoreQueueUse Store::queue_use() const {
  std::lock_guard lock(mutex_);
  return use_;
}

int Store::add_refetch_listener(RefetchListener listener) {
  std::lock_guard lock(listeners_mutex_);
  refetch_listeners_[next_listener_] = std::move(listener);
  ++refetch_listener_count_;
  return next_listener_++;
}

void Store::remove_refetch_listener(int id) {
  std::lock_guard lock(listeners_mutex_);
  refetch_listener_count_ -= static_cast<int>(refetch_listeners_.erase(id));
}

void Store::ask_for_refetches(QSqlDatabase& db) {
  std::vector<std::pair<std::string, std::string>> ready;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, gap] : gaps_)
      if (!gap.refetch_asked && gap.ready_after_item <= items_done_) ready.push_back(key);
  }
  if (ready.empty()) return;
  // This thread is the only writer: what it reads here stays the last
  // stored record until it commits again.
  std::vector<RefetchRequest> requests;
  for (const auto& [run, node] : ready) {
    SqlQuery q(db, path_);
    q.run("SELECT COALESCE(MAX(seq), 0) FROM records WHERE run_id = ? AND node = ?",
          {QString::fromStdString(run), QString::fromStdString(node)});
    requests.push_back({run, node, q.next() ? q.at(0).toLongLong() : int64_t{0}});
  }
  {
    std::lock_guard lock(mutex_);
    for (const auto& r : requests) {
      auto& gap = gaps_[{r.run, r.node}];
      gap.refetch_asked = true;
      gap.next_seq = r.after_seq + 1;
    }
  }
  std::lock_guard lock(listeners_mutex_);
  for (const auto& r : requests)
    for (auto& [id, listener] : refetch_listeners_) listener(r);
}

void Store::flush() {
  write_and_wait([](QSqlDatabase&) {});
}

void Store::write_and_wait(Write write) {
  check_writable();
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(write), done, {}, 0});
    // Counted as records are: items_done_ counts every item, and a gap is
    // ready only once everything queued before it is done.
    ++items_queued_;
  }
  queued_.notify_one();
  future.get();
}

int Store::add_problem_listener(ProblemListener listener) {
  std::lock_guard lock(listeners_mutex_);
  listeners_[next_listener_] = std::move(listener);
  return next_listener_++;
}

void Store::remove_problem_listener(int id) {
  std::lock_guard lock(listeners_mutex_);
  listeners_.erase(id);
}

void Store::report(const StoreProblem& problem) {
  std::lock_guard lock(listeners_mutex_);
  if (listeners_.empty()) std::cerr << "flotilla: " << problem.message << std::endl;
  for (auto& [id, listener] : listeners_) listener(problem);
}

std::string Store::commit(QSqlDatabase& db, const StepNumberReader& step_numbers,
                          std::deque<Item>& batch, std::vector<std::exception_ptr>& errors) {
  SqlQuery transaction(db, path_);
  try {
    transaction.run("BEGIN IMMEDIATE");
    StepBucketBatch buckets(db, path_, step_numbers);
    RecordInsert insert(db, path_);
    for (size_t i = 0; i < batch.size(); ++i) {
      errors[i] = nullptr;
      if (auto* r = std::get_if<QueuedRecord>(&batch[i].what)) {
        switch (insert.insert(r->run, r->record)) {
          case RecordInsert::Outcome::inserted:
            buckets.add(r->run, r->record.rank, r->record.type, r->record.body);
            break;
          case RecordInsert::Outcome::seen_before:  // in its buckets already
            break;
          case RecordInsert::Outcome::failed:
            // The record's own fault (no such run): no retry would store it.
            errors[i] = std::make_exception_ptr(
                StoreError("record " + r->run + "#" + std::to_string(r->record.seq) + " of node " +
                           r->record.node + " cannot be stored in " + path_.toStdString() + ": " +
                           insert.error()));
            break;
        }
        continue;
      }
      // The buckets so far are stored first: the write may read them, or
      // delete a run and its buckets.
      buckets.flush();
      // A write of several statements is undone alone when it fails.
      transaction.run("SAVEPOINT queued_write");
      try {
        std::get<Write>(batch[i].what)(db);
        transaction.run("RELEASE queued_write");
      } catch (const DatabaseRefused&) {
        throw;
      } catch (...) {
        errors[i] = std::current_exception();
        transaction.run("ROLLBACK TO queued_write");
        transaction.run("RELEASE queued_write");
      }
    }
    buckets.flush();
    transaction.run("COMMIT");
    return {};
  } catch (const std::exception& e) {
    // SQLite may have rolled back already (a full disk, an I/O error).
    QSqlQuery(db).exec("ROLLBACK");
    return e.what();
  }
}

void Store::writer_loop() {
  struct Remove {
    QString name;
    ~Remove() { QSqlDatabase::removeDatabase(name); }
  } remove{writer_connection_};
  QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", writer_connection_);
  std::optional<StepNumberReader> step_numbers;
  try {
    open_writer(db, path_, options_.busy_timeout);
    migrate(db);
    step_numbers.emplace(step_bucket_fields(db));
  } catch (const std::exception& e) {
    open_error_ = e.what();
    writer_ready_.set_value();
    return;
  }
  writer_ready_.set_value();

  bool refused = false;  // the database refuses writes, since `refused_since`
  Clock::time_point refused_since{};
  int64_t dropped_before_refusal = 0;  // records let go of past the limit before it
  // Said once a refusal, however often it is retried and whichever statement
  // of the batch SQLite refuses each time (the words differ).
  bool refusal_reported = false;
  for (;;) {
    std::deque<Item> batch;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and everything is committed
      batch.swap(queue_);
      stopping = stopping_;
    }
    std::vector<std::exception_ptr> errors(batch.size());
    const std::string refusal = commit(db, *step_numbers, batch, errors);
    if (refusal.empty()) {
      ++commits_;
      {
        std::lock_guard lock(mutex_);
        for (const auto& item : batch) release_locked(item);
        items_done_ += static_cast<int64_t>(batch.size());
        refused_ = false;
      }
      room_.notify_all();
      for (size_t i = 0; i < batch.size(); ++i) {
        if (batch[i].done) {
          if (errors[i])
            batch[i].done->set_exception(errors[i]);
          else
            batch[i].done->set_value();
        } else if (errors[i]) {
          try {
            std::rethrow_exception(errors[i]);
          } catch (const std::exception& e) {
            report({e.what(), {std::get<QueuedRecord>(batch[i].what).run}, false});
          }
        }
      }
      if (refused && refusal_reported) {
        const int64_t let_go = queue_use().dropped - dropped_before_refusal;
        report({"database " + path_.toStdString() +
                    " takes writes again: every record that waited is stored" +
                    (let_go > 0 ? "; " + std::to_string(let_go) +
                                      " record(s) let go of past the queue's limit are fetched "
                                      "again from the agents' spools"
                                : std::string()),
                {},
                true});
      }
      refused = false;
      refusal_reported = false;
      ask_for_refetches(db);
      continue;
    }

    // Refused: nothing of the batch is stored. It goes back to the front of
    // the queue, in order, except the waited-for writes that are out of
    // patience, whose callers get the error.
    const auto now = Clock::now();
    if (!refused) {
      refused_since = now;
      dropped_before_refusal = queue_use().dropped;
    }
    refused = true;
    const bool closing_out_of_patience = stopping && now - refused_since >= options_.write_patience;
    std::deque<Item> kept;
    std::set<std::string> runs;
    int64_t records = 0, given_up = 0;
    for (auto& item : batch) {
      if (item.refused_since == Clock::time_point{}) item.refused_since = now;
      if (item.done && now - item.refused_since >= options_.write_patience) {
        item.done->set_exception(std::make_exception_ptr(
            StoreError(refusal + "; gave up after " + seconds_text(options_.write_patience))));
        ++given_up;
        continue;
      }
      if (const auto* r = std::get_if<QueuedRecord>(&item.what)) {
        runs.insert(r->run);
        ++records;
      }
      kept.push_back(std::move(item));
    }
    {
      std::lock_guard lock(mutex_);
      items_done_ += given_up;
      refused_ = true;
      if (closing_out_of_patience) {
        for (const auto& item : kept) release_locked(item);
        items_done_ += static_cast<int64_t>(kept.size());
      }
      // Records past the limit are let go of from now on (and ones waiting
      // for room are), so that they are counted here too.
      for (const auto& [key, gap] : gaps_)
        if (!gap.refetch_asked) runs.insert(key.first);
    }
    room_.notify_all();
    if (closing_out_of_patience) {
      // The store is closing: what the database never took is said, not kept.
      if (records > 0 || !runs.empty())
        report({"database " + path_.toStdString() + " still refuses writes as it closes (" +
                    refusal + "): " + std::to_string(records) + " record(s) of run(s) " +
                    joined(runs) +
                    " (and any let go of past the queue's limit) are not stored; they remain in "
                    "the agents' spools, from where "
                    "`flotilla attach` fetches them while a run is live",
                {runs.begin(), runs.end()},
                false});
      continue;
    }
    if (!refusal_reported && records > 0) {
      refusal_reported = true;
      report({"database " + path_.toStdString() + " refuses writes (" + refusal + "); " +
                  std::to_string(records) + " record(s) of run(s) " + joined(runs) +
                  " wait in the queue and are tried again every " +
                  seconds_text(options_.retry_interval) + " (past " +
                  std::to_string(options_.queue_limit_records) + " records or " +
                  std::to_string(options_.queue_limit_bytes >> 20) +
                  " MiB, records are let go of here and fetched again from the agents' spools "
                  "once it takes writes)",
              {runs.begin(), runs.end()},
              false});
    }
    {
      std::lock_guard lock(mutex_);
      queue_.insert(queue_.begin(), std::make_move_iterator(kept.begin()),
                    std::make_move_iterator(kept.end()));
    }
    // A file made writable again is only written through a new connection.
    db.close();
    try {
      open_writer(db, path_, options_.busy_timeout);
    } catch (const std::exception&) {
      // Still refused: the next try says so.
    }
    std::this_thread::sleep_for(options_.retry_interval);
  }
  db.close();
}

}  // namespace flotilla::controller
