#include "sim/des/reference_event_queue.h"

#include "base/check.h"

namespace ddpscope::sim {

EventId ReferenceEventQueue::schedule(Nanos at, Callback fn) {
  DDPSCOPE_CHECK_MSG(at >= m_now, "EventQueue::schedule: time would go backwards");
  const EventId seq = m_nextSeq++;
  m_events.emplace(std::make_pair(at.count(), seq), std::move(fn));
  m_timeNsOfId.emplace(seq, at.count());
  return seq;
}

void ReferenceEventQueue::cancel(EventId id) {
  const auto it = m_timeNsOfId.find(id);
  if (it == m_timeNsOfId.end()) return;
  m_events.erase(std::make_pair(it->second, id));
  m_timeNsOfId.erase(it);
}

bool ReferenceEventQueue::runNext() {
  if (m_events.empty()) return false;
  auto it = m_events.begin();
  const auto [timeNs, seq] = it->first;
  Callback fn = std::move(it->second);
  m_events.erase(it);
  m_timeNsOfId.erase(seq);
  DDPSCOPE_CHECK(timeNs >= m_now.count());
  m_now = Nanos(timeNs);
  fn();
  return true;
}

int64_t ReferenceEventQueue::runAll() {
  int64_t ran = 0;
  while (runNext()) ++ran;
  return ran;
}

}  // namespace ddpscope::sim
