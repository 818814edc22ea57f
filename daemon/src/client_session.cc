// ClientSession: draining, records, liveness and boundary detection. Policies and the detailed
// iteration are in session_policy.cc, the JSON description in session_describe.cc.
#include "chameleon/daemon/client_session.h"

#include <fnmatch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace chameleon::daemon {
namespace {

/// First detection attempt once this many ops arrived; later ones when the history grew by half.
constexpr std::size_t kFirstDetectionOps = 64;
/// Histories below this size are retried after kDetectionRetryNs even without growing by half.
constexpr std::size_t kRetrySmallHistoryOps = 1u << 16;
constexpr std::uint64_t kDetectionRetryNs = 250'000'000;
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
      mailbox_(segment_.mailbox_writer()),
      options_(options),
      metrics_(metrics),
      slot_metrics_(&metrics->Slot(identity_.slot)),
      attached_ns_(now_ns),
      next_detection_ops_(kFirstDetectionOps) {
  // The daemon needs the mapping only; dropping the descriptor keeps its fd count flat.
  segment_.CloseFd();
  slot_metrics_->stage->Set(0);
  slot_metrics_->pid->Set(identity_.pid);
  segment_.header()->daemon_heartbeat_ns.store(now_ns, std::memory_order_release);
  recent_.assign(kRecentOps, 0);
  configs_ = policy::CandidateConfigs(options.policy,
                                      static_cast<std::uint32_t>(options.detection.stage_n + 1));
}

bool ClientSession::ReadNames() {
  return names_reader_.ReadNew([this](std::uint32_t token, std::string_view name) {
    auto [it, inserted] = names_.emplace(token, std::string(name));
    if (inserted && !tracker_ && !options_.detection.boundary_patterns.empty()) {
      ApplyPatternOverride(token, it->second);
    }
  });
}

void ClientSession::ApplyPatternOverride(std::uint32_t token, const std::string& name) {
  for (const std::string& pattern : options_.detection.boundary_patterns) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) != 0) continue;
    spdlog::info("client {} (pid {}): boundary set by pattern '{}': kernel '{}' (token {})",
                 identity_.id, identity_.pid, pattern, name, token);
    pattern_boundary_ = true;
    tracker_.emplace(std::vector<std::uint32_t>{token}, options_.detection);
    history_.clear();
    history_.shrink_to_fit();
    Publish(nullptr);
    return;
  }
}

Health ClientSession::Drain(std::uint64_t now_ns) {
  drain_now_ns_ = now_ns;
  if (!ReadNames()) {
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
      HandleAlloc(alloc, detailed);
      return true;
    }
    case ipc::RecordType::kFree: {
      ipc::FreeRecord free{};
      if (!Load(record, &free)) break;
      HandleFree(free.id, detailed);
      return true;
    }
    case ipc::RecordType::kIterationMark: {
      ipc::IterationMarkRecord mark{};
      if (!LoadPrefix(record, ipc::kIterationMarkV10Bytes, &mark)) break;
      HandleMark(mark);
      return true;
    }
    case ipc::RecordType::kMemInfo: {
      ipc::MemInfoRecord info{};
      if (!Load(record, &info)) break;
      if (detailed && detail_ == DetailState::kCollecting) builder_.AddMemInfo(info.bytes_live);
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
      HandlePointerTargets(targets.scan, {ids, targets.count});
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
  if (detailed && (detail_ == DetailState::kRequested || detail_ == DetailState::kCollecting)) {
    detail_ = DetailState::kCollecting;
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
    builder_.AddOp(token, {reads, n}, written);
  } else if (detail_ == DetailState::kCollecting) {
    FinishDetail(false);
  }
  if (tracker_) {
    recent_[recent_count_++ & (kRecentOps - 1)] = token;
    // A few compares: the hold must be current when this op ends a step.
    UpdateStageHold(drain_now_ns_);
    if (tracker_->Add(token)) OnIteration(tracker_->last_event());
    CheckBoundaryLost();
  } else if (!pattern_boundary_) {
    if (history_.size() >= options_.detection.max_history_ops && !detection_in_flight_) {
      // Keep the most recent half: a loop longer than the history cannot be detected anyway.
      history_.erase(history_.begin(), history_.begin() + history_.size() / 2);
      next_detection_ops_ = history_.size() + history_.size() / 2;
    }
    history_.push_back(token);
  }
  return true;
}

void ClientSession::HandleAlloc(const ipc::AllocRecord& alloc, bool detailed) {
  if (static_cast<ipc::AllocKind>(alloc.kind) == ipc::AllocKind::kHost) return;
  if (live_.size() < kMaxLiveAllocations || live_.count(alloc.id) != 0) {
    live_[alloc.id] = LiveAllocation{alloc.bytes, alloc.swappable != 0};
  }
  if (detailed && detail_ == DetailState::kCollecting) {
    builder_.AddAlloc(alloc.id, alloc.bytes, alloc.swappable != 0);
  }
}

void ClientSession::HandleFree(std::uint64_t id, bool detailed) {
  if (detailed && detail_ == DetailState::kCollecting) builder_.AddFree(id);
  live_.erase(id);
}

void ClientSession::CheckBoundaryLost() {
  // No boundary for four iterations' worth of ops (or a whole history when no iteration was
  // ever cut): the loop changed under us; detect again from scratch.
  const std::uint64_t ops = tracker_->iteration_ops();
  const std::uint64_t limit = ops > 0 ? 4 * ops : options_.detection.max_history_ops;
  if (pattern_boundary_ || tracker_->ops_since_boundary() <= limit) return;
  spdlog::warn(
      "client {} (pid {}): boundary signature not seen for {} ops (iteration was {} ops); "
      "detecting again",
      identity_.id, identity_.pid, tracker_->ops_since_boundary(), ops);
  ++boundary_losses_;
  shifts_before_ += tracker_->shifts();
  iterations_before_ += tracker_->iterations();
  tracker_.reset();
  // Start the new history with the recent ops, oldest first.
  const std::size_t kept =
      static_cast<std::size_t>(std::min<std::uint64_t>(recent_count_, kRecentOps));
  history_.clear();
  for (std::uint64_t i = recent_count_ - kept; i < recent_count_; ++i) {
    history_.push_back(recent_[i & (kRecentOps - 1)]);
  }
  next_detection_ops_ = kFirstDetectionOps;
  Publish(nullptr);
}

bool ClientSession::WantsDetection(std::uint64_t now_ns) const {
  if (tracker_ || pattern_boundary_ || detection_in_flight_) return false;
  if (history_.size() >= next_detection_ops_) return true;
  // A small history that grew a little and then stopped (the client paused or ended its loop)
  // is tried again after a while: cheap, and otherwise it would wait for growth that never comes.
  return history_.size() > last_detection_ops_ && history_.size() < kRetrySmallHistoryOps &&
         now_ns - last_detection_ns_ > kDetectionRetryNs;
}

std::vector<std::uint32_t> ClientSession::TakeDetectionSnapshot(std::uint64_t now_ns) {
  detection_in_flight_ = true;
  last_detection_ops_ = history_.size();
  last_detection_ns_ = now_ns;
  return history_;
}

void ClientSession::InstallDetection(std::optional<Boundary> boundary,
                                     std::optional<IterationTracker> tracker,
                                     std::size_t snapshot_ops) {
  detection_in_flight_ = false;
  if (tracker_) return;  // a pattern override won meanwhile
  if (!boundary || !tracker || snapshot_ops > history_.size()) {
    next_detection_ops_ = std::max(history_.size(), snapshot_ops + snapshot_ops / 2) + 1;
    return;
  }
  boundary_period_ = boundary->period;
  tracker_ = std::move(tracker);
  // The worker replayed the snapshot; the ops that arrived since go through the live path.
  for (std::size_t i = snapshot_ops; i < history_.size(); ++i) {
    if (tracker_->Add(history_[i])) OnIteration(tracker_->last_event());
  }
  history_.clear();
  history_.shrink_to_fit();
  std::string names;
  for (std::uint32_t token : boundary->signature) {
    auto it = names_.find(token);
    names += (names.empty() ? "" : " ") +
             (it != names_.end() ? it->second : "token " + std::to_string(token));
  }
  spdlog::info(
      "client {} (pid {}): iteration boundary detected: period {} ops, signature of {} "
      "op(s) [{}], confirmed over {} periods; {} iterations so far, stage {}",
      identity_.id, identity_.pid, boundary->period, boundary->signature.size(), names,
      boundary->confirmed, tracker_->iterations(), StageName(tracker_->stage()));
  Publish(nullptr);
  if (tracker_->stage() != Stage::kWarmup && !profile_fresh_) {
    // The loop was already past WARMUP before we knew its boundary.
    StageStep step;
    step.before = Stage::kWarmup;
    step.after = Stage::kGenPolicy;
    OnStageChange(step);
  }
}

void ClientSession::HandleMark(const ipc::IterationMarkRecord& mark) {
  ++marks_;
  spdlog::debug("client {}: mark {} (generation {}, {} ops): interval {} took {} ns on the device",
                identity_.id, mark.iteration, mark.generation, mark.ops, mark.timed_iteration,
                mark.device_time_ns);
  if (mark.generation != 0 && mark.iteration != 0) {
    marks_carry_generation_ = true;
    mark_generations_[mark.iteration % kMarkGenerations] = {mark.iteration, mark.generation};
  }
  if (mark.device_time_ns > 0) {
    iteration_s_ = double(mark.device_time_ns) * 1e-9;
    device_time_seen_ = true;
  } else if (!device_time_seen_ && last_mark_host_ns_ != 0 &&
             mark.host_time_ns > last_mark_host_ns_) {
    iteration_s_ = double(mark.host_time_ns - last_mark_host_ns_) * 1e-9;
  }
  last_mark_host_ns_ = mark.host_time_ns;
  last_mark_iteration_ = mark.iteration;
  slot_metrics_->iteration_seconds->Set(iteration_s_);
  if (detail_ == DetailState::kCollecting && builder_.ops() > 0) {
    // This mark closes the detailed iteration: it ran from the previous boundary to this one.
    detail_boundary_ = mark.iteration > 0 ? mark.iteration - 1 : 0;
    FinishDetail(true);
  } else if (profile_fresh_ && !profile_timed_) {
    ++marks_since_detail_;
  }
  if (mark.device_time_ns > 0 && mark.timed_iteration != 0 && marks_carry_generation_) {
    OnTimedInterval(mark.timed_iteration, double(mark.device_time_ns) * 1e-9);
  } else if (mark.device_time_ns > 0) {
    CreditLegacy(iteration_s_);  // a layout-1.0 shim: its marks do not say which interval
  }
  if (profile_fresh_ && !profile_timed_ && !device_time_seen_ && marks_since_detail_ >= 3) {
    // No device time from this client at all (older shim, no events): host time is all there is.
    TimeProfile(iteration_s_, "host");
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
  if (tracker_) UpdateStageHold(now_ns);  // a stalled hold lets go even while no op arrives
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
