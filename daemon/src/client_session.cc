// ClientSession: draining, routing records to the session's parts, liveness. Stages, candidates
// and publishing are in session_policy.cc, the JSON description in session_describe.cc.
#include "chameleon/daemon/client_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace chameleon::daemon {
namespace {

/// Live allocations tracked per client; a client that reports more is not trusted with more memory
/// in the daemon (the profile then lacks sizes for the excess).
constexpr std::size_t kMaxLiveAllocations = 1u << 20;

template <typename T>
bool Load(const ipc::RecordView& record, T* out) {
  if (record.payload.size() < sizeof(T)) return false;
  std::memcpy(out, record.payload.data(), sizeof(T));
  return true;
}

/// For records that grew in a later minor: at least `min_bytes` (the 1.0 fields), the rest of
/// `*out` zero-filled when an older writer sent less.
template <typename T>
bool LoadPrefix(const ipc::RecordView& record, std::size_t min_bytes, T* out) {
  if (record.payload.size() < min_bytes) return false;
  *out = T{};
  std::memcpy(out, record.payload.data(), std::min(sizeof(T), record.payload.size()));
  return true;
}

}  // namespace

ClientSession::ClientSession(ClientIdentity identity, ipc::Segment segment,
                             const DaemonOptions& options, Metrics* metrics, std::uint64_t now_ns)
    : identity_(std::move(identity)),
      segment_(std::move(segment)),
      ring_(segment_.ring_consumer()),
      names_reader_(segment_.name_reader()),
      options_(options),
      metrics_(metrics),
      slot_metrics_(&metrics->Slot(identity_.slot)),
      attached_ns_(now_ns),
      loop_(identity_, options.detection),
      recorder_(identity_, segment_.header(), &live_, &names_),
      exclusions_(identity_),
      device_view_(identity_),
      trials_(policy::CandidateConfigs(options.policy,
                                       static_cast<std::uint32_t>(options.detection.stage_n + 1))),
      plans_(options.remembered_plans),
      publisher_(identity_, segment_.mailbox_writer()) {
  // The daemon needs the mapping only; dropping the descriptor keeps its fd count flat.
  segment_.CloseFd();
  slot_metrics_->stage->Set(0);
  slot_metrics_->pid->Set(identity_.pid);
  segment_.header()->daemon_heartbeat_ns.store(now_ns, std::memory_order_release);
}

Health ClientSession::Drain(std::uint64_t now_ns) {
  drain_now_ns_ = now_ns;
  const bool names_ok = names_reader_.ReadNew([this](std::uint32_t token, std::string_view name) {
    auto [it, inserted] = names_.emplace(token, std::string(name));
    // Kernel names arrive when first launched: a pattern's kernel may come after detection
    // settled on another period, and it wins then too (LoopBoundary::TryPattern).
    if (inserted && !loop_.pattern() && !options_.detection.boundary_patterns.empty() &&
        loop_.TryPattern(token, it->second)) {
      ForgetProfile();
      slot_metrics_->stage->Set(static_cast<double>(stage()));
      Publish(nullptr);
    }
  });
  if (!names_ok) {
    error_ = "name table corrupt (committed bytes or an entry out of bounds)";
    metrics_->bad_input(BadInput::kNamesCorrupt).Increment();
    return Health::kCorrupt;
  }
  bool bad = false;
  drained_ += ring_.Drain(
      [&](const ipc::RecordView& record) {
        if (!bad && !HandleRecord(record)) bad = true;
      },
      options_.drain_batch_records, now_ns, options_.stuck_record_timeout_ns);
  if (ring_.unknown_skipped() > unknown_records_) {
    // A newer minor's record types: skipped by the ring (docs/protocol.md), logged once.
    if (unknown_records_ == 0) {
      spdlog::warn(
          "client {} (pid {}): skipping event records of a type this daemon does not know "
          "(a newer shim?); counted in records.unknown",
          identity_.id, identity_.pid);
    }
    // Counted here, not on the housekeeping timer: the ring's count is the daemon's own.
    slot_metrics_->unknown->Increment(double(ring_.unknown_skipped() - unknown_records_));
    unknown_records_ = ring_.unknown_skipped();
  }
  switch (ring_.last_error()) {
    case ipc::DrainError::kNone:
      break;
    case ipc::DrainError::kStuckRecordRepaired:
      spdlog::warn(
          "client {} (pid {}): a record claimed but never committed for {} ms was "
          "skipped (writer died mid-record); {} repaired so far",
          identity_.id, identity_.pid, options_.stuck_record_timeout_ns / 1'000'000,
          ring_.repaired());
      break;
    case ipc::DrainError::kBadLength:
      error_ = std::string("event ring corrupt: ") + ipc::ToString(ring_.last_error());
      metrics_->bad_input(BadInput::kRingCorrupt).Increment();
      return Health::kCorrupt;
    default:  // kBadType, kBadPayload: a committed record the protocol does not allow
      error_ = std::string("bad record in the event ring: ") + ipc::ToString(ring_.last_error());
      metrics_->bad_input(BadInput::kBadRecord).Increment();
      return Health::kCorrupt;
  }
  if (bad) {
    metrics_->bad_input(BadInput::kBadRecord).Increment();
    return Health::kCorrupt;
  }
  return Health::kOk;
}

bool ClientSession::HandleRecord(const ipc::RecordView& record) {
  const bool detailed = (record.flags & ipc::kFlagDetailed) != 0;
  switch (record.type) {
    case ipc::RecordType::kLaunch: {
      ipc::LaunchRecord launch{};
      if (!Load(record, &launch)) break;
      if (launch.tensor_count > ipc::kMaxLaunchTensors ||
          sizeof(launch) + launch.tensor_count * 8u > record.payload.size()) {
        error_ = "launch record lists more tensors than it carries";
        return false;
      }
      return HandleOp(launch.token, record);
    }
    case ipc::RecordType::kCopy: {
      ipc::CopyRecord copy{};
      if (!Load(record, &copy)) break;
      return HandleOp(copy.token, record);
    }
    case ipc::RecordType::kMemset: {
      ipc::MemsetRecord memset{};
      if (!Load(record, &memset)) break;
      return HandleOp(memset.token, record);
    }
    case ipc::RecordType::kAlloc: {
      ipc::AllocRecord alloc{};
      if (!Load(record, &alloc)) break;
      if (static_cast<ipc::AllocKind>(alloc.kind) == ipc::AllocKind::kHost) return true;
      if (live_.size() < kMaxLiveAllocations || live_.count(alloc.id) != 0) {
        live_[alloc.id] = LiveAllocation{alloc.bytes, alloc.swappable != 0, alloc.device};
      }
      recorder_.AddAlloc(alloc.id, alloc.bytes, alloc.swappable != 0, alloc.device, detailed);
      return true;
    }
    case ipc::RecordType::kFree: {
      ipc::FreeRecord free{};
      if (!Load(record, &free)) break;
      recorder_.AddFree(free.id, detailed);
      live_.erase(free.id);
      return true;
    }
    case ipc::RecordType::kIterationMark: {
      ipc::IterationMarkRecord mark{};
      if (!LoadPrefix(record, ipc::kIterationMarkV10Bytes, &mark)) break;
      HandleMark(mark, record.flags);
      return true;
    }
    case ipc::RecordType::kMemInfo: {
      ipc::MemInfoRecord info{};
      if (!Load(record, &info)) break;
      recorder_.AddMemInfo(info.bytes_live, detailed);
      return true;
    }
    case ipc::RecordType::kPointerTargets: {
      ipc::PointerTargetsRecord targets{};
      if (!Load(record, &targets)) break;
      if (targets.count > ipc::kMaxPointerTargetsPerRecord ||
          sizeof(targets) + targets.count * 8u > record.payload.size()) {
        error_ = "pointer-targets record lists more ids than it carries";
        return false;
      }
      std::uint64_t ids[ipc::kMaxPointerTargetsPerRecord];
      std::memcpy(ids, record.payload.data() + sizeof(targets), targets.count * 8u);
      exclusions_.Report(targets.scan, {ids, targets.count}, &live_, recorder_.profile());
      return true;
    }
    case ipc::RecordType::kOpTimes: {
      ipc::OpTimesRecord times{};
      if (!Load(record, &times)) break;
      if (times.count > ipc::kMaxOpTimesPerRecord ||
          sizeof(times) + times.count * sizeof(ipc::OpTime) > record.payload.size()) {
        error_ = "op-times record lists more ops than it carries";
        return false;
      }
      ipc::OpTime entries[ipc::kMaxOpTimesPerRecord];
      std::memcpy(entries, record.payload.data() + sizeof(times),
                  times.count * sizeof(ipc::OpTime));
      recorder_.AddOpTimes({entries, times.count}, detailed);
      return true;
    }
    case ipc::RecordType::kSync:
    case ipc::RecordType::kPadding:
      return true;
    default:
      return true;  // not handed out: the ring skips and counts unknown types
  }
  error_ = "record of type " + std::to_string(static_cast<int>(record.type)) + " too short (" +
           std::to_string(record.payload.size()) + " bytes)";
  return false;
}

bool ClientSession::HandleOp(std::uint32_t token, const ipc::RecordView& record) {
  ++ops_;
  const bool detailed = (record.flags & ipc::kFlagDetailed) != 0;
  if (recorder_.Accepts(detailed)) {
    std::uint64_t reads[ipc::kMaxLaunchTensors + 1];
    std::size_t n = 0;
    std::uint64_t written = ipc::kNoAllocation;
    if (record.type == ipc::RecordType::kLaunch) {
      ipc::LaunchRecord launch{};
      std::memcpy(&launch, record.payload.data(), sizeof(launch));
      n = launch.tensor_count;
      std::memcpy(reads, record.payload.data() + sizeof(launch), n * 8);
    } else if (record.type == ipc::RecordType::kCopy) {
      ipc::CopyRecord copy{};
      std::memcpy(&copy, record.payload.data(), sizeof(copy));
      reads[n++] = copy.src;
      written = copy.dst;
    } else {
      ipc::MemsetRecord memset{};
      std::memcpy(&memset, record.payload.data(), sizeof(memset));
      written = memset.dst;
    }
    recorder_.AddOp(token, {reads, n}, written);
  } else {
    const policy::Profile* before = recorder_.profile().get();
    recorder_.OpOutside(clock_.last_boundary());
    NoteProfileSequence(before);
  }
  switch (loop_.Remember(token)) {
    case LoopBoundary::Route::kHistory:
      break;
    case LoopBoundary::Route::kConfirmed:
      AnnounceBoundary();
      break;
    case LoopBoundary::Route::kTracker: {
      // A few compares: the hold must be current when this op ends a step.
      UpdateStageHold(drain_now_ns_);
      IterationTracker& tracker = *loop_.tracker();
      if (tracker.Add(token)) OnIteration(tracker.last_event());
      if (loop_.CheckLost()) {
        ForgetProfile();
        Publish(nullptr);
      }
      break;
    }
  }
  return true;
}

void ClientSession::InstallDetection(std::optional<Boundary> boundary,
                                     std::optional<IterationTracker> tracker,
                                     std::size_t snapshot_ops) {
  switch (loop_.Install(boundary, std::move(tracker), snapshot_ops,
                        [this](const IterationEvent& event) { OnIteration(event); })) {
    case LoopBoundary::Installed::kNo:
      return;
    case LoopBoundary::Installed::kPending:
      spdlog::info(
          "client {} (pid {}): boundary candidate of period {} ops from op {} of {}: pending "
          "until it recurs past the history",
          identity_.id, identity_.pid, boundary->period, boundary->first, snapshot_ops);
      return;
    case LoopBoundary::Installed::kYes:
      AnnounceBoundary();
      return;
  }
}

void ClientSession::AnnounceBoundary() {
  const Boundary& boundary = *loop_.boundary();
  const IterationTracker& installed = *loop_.tracker();
  std::string names;
  for (std::uint32_t token : boundary.signature) {
    auto it = names_.find(token);
    names += (names.empty() ? "" : " ") +
             (it != names_.end() ? it->second : "token " + std::to_string(token));
  }
  spdlog::info(
      "client {} (pid {}): iteration boundary detected: period {} ops, signature of {} "
      "op(s) [{}], confirmed over {} periods; {} iterations so far, stage {}",
      identity_.id, identity_.pid, boundary.period, boundary.signature.size(), names,
      boundary.confirmed, installed.iterations(), StageName(installed.stage()));
  Publish(nullptr);
  if (installed.stage() != Stage::kWarmup && !recorder_.fresh()) {
    // The loop was already past WARMUP before we knew its boundary.
    StageStep step;
    step.before = Stage::kWarmup;
    step.after = Stage::kGenPolicy;
    OnStageChange(step);
  }
}

void ClientSession::ForgetProfile() {
  // A profile of the old iteration would plan swaps for ops at positions that no longer exist
  // (issue 18: six candidates planned from a 20-op layer, all refused).
  recorder_.Forget();
  trials_.Restart();
  plans_.Clear();      // their anchors count ops from the old boundary
  predictor_.Clear();  // and the keys name sequences cut at it
}

void ClientSession::HandleMark(const ipc::IterationMarkRecord& mark, std::uint16_t flags) {
  spdlog::debug("client {}: mark {} (generation {}, {} ops): interval {} took {} ns on the device",
                identity_.id, mark.iteration, mark.generation, mark.ops, mark.timed_iteration,
                mark.device_time_ns);
  clock_.OnMark(mark, flags);
  // The candidate on trial is installed: the one planned ahead goes now, so the shim has it
  // before the boundary that ends this trial's iteration.
  if (clock_.last_installed() && trials_.Installed(mark.generation)) PublishReadyCandidate();
  const ipc::SegmentHeader* h = segment_.header();
  traffic_.OnMark(mark.iteration, h->swap_out_bytes.load(std::memory_order_relaxed),
                  h->swap_in_bytes.load(std::memory_order_relaxed));
  if (feedback_.OnMark(mark.generation, h->evictions.load(std::memory_order_relaxed)) &&
      options_.reserve_feedback) {
    RaiseReserve();
  }
  slot_metrics_->iteration_seconds->Set(clock_.iteration_s());
  const policy::Profile* before = recorder_.profile().get();
  recorder_.OnMark(mark.iteration);
  NoteProfileSequence(before);
  if (mark.device_time_ns > 0 && mark.timed_iteration != 0 && clock_.carries_generation()) {
    std::optional<double> executor_wait_s;
    if ((flags & ipc::kFlagExecutorWait) != 0)
      executor_wait_s = double(mark.executor_wait_ns) * 1e-9;
    OnTimedInterval(mark.timed_iteration, double(mark.device_time_ns) * 1e-9, executor_wait_s);
  } else if (mark.device_time_ns > 0) {
    // A layout-1.0 shim's marks name neither the interval nor the generation: credit the
    // generation the shim says is applied now, and time the profile with the first device time.
    if (recorder_.fresh() && !recorder_.timed() && trials_.candidates().empty()) {
      recorder_.Time(clock_.iteration_s(), "device");
    }
    trials_.CreditApplied(
        segment_.header()->policy_generation_applied.load(std::memory_order_acquire),
        clock_.iteration_s());
  }
  if (recorder_.fresh() && !recorder_.timed() && !clock_.device_time_seen() &&
      recorder_.marks_since_detail() >= 3) {
    // No device time from this client at all (older shim, no events): host time is all there is.
    recorder_.Time(clock_.iteration_s(), "host");
  }
  // A measurement may have been the last one the hold waited for.
  if (loop_.tracker()) UpdateStageHold(drain_now_ns_);
}

void ClientSession::OnTimedInterval(std::uint64_t interval, double seconds,
                                    std::optional<double> executor_wait_s) {
  // Credited only to a generation in force at both ends (IterationClock::GenerationOver).
  const std::optional<std::uint64_t> generation = clock_.GenerationOver(interval);
  if (!generation) return;
  // The profile wants the compute time: under a limit the executor's copies (the safety net's,
  // or a policy's) make the streams wait, and the plan's predicted stall comes on top. The
  // shim measures those waits where the driver has virtual clocks (simgpu); untrusted, so a
  // wait that is not below the interval is ignored. Otherwise the bytes moved during the
  // interval are taken out at the link's rate, as if no copy overlapped compute (under a policy
  // most do: GPT-2 XL at half its peak on h200-sxm was timed at 0.061 s for a 0.147 s step).
  double compute_s = seconds;
  if (executor_wait_s && *executor_wait_s >= 0 && *executor_wait_s < seconds) {
    compute_s = seconds - *executor_wait_s;
  } else if (const std::optional<SwapTraffic::Moved> moved = traffic_.During(interval)) {
    const policy::GeneratorOptions link = WithHostLink(options_.policy);
    const double net_s =
        SwapTraffic::Seconds(*moved, policy::OutBandwidth(link), policy::InBandwidth(link));
    if (net_s < seconds) compute_s = seconds - net_s;
  }
  // Candidates of an older profile (before a shift) do not stop the next one being timed.
  recorder_.SampleInterval(interval, *generation, compute_s,
                           recorder_.fresh() && !trials_.candidates().empty());
  // A candidate of a sequence a shift just left, timed after it (PlanMemory).
  plans_.CreditProgress(*generation, interval, seconds);
  if (trials_.Credit(*generation, seconds, stage() == Stage::kGenPolicy)) {
    spdlog::debug("client {}: candidate generation {} measured {:.6f} s (interval {})",
                  identity_.id, *generation, seconds, interval);
    PublishReadyCandidate();
  }
}

void ClientSession::Finish(std::uint64_t now_ns) {
  // The client is gone: read everything it left, not just one batch (bounded: a ring holds a
  // finite number of records, and nobody writes any more).
  for (int batch = 0; batch < 4096; ++batch) {
    const std::uint64_t before = drained_;
    if (Drain(now_ns) != Health::kOk || drained_ == before) break;
  }
  CopyCounters();
}

Health ClientSession::Housekeep(std::uint64_t now_ns) {
  ipc::SegmentHeader* header = segment_.header();
  header->daemon_heartbeat_ns.store(now_ns, std::memory_order_release);
  CopyCounters();
  if (loop_.tracker()) UpdateStageHold(now_ns);  // a stalled hold lets go even while no op arrives
  if (header->client_exited.load(std::memory_order_acquire) != 0) {
    error_ = "client exited cleanly";
    return Health::kExited;
  }
  const std::uint64_t beat = header->client_heartbeat_ns.load(std::memory_order_acquire);
  const std::uint64_t reference = std::max(beat, attached_ns_);
  if (now_ns > reference && now_ns - reference > options_.heartbeat_timeout_ns) {
    error_ = "client heartbeat stale for " + std::to_string((now_ns - reference) / 1'000'000) +
             " ms (limit " + std::to_string(options_.heartbeat_timeout_ns / 1'000'000) + " ms)";
    metrics_->bad_input(BadInput::kHeartbeatStale).Increment();
    return Health::kStale;
  }
  return Health::kOk;
}

void ClientSession::MarkDaemonExited() {
  segment_.header()->daemon_exited.store(1, std::memory_order_release);
}

void ClientSession::SetDisabled(bool disabled) {
  disabled_ = disabled;
  auto& flags = segment_.header()->control_flags;
  if (disabled) {
    flags.fetch_or(ipc::kControlDisabled, std::memory_order_acq_rel);
  } else {
    flags.fetch_and(~std::uint32_t{ipc::kControlDisabled}, std::memory_order_acq_rel);
  }
}

}  // namespace chameleon::daemon
