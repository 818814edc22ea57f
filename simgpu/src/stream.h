// Streams (ordered queues executed by a worker thread each), events, and the virtual timing of
// every operation. Virtual time is computed when an operation is *submitted* (in host call order),
// so it does not depend on how the worker threads happen to be scheduled: same program, same times.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "driver.h"

namespace chameleon::simgpu {

struct Graph;

/// How an operation is charged on the virtual clock.
struct OpCost {
  enum class Kind : std::uint8_t { kNone, kKernel, kCopy } kind = Kind::kNone;
  double compute_ns = 0;  ///< kernel: max(flops/peak, bytes/bw), without launch latency
  double bytes = 0;       ///< copy: bytes moved over `link`
  double bandwidth = 0;   ///< copy: link bandwidth in bytes/s
  Link* link = nullptr;   ///< copy: shared link (null = private, e.g. on-device memset)
  Link* link2 = nullptr;  ///< copy: a second link it also crosses (inter-socket), or null
  double bandwidth2 = 0;  ///< copy: link2's bandwidth in bytes/s
};

/// One unit of stream work. `work` runs on the stream's worker under the fault guard; if it
/// faults, the context gets a sticky CUDA_ERROR_ILLEGAL_ADDRESS. Copyable so graphs can replay it.
struct OpSpec {
  std::function<void()> work;
  OpCost cost;
  CUresult fail = CUDA_SUCCESS;  ///< non-success: the op sets this sticky error when it runs
};

inline constexpr std::uint32_t kStreamMagic = 0x4d525453u;

/// Thread-safe. Lives as long as a shared_ptr refers to it (its context, events, its worker).
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  enum class Role : std::uint8_t { kUser, kLegacy, kPerThread };
  Stream(Context* ctx, unsigned flags, int priority, Role role);

  Context* ctx() const { return ctx_; }
  unsigned flags() const { return flags_; }
  int priority() const { return priority_; }
  Role role() const { return role_; }
  bool blocking() const { return (flags_ & CU_STREAM_NON_BLOCKING) == 0; }
  bool alive() const { return magic_.load(std::memory_order_acquire) == kStreamMagic; }

  /// Enqueues `op` (or records it into the graph under capture). Never blocks on device work.
  CUresult Submit(OpSpec op);
  /// Makes later work wait for `other` to reach `seq`, and the virtual clock for `vtime`.
  void EnqueueWait(const std::shared_ptr<Stream>& other, std::uint64_t seq, std::uint64_t vtime);
  /// Last submitted sequence number and the virtual time at which it ends.
  std::uint64_t Tail(std::uint64_t* vclock);
  /// Like Tail, but an idle stream's clock first catches up with the host clock (an event
  /// recorded now cannot complete before now). Used by cuEventRecord.
  std::uint64_t Mark(std::uint64_t* vclock);
  bool Reached(std::uint64_t seq);
  void WaitFor(std::uint64_t seq);
  /// WaitFor, giving up after `limit` of wall time; false if `seq` was not reached.
  bool WaitFor(std::uint64_t seq, std::chrono::milliseconds limit);
  /// Blocks until everything submitted so far has run; raises the host clock to its end.
  void Synchronize();
  /// Stops the worker after the queued work (cuStreamDestroy).
  void Destroy();

  // Capture (cuStreamBeginCapture .. cuStreamEndCapture). Guarded by mu_.
  bool BeginCapture();
  Graph* EndCapture();
  bool capturing();

  // fork() support (driver.cc's pthread_atfork handlers): the prepare handler holds every stream
  // lock across fork; in the child, work queued before the fork belongs to the parent and is
  // dropped, and the next submission starts a new worker (the parent's threads do not exist).
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }
  void ResetInForkChild();

 private:
  struct Queued {
    std::function<void()> work;
    std::shared_ptr<Stream> wait_on;
    std::uint64_t wait_seq = 0;
    CUresult fail = CUDA_SUCCESS;
  };
  void SyncWithLegacy();
  void PushLocked(Queued q);
  void WorkerLoop();
  void RunOne(Queued& q);

  std::atomic<std::uint32_t> magic_{kStreamMagic};
  Context* ctx_;
  unsigned flags_;
  int priority_;
  Role role_;
  std::mutex mu_;
  std::condition_variable work_cv_;  ///< the worker waits here for work
  std::condition_variable done_cv_;  ///< WaitFor callers wait here for completions
  std::deque<Queued> queue_;
  bool worker_idle_ = false;  ///< notify the worker only when it sleeps (launches stay cheap)
  int waiters_ = 0;           ///< notify completions only when someone waits
  std::uint64_t submitted_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t vclock_ = 0;
  bool worker_started_ = false;
  bool destroyed_ = false;
  Graph* capture_ = nullptr;
};

/// A captured sequence of stream work (single-stream capture), replayed by cuGraphLaunch. Built
/// under its capturing stream's lock; immutable once capture has ended.
struct Graph {
  std::uint32_t magic = 0x48505247u;
  std::vector<OpSpec> ops;
};

inline constexpr std::uint32_t kEventMagic = 0x544e5645u;

/// Thread-safe (own mutex). Recycled, never freed, so a stale handle is detected by its magic.
struct Event {
  std::atomic<std::uint32_t> magic{kEventMagic};
  unsigned flags = 0;
  Context* ctx = nullptr;
  std::mutex mu;
  std::shared_ptr<Stream> stream;  ///< null until recorded
  std::uint64_t seq = 0;
  std::uint64_t vtime = 0;
  bool recorded = false;
};

/// Resolves a CUstream argument: null = legacy default stream (or the per-thread stream for the
/// _ptsz/_ptds entry points), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, or a created stream.
/// Checks init, the current context and its sticky error.
CUresult ResolveStream(CUstream h, bool per_thread, Stream** out);
/// Creates a user stream in ctx.
std::shared_ptr<Stream> CreateStream(Context* ctx, unsigned flags, int priority);

Event* NewEvent(Context* ctx, unsigned flags);
void DeleteEvent(Event* e);
/// Validates an event handle.
Event* AsEvent(CUevent h);

/// Waits until every stream of every context is idle (cuMemFree / cuMemUnmap semantics), then
/// raises the host clock to the device frontier.
void SynchronizeAll();
/// Waits for every stream of `ctx`; returns the context's sticky error.
CUresult SynchronizeContext(Context* ctx);

}  // namespace chameleon::simgpu
