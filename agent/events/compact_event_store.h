// The events that annotated processes send, held compactly under one memory budget. A capture window holds
// its clients' events here until it closes; the flight recorder holds the latest ones here continuously.
//
// Each event becomes one varint record (about 8-20 bytes, see compact_event_store.cc) in a chunk of its
// client. The budget is charged for the bytes really held: the chunks (charged whole when started), names,
// streams and each client's bookkeeping. A capture's store also reserves, per event, what the event will cost
// once built into an XSpace and answered (CaptureCost), so that the whole capture — holding, build and
// response — stays inside one budget; a flight recorder's store does not: its snapshots are built one at a
// time outside it (FlightRecorder). Clients share the budget fairly: one over its share loses its own
// chunks first.
// Losing a chunk loses whole steps, never part of one: take() leaves out every event of a step that lost any.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "proto/local/frame_codec.h"

namespace podscope::agent {

// Which events survive when a client's share is full.
enum class Retention {
  kEarliestAndLatest,  // a capture: the first half of the share stays, the rest is a ring of the latest; the
                       // build of each event is reserved too
  kLatest,             // a flight recorder: a ring of the latest; only what is held is charged
};

// One held event, decoded. Names are indices into HeldClientEvents::names (0: none).
struct HeldEvent {
  int64_t start_ns = 0;  // as the client stamped it (its system clock)
  int64_t duration_ns = 0;
  int64_t value = 0;
  int64_t value2 = 0;
  uint32_t id = 0;      // the name index for steps, compute, free-form events, input stages and allocation records (the
                        // allocator); else the client's id
  int32_t arg = 0;      // the name index of an all-reduce's replica group or an allocation's op; else the client's arg
                        // (a stage's category)
  uint32_t stream = 0;  // index into HeldClientEvents::streams
  local::EventKind kind = local::EventKind::kFreeForm;
};

// Where a client's events were recorded: one core, one thread.
struct EventStream {
  int32_t core = 0;
  int64_t thread_id = 0;
};

// What was lost on one core of a client, exactly.
struct CoreDrops {
  uint64_t events = 0;
  uint64_t steps = 0;
};

// Where one held record lies among a client's chunks.
struct HeldRecord {
  uint32_t chunk = 0;
  uint32_t offset = 0;  // within the chunk's bytes
};

// Records as the store held them: handed over as they are, decoded only while their planes are written.
struct HeldChunk {
  std::vector<uint8_t> bytes;  // the records from the start; past them, room the store did not fill
  size_t used = 0;
  uint32_t records = 0;  // kept ones and left-out ones (see HeldClientEvents)
};

struct HeldClientEvents {
  std::vector<std::string> names;  // index 0 is ""
  std::vector<EventStream> streams;
  // The events kept, in arrival order, as their records: 8-20 bytes each where a decoded event takes 48, so
  // that a build holds its events compactly and decodes them a plane at a time. The records of dropped steps
  // (and, in a copy, of events outside its span) stay in place, marked as left out.
  std::vector<HeldChunk> chunks;
  uint64_t kept_events = 0;
  uint64_t received_events = 0;        // everything the client sent inside the window: held + dropped
  std::map<int32_t, CoreDrops> drops;  // cores that lost events; the steps count whole steps
  // The end of the latest event the budget dropped (clients' clock): from then on the client's events are
  // whole. INT64_MIN when the budget dropped none.
  int64_t lost_until_ns = std::numeric_limits<int64_t>::min();
  uint64_t dropped_events() const;
  uint64_t dropped_steps() const;

  // Calls `f(event, where)` for every kept event, in arrival order.
  void for_each(absl::FunctionRef<void(const HeldEvent&, HeldRecord)> f) const;
  // The kept event held at `where`, which started at `start_ns` (a record holds its start relative to the one
  // before it, so a record read alone is given its start).
  HeldEvent at(HeldRecord where, int64_t start_ns) const;
};

// What one client's held events span, for saying what a recorder really holds.
struct HeldSpan {
  uint64_t client = 0;
  int64_t oldest_start_ns = 0;  // the earliest start held (clients' clock)
  // From when on nothing was lost: the end of the latest event the budget dropped, or oldest_start_ns.
  int64_t whole_since_ns = 0;
  int64_t newest_end_ns = 0;
  uint64_t events = 0;
};

// What a capture reserves for one held event, in bytes, beyond the bytes held.
struct CaptureCost {
  // What building and answering an event costs beyond its record: its sort key while its plane is built, and its
  // serialized bytes in the answer (planes are written as they are built, and sent as those bytes).
  static size_t of(const local::EventMsg& event);
};

class CompactEventStore {
 public:
  CompactEventStore(size_t budget_bytes, Retention retention);
  ~CompactEventStore();
  CompactEventStore(const CompactEventStore&) = delete;
  CompactEventStore& operator=(const CompactEventStore&) = delete;

  // Holds one batch of `client`'s events, making room by dropping whole chunks where the budget is full.
  // Events wholly outside the window (set_window) are not held, nor counted.
  void add(uint64_t client, const local::EventsMsg& batch);
  // The same for input stages, held as events of kind kInputStage (see local::EventKind).
  void add(uint64_t client, const local::InputStagesMsg& batch);
  // The same for allocation records, held as events of kinds kAllocation and kDeallocation.
  void add(uint64_t client, const local::AllocationsMsg& batch);
  // The span of time worth holding, in the clients' clock (a capture window; unbounded by default).
  void set_window(int64_t begin_ns, int64_t end_ns) {
    window_begin_ns_ = begin_ns;
    window_end_ns_ = end_ns;
  }
  // Charges `bytes` of other data of `client` (device planes) against the budget, making room the same way;
  // false (nothing charged) when even that cannot make room.
  bool charge(uint64_t client, size_t bytes);

  // Hands over `client`'s held records, leaves out those of every step that lost events (and any in the time
  // span that was lost) and forgets the client.
  HeldClientEvents take(uint64_t client);
  // A copy of the held records of `client` whose events overlap [begin_ns, end_ns] (the clients' clock), left
  // held; steps that lost events are left out whole, as in take(). `drops` counts only what that rule removed.
  HeldClientEvents copy(uint64_t client, int64_t begin_ns, int64_t end_ns) const;
  // Forgets the chunks whose events all ended before `cutoff_ns`: they aged out of a recorder's window, which
  // is no loss. A client left with nothing held is forgotten.
  void expire_before(int64_t cutoff_ns);
  std::vector<uint64_t> client_ids() const;

  // Per client: what its held events span, and from when on they are whole.
  std::vector<HeldSpan> held_spans() const;

  size_t budget_bytes() const { return budget_; }
  // Charged against the budget: the bytes held, plus a capture's build reservation.
  size_t charged_bytes() const { return charged_; }
  size_t peak_charged_bytes() const { return peak_charged_; }
  // Bytes really held: chunks, names, streams and bookkeeping.
  size_t held_bytes() const { return charged_ - reserved_; }
  // Bytes of the records themselves, the compactness figure.
  size_t record_bytes() const;
  uint64_t held_events() const;
  // Events dropped to make room (or refused) since the store was made, over every client it held.
  uint64_t lost_events() const { return lost_events_; }
  // The earliest start held (clients' clock); 0 when nothing is held.
  int64_t oldest_start_ns() const;

 private:
  struct Chunk;
  struct Client;
  using Clients = std::map<uint64_t, std::unique_ptr<Client>>;
  static const size_t kHeldChunkBytes;

  Client& client(uint64_t id);
  // Drops a client and gives back all it was charged.
  Clients::iterator forget(Clients::iterator it);
  // Frees budget until `bytes` more fit, taking chunks from the client furthest over its share (or from
  // `requester` itself); false when nothing more can be freed.
  bool make_room(Client& requester, size_t bytes);
  bool evict_one(Client& victim, const Client& requester);
  void start_chunk(Client& c);
  void append(Client& c, uint32_t stream, const local::EventMsg& e, uint32_t id, int32_t arg, size_t reserve);
  size_t fair_share() const;
  // Leaves out of `out` every event of a step that overlaps the span `c` lost events in, and anything else in
  // that span, counting them in out.drops.
  static void leave_out_incomplete_steps(const Client& c, HeldClientEvents& out);

  size_t budget_;
  Retention retention_;
  int64_t window_begin_ns_ = std::numeric_limits<int64_t>::min();
  int64_t window_end_ns_ = std::numeric_limits<int64_t>::max();
  size_t charged_ = 0;
  size_t reserved_ = 0;  // the part of charged_ that is a capture's build reservation
  size_t peak_charged_ = 0;
  uint64_t lost_events_ = 0;
  Clients clients_;
};

}  // namespace podscope::agent
