#include "runtime/comm_thread.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace ddpscope::runtime {

Nanos CollectiveBackend::now() const {
  return steadyNow();
}

void CollectiveBackend::abort(int exitCode) {
  std::_Exit(exitCode);
}

namespace {

std::string describe(const CommTag& tag) {
  std::string text = tag.name.empty() ? std::string("collective") : tag.name;
  if (tag.bucket >= 0) text += " of bucket " + std::to_string(tag.bucket);
  if (tag.iteration > 0) text += " in iteration " + std::to_string(tag.iteration);
  return text;
}

// How long a wait for a collective may take, shared by one communicator's works. After the
// first wait that timed out, the ranks no longer agree on the collective sequence (a peer died or
// stopped): a wait for any other unfinished work fails at once instead of taking a timeout of its
// own (as the NCCL watchdog's abort fails every later wait). Otherwise a rank tearing down after
// a timeout waited one more timeout per outstanding bucket before it could end the job.
class WaitPolicy {
 public:
  // A new timeout starts afresh: waits take it again, whatever timed out before.
  void setTimeout(Nanos timeout) {
    m_timeoutNs.store(timeout.count());
    std::lock_guard lock(m_mutex);
    m_firstTimeout.clear();
  }
  std::chrono::nanoseconds timeout() const { return std::chrono::nanoseconds(m_timeoutNs.load()); }
  // The first timeout's message, or "" while none has happened.
  std::string expired() const {
    std::lock_guard lock(m_mutex);
    return m_firstTimeout;
  }
  void expire(const std::string& message) {
    std::lock_guard lock(m_mutex);
    if (m_firstTimeout.empty()) m_firstTimeout = message;
  }

 private:
  std::atomic<int64_t> m_timeoutNs{Nanos::fromSeconds(60).count()};
  mutable std::mutex m_mutex;
  std::string m_firstTimeout;
};

// One queued collective and its completion state.
class QueuedWork final : public CommWork {
 public:
  QueuedWork(CommTag tag, int64_t bytes, std::function<Status(CollectiveBackend&)> run,
             WaitPolicy* policy, int rank)
      : m_tag(std::move(tag)),
        m_bytes(bytes),
        m_run(std::move(run)),
        m_policy(policy),
        m_rank(rank) {}

  Status wait() override {
    const std::string earlier = m_policy->expired();
    const auto timeout = earlier.empty() ? m_policy->timeout() : std::chrono::nanoseconds(0);
    std::unique_lock lock(m_mutex);
    if (m_cv.wait_for(lock, timeout, [&] { return m_done; })) return m_status;
    if (!earlier.empty()) {
      return unavailable("rank " + std::to_string(m_rank) + ": the " + describe(m_tag) +
                         " cannot complete after an earlier collective timed out (" + earlier +
                         ")");
    }
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", static_cast<double>(timeout.count()) / 1e9);
    Status status = unavailable("rank " + std::to_string(m_rank) + ": timed out after " + seconds +
                                " s waiting for the " + describe(m_tag) +
                                ": a peer rank died or stopped making progress (collective "
                                "timeout)");
    m_policy->expire(status.message());
    return status;
  }
  bool test() override {
    std::lock_guard lock(m_mutex);
    return m_done;
  }
  Nanos startTime() const override {
    std::lock_guard lock(m_mutex);
    return m_start;
  }
  Nanos endTime() const override {
    std::lock_guard lock(m_mutex);
    return m_end;
  }

  // Comm thread only. `returned` runs when the backend call has returned, before the work
  // completes (so a waiter never sees the work done while it is still reported in flight).
  void execute(CollectiveBackend& backend, const Status& brokenBy, CommObserver* observer,
               const std::function<void()>& returned = {}) {
    const Nanos start = backend.now();
    Status status = brokenBy.isOk() ? m_run(backend)
                                    : unavailable(
                                          "communicator unusable after an earlier "
                                          "failure: " +
                                          brokenBy.message());
    const Nanos end = backend.now();
    if (returned) returned();
    if (!status.isOk() && brokenBy.isOk()) status = status.withContext(describe(m_tag));
    if (observer && m_tag.record && status.isOk())
      observer->onCollective(m_tag, m_bytes, start, end);
    {
      std::lock_guard lock(m_mutex);
      m_start = start;
      m_end = end;
      m_status = status;
      m_done = true;
    }
    m_cv.notify_all();
  }
  Status status() const {
    std::lock_guard lock(m_mutex);
    return m_status;
  }
  const CommTag& tag() const { return m_tag; }

 private:
  CommTag m_tag;
  int64_t m_bytes;
  std::function<Status(CollectiveBackend&)> m_run;
  WaitPolicy* m_policy;
  int m_rank;
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_done = false;
  Status m_status;
  Nanos m_start;
  Nanos m_end;
};

class ThreadedCommunicator final : public Communicator {
 public:
  explicit ThreadedCommunicator(std::unique_ptr<CollectiveBackend> backend)
      : m_backend(std::move(backend)) {
    m_thread = std::thread([this] { loop(); });
  }
  ~ThreadedCommunicator() override {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
  }

  int rank() const override { return m_backend->rank(); }
  int worldSize() const override { return m_backend->worldSize(); }
  std::string backendName() const override { return m_backend->name(); }
  Nanos now() const override { return m_backend->now(); }

  CommWorkPtr allreduceAsync(std::span<float> data, CommTag tag) override {
    return enqueue(
        std::move(tag), static_cast<int64_t>(data.size_bytes()), [data](CollectiveBackend& b) {
          return b.allreduceSum(data.data(), static_cast<int64_t>(data.size()), DataKind::kFloat32);
        });
  }
  CommWorkPtr allreduceAsync(std::span<int32_t> data, CommTag tag) override {
    return enqueue(
        std::move(tag), static_cast<int64_t>(data.size_bytes()), [data](CollectiveBackend& b) {
          return b.allreduceSum(data.data(), static_cast<int64_t>(data.size()), DataKind::kInt32);
        });
  }
  CommWorkPtr broadcastAsync(std::span<std::byte> data, int root, CommTag tag) override {
    return enqueue(std::move(tag), static_cast<int64_t>(data.size()),
                   [data, root](CollectiveBackend& b) {
                     return b.broadcast(data.data(), static_cast<int64_t>(data.size()), root);
                   });
  }
  CommWorkPtr allgatherAsync(std::span<const std::byte> send, std::span<std::byte> recv,
                             CommTag tag) override {
    if (recv.size() != send.size() * static_cast<size_t>(worldSize())) {
      return failedWork(invalidArgument("allgather: receive buffer holds " +
                                        std::to_string(recv.size()) + " bytes, expected " +
                                        std::to_string(send.size() * worldSize())));
    }
    return enqueue(
        std::move(tag), static_cast<int64_t>(recv.size()), [send, recv](CollectiveBackend& b) {
          return b.allgather(send.data(), static_cast<int64_t>(send.size()), recv.data());
        });
  }
  Status gatherv(std::span<const std::byte> send, int root,
                 std::vector<std::vector<std::byte>>* out, CommTag tag) override {
    return enqueue(std::move(tag), static_cast<int64_t>(send.size()),
                   [send, root, out](CollectiveBackend& b) { return b.gatherv(send, root, out); })
        ->wait();
  }
  CommWorkPtr barrierAsync(CommTag tag) override {
    return enqueue(std::move(tag), 0, [](CollectiveBackend& b) { return b.barrier(); });
  }

  void setObserver(CommObserver* observer) override {
    std::lock_guard lock(m_mutex);
    m_observer = observer;
  }
  void setTimeout(Nanos timeout) override { m_waitPolicy.setTimeout(timeout); }
  std::optional<std::string> inFlight() const override {
    std::lock_guard lock(m_mutex);
    return m_inFlight;
  }
  [[noreturn]] void abort(int exitCode) override {
    m_backend->abort(exitCode);
    std::_Exit(exitCode);  // not reached: backends do not return
  }

 private:
  CommWorkPtr enqueue(CommTag tag, int64_t bytes, std::function<Status(CollectiveBackend&)> run) {
    auto work = std::make_shared<QueuedWork>(std::move(tag), bytes, std::move(run), &m_waitPolicy,
                                             m_backend->rank());
    {
      std::lock_guard lock(m_mutex);
      m_queue.push_back(work);
    }
    m_cv.notify_one();
    return work;
  }
  CommWorkPtr failedWork(Status status) {
    auto work = std::make_shared<QueuedWork>(
        CommTag{}, 0, [status](CollectiveBackend&) { return status; }, &m_waitPolicy,
        m_backend->rank());
    work->execute(*m_backend, Status::ok(), nullptr);
    return work;
  }

  void loop() {
    Status broken;
    while (true) {
      std::shared_ptr<QueuedWork> work;
      CommObserver* observer = nullptr;
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return m_stop || !m_queue.empty(); });
        if (m_queue.empty()) return;  // stopping and drained
        work = std::move(m_queue.front());
        m_queue.pop_front();
        observer = m_observer;
        m_inFlight = describe(work->tag());
      }
      work->execute(*m_backend, broken, observer, [this] {
        std::lock_guard lock(m_mutex);
        m_inFlight.clear();
      });
      // After a failed collective the ranks no longer agree on the sequence: later ones would
      // only hang, so they fail at once with the first error.
      if (broken.isOk() && !work->status().isOk()) broken = work->status();
    }
  }

  std::unique_ptr<CollectiveBackend> m_backend;
  WaitPolicy m_waitPolicy;
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::shared_ptr<QueuedWork>> m_queue;
  std::string m_inFlight;  // describe() of the work the comm thread runs; guarded by m_mutex
  CommObserver* m_observer = nullptr;
  bool m_stop = false;
  std::thread m_thread;
};

}  // namespace

std::unique_ptr<Communicator> makeThreadedCommunicator(std::unique_ptr<CollectiveBackend> backend) {
  return std::make_unique<ThreadedCommunicator>(std::move(backend));
}

}  // namespace ddpscope::runtime
