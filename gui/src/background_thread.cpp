#include "background_thread.h"

#include <QThread>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace flotilla::gui {

void start_below_the_window(QThread& thread, const char* name) {
  thread.setObjectName(QString::fromLatin1(name));
  // On Linux a nice value belongs to a thread (setpriority(2), "Bugs"), and
  // QThread's own priorities do nothing under SCHED_OTHER except IdlePriority,
  // whose SCHED_IDLE would starve a loader whenever the ranks run.
  QObject::connect(
      &thread, &QThread::started, &thread,
      [] {
        const id_t self = id_t(::gettid());
        errno = 0;
        const int own = ::getpriority(PRIO_PROCESS, self);
        if (errno == 0) (void)::setpriority(PRIO_PROCESS, self, std::min(19, own + kNicer));
      },
      Qt::DirectConnection);
  thread.start();
}

}  // namespace flotilla::gui
