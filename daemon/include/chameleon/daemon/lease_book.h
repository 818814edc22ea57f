// LeaseBook: the node's peer-HBM leases, from grant to revocation (issue 16 item 6). A lease lets
// one client (the lessee) hold up to `bytes` on another client's GPU (the lender, named by PCI bus
// id: ordinals differ per process). A GPU's spare is capacity − its owner's observed peak − a
// reserve, minus what is already lent; only GPUs the caller registers as lenders have one.
//
// Revocation never waits on anyone: Revoke() marks the GPU's leases revoking with a deadline; the
// lessee's next policy omits them (Active() no longer lists them) and Published() records that
// policy's generation; Applied() completes them once the lessee reports that generation in
// leases_applied_generation. Past the deadline Expire() declares the lessee hung: the lease is
// dropped (the owner gets its memory back on paper whatever the lessee does) and the GPU lends no
// more while its owner stays. A client that leaves frees its leases as lessee and revokes those
// on its GPU as owner.
//
// Pure bookkeeping: the clock is the `now_ns` each call is given. Not thread-safe (the daemon's
// loop thread owns it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace chameleon::daemon {

struct Lease {
  enum class State : std::uint8_t { kActive, kRevoking };
  std::uint64_t id = 0;  ///< never reused for the book's lifetime
  std::string gpu;       ///< lender's PCI bus id
  std::uint32_t owner = 0;
  std::uint32_t lessee = 0;
  std::uint64_t bytes = 0;
  State state = State::kActive;
  std::uint64_t deadline_ns = 0;  ///< kRevoking: the lessee must comply by then
  std::uint64_t omitted_generation =
      0;  ///< kRevoking: first lessee policy without it (0: none yet)
};

/// How one revocation ended (Applied() and Expire() report them).
struct RevocationOutcome {
  Lease lease;
  bool hung = false;  ///< the deadline passed before the lessee complied
};

class LeaseBook {
 public:
  LeaseBook(std::uint64_t reserve_bytes, std::uint64_t deadline_ns)
      : reserve_(reserve_bytes), deadline_ns_(deadline_ns) {}
  /// New settings (a live reload): future spares and revocations use them.
  void SetRules(std::uint64_t reserve_bytes, std::uint64_t deadline_ns);

  /// `gpu` is lendable, owned by client `owner`, with `capacity` bytes of which the owner used at
  /// most `peak`. Called each round; a GPU marked stopped (hung lessee) stays stopped while the
  /// same owner holds it. `self_only`: one of the owner's other devices (a pipeline stage), lent
  /// to the owner's own swaps only; otherwise only to other clients.
  void SetLender(const std::string& gpu, std::uint32_t owner, std::uint64_t capacity,
                 std::uint64_t peak, bool self_only = false);
  /// `gpu` may not lend now (its owner asks memory back, or left): Spare() is 0 until SetLender.
  void Pause(const std::string& gpu);
  /// Bytes that may still be lent on `gpu` (0 for an unknown, paused or stopped GPU).
  std::uint64_t Spare(const std::string& gpu) const;
  /// What `gpu` may lend in all, its current leases included: Spare() + LentOn() while lending.
  std::uint64_t Lendable(const std::string& gpu) const;
  /// The GPU stopped lending after a hung lessee.
  bool Stopped(const std::string& gpu) const;

  /// Lends `bytes` more of `gpu` to `lessee`, growing its active lease there or starting one.
  /// Returns the lease id, or 0 when `bytes` exceeds Spare() (nothing changes then), or when the
  /// lessee is the GPU's owner (another client's, for a self-only GPU).
  std::uint64_t Grant(const std::string& gpu, std::uint32_t lessee, std::uint64_t bytes);
  /// Revokes every active lease on `gpu`; returns the lessees whose next policy must omit them.
  std::vector<std::uint32_t> Revoke(const std::string& gpu, std::uint64_t now_ns);
  /// `lessee` was sent policy `generation`, which omits its revoking leases.
  void Published(std::uint32_t lessee, std::uint64_t generation);
  /// `lessee` reports `applied` in leases_applied_generation: completes its revocations whose
  /// omitting policy it now complies with.
  std::vector<RevocationOutcome> Applied(std::uint32_t lessee, std::uint64_t applied);
  /// Revocations past their deadline: dropped, their GPU stopped.
  std::vector<RevocationOutcome> Expire(std::uint64_t now_ns);
  /// Client `client` left: its leases as lessee are freed at once (a dead process holds no
  /// memory), its GPUs stop lending and the leases on them are revoked; returns the lessees whose
  /// next policy must omit them.
  std::vector<std::uint32_t> ClientGone(std::uint32_t client, std::uint64_t now_ns);

  /// Active leases held by `lessee` (what its next policy carries).
  std::vector<Lease> Active(std::uint32_t lessee) const;
  /// Bytes of `owner`'s GPUs lent to other clients, active or still being revoked: its limit is
  /// lowered by them (what it lends itself on its other devices lowers nothing).
  std::uint64_t LentBy(std::uint32_t owner) const;
  /// Bytes of `gpu` lent out, active or revoking.
  std::uint64_t LentOn(const std::string& gpu) const;
  const std::map<std::uint64_t, Lease>& leases() const { return leases_; }

  /// A GPU the book has seen as a lender (SetLender), by bus id.
  struct Gpu {
    std::uint32_t owner = 0;
    std::uint64_t capacity = 0;
    std::uint64_t peak = 0;
    bool paused = true;
    bool stopped = false;    ///< a lessee hung: no more lending while `owner` holds the GPU
    bool self_only = false;  ///< lends to `owner` only (SetLender)
  };
  const std::map<std::string, Gpu>& gpus() const { return gpus_; }

 private:
  std::uint64_t reserve_;
  std::uint64_t deadline_ns_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, Gpu> gpus_;
  std::map<std::uint64_t, Lease> leases_;  // by id
};

}  // namespace chameleon::daemon
