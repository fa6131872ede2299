#pragma once
// The step record that the run statistics and the compare tests build their
// runs from, so that both check the same arithmetic: 20 ms = data 2 +
// forward 6 + backward 8 + comm 3 + optimizer 1, with 12 ms of communication
// in all (9 of them hidden behind compute).

#include "flotilla/protocol/metric_records.h"

namespace flotilla::testing {

inline records::Step twenty_ms_step(int64_t rank, int64_t step) {
  records::Step s;
  s.rank = rank;
  s.step = step;
  s.data_ms = 2;
  s.forward_ms = 6;
  s.backward_ms = 8;
  s.comm_ms = 3;
  s.optimizer_ms = 1;
  s.step_ms = 20;
  s.comm_busy_ms = 12;
  return s;
}

}  // namespace flotilla::testing
