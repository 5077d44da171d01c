#include "agent/events/compact_event_store.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "proto/xspace/saturating.h"

namespace podscope::agent {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using local::EventKind;

// A record: one flags byte (the kind in the low four bits, then which optional fields follow), the stream
// index, the start as a zigzag delta from the previous record's start in the chunk, the zigzag duration,
// then id, arg, value and value2 where not zero. A typical event takes 8-20 bytes.
constexpr uint8_t kHasId = 1 << 4;
constexpr uint8_t kHasArg = 1 << 5;
constexpr uint8_t kHasValue = 1 << 6;
constexpr uint8_t kHasValue2 = 1 << 7;
constexpr size_t kMaxVarint64Bytes = 10;
constexpr size_t kMaxRecordBytes = 1 + 5 + 6 * kMaxVarint64Bytes;
constexpr size_t kChunkBytes = 16 << 10;

// What holding costs beyond the records, charged so that a flood of distinct names or threads is bounded too:
// a name is kept twice (the list and the index: two strings, a hash slot and the list's slack), a stream once
// in a list and once in a tree node, and a chunk and a client carry their own bookkeeping.
constexpr size_t kNameOverheadBytes = 2 * sizeof(std::string) + 32;
constexpr size_t kStreamBytes = sizeof(EventStream) + 64;
constexpr size_t kClientBytes = 1024;

// Where an event ends: a negative duration counts as none, and a client's end past INT64_MAX is the end of time.
template <typename Event>
int64_t end_of(const Event& e) {
  return xspace::saturating_add(e.start_ns, std::max<int64_t>(e.duration_ns, 0));
}

// Whether an event's id / arg is a name the batch defines.
bool id_is_name(EventKind kind) { return local::is_name_id(local::traits_of(kind).id); }
bool arg_is_name(EventKind kind) { return local::is_name_id(local::traits_of(kind).arg); }

// The record's flags byte keeps the kind in its low four bits; a record that a take or copy leaves out (a dropped
// step's, or one outside a copy's span) keeps its place with the kind kLeftOut.
constexpr uint8_t kKindBits = 0x0f;
constexpr uint8_t kLeftOut = 0x0f;
static_assert(std::size(local::kEventKinds) < kLeftOut);

bool is_left_out(const HeldEvent& e) { return static_cast<uint8_t>(e.kind) == kLeftOut; }

// Reads the record at `in`'s position into `e`; `start` is the start of the record before it, and becomes its own.
void read_record(CodedInputStream& in, int64_t& start, HeldEvent& e) {
  uint8_t flags = 0;
  uint32_t stream = 0;
  uint64_t delta = 0, duration = 0, id = 0, arg = 0, value = 0, value2 = 0;
  in.ReadRaw(&flags, 1);
  in.ReadVarint32(&stream);
  in.ReadVarint64(&delta);
  in.ReadVarint64(&duration);
  if (flags & kHasId) in.ReadVarint64(&id);
  if (flags & kHasArg) in.ReadVarint64(&arg);
  if (flags & kHasValue) in.ReadVarint64(&value);
  if (flags & kHasValue2) in.ReadVarint64(&value2);
  start =
      static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(WireFormatLite::ZigZagDecode64(delta)));
  e.kind = static_cast<EventKind>(flags & kKindBits);
  e.stream = stream;
  e.start_ns = start;
  e.duration_ns = WireFormatLite::ZigZagDecode64(duration);
  e.id = static_cast<uint32_t>(id);
  e.arg = WireFormatLite::ZigZagDecode32(static_cast<uint32_t>(arg));
  e.value = WireFormatLite::ZigZagDecode64(value);
  e.value2 = WireFormatLite::ZigZagDecode64(value2);
}

// Calls `f(event, offset)` for each of the first `records` records in `bytes`, left-out ones included.
template <typename F>
void decode_records(const std::vector<uint8_t>& bytes, size_t used, uint32_t records, F&& f) {
  CodedInputStream in(bytes.data(), static_cast<int>(used));
  int64_t start = 0;
  for (uint32_t i = 0; i < records; ++i) {
    const auto offset = static_cast<uint32_t>(in.CurrentPosition());
    HeldEvent e;
    read_record(in, start, e);
    f(e, offset);
  }
}

// Leaves out every kept record of `held` whose event `leave(event)` says so.
template <typename Leave>
void leave_out_if(HeldClientEvents& held, Leave&& leave) {
  for (HeldChunk& chunk : held.chunks) {
    decode_records(chunk.bytes, chunk.used, chunk.records, [&](const HeldEvent& e, uint32_t offset) {
      if (is_left_out(e) || !leave(e)) return;
      chunk.bytes[offset] = static_cast<uint8_t>((chunk.bytes[offset] & ~kKindBits) | kLeftOut);
      --held.kept_events;
    });
  }
}

}  // namespace

// A capture's planes are built from the held records a core at a time, written to the wire as they are built and
// answered as those bytes (no copy). What an event costs beyond its record: its sort key while its core's plane is
// built (every event may be on one core), and its serialized bytes twice: in the answer, and in the pieces of its
// plane while they are joined (and the heap that glibc keeps of them). Measured (capture_memory_bench, floods of a
// step and 9 computes per step, 256 MiB): the answer takes 53 bytes per kept event, and the agent grew by 0.62 of
// the limit with the floods on 4 cores, 0.76 with them on one.
size_t CaptureCost::of(const local::EventMsg& event) {
  constexpr size_t kSortKeyBytes = 16;
  constexpr size_t kEventSerializedBytes = 28, kStatSerializedBytes = 9;
  const size_t stats = local::traits_of(event.kind).stats;
  return kSortKeyBytes + 2 * (kEventSerializedBytes + stats * kStatSerializedBytes);
}

uint64_t HeldClientEvents::dropped_events() const {
  uint64_t n = 0;
  for (const auto& [core, d] : drops) n += d.events;
  return n;
}
uint64_t HeldClientEvents::dropped_steps() const {
  uint64_t n = 0;
  for (const auto& [core, d] : drops) n += d.steps;
  return n;
}

void HeldClientEvents::for_each(absl::FunctionRef<void(const HeldEvent&, HeldRecord)> f) const {
  for (uint32_t i = 0; i < chunks.size(); ++i) {
    decode_records(chunks[i].bytes, chunks[i].used, chunks[i].records, [&](const HeldEvent& e, uint32_t offset) {
      if (!is_left_out(e)) f(e, {i, offset});
    });
  }
}

HeldEvent HeldClientEvents::at(HeldRecord where, int64_t start_ns) const {
  const HeldChunk& chunk = chunks[where.chunk];
  CodedInputStream in(chunk.bytes.data() + where.offset, static_cast<int>(chunk.used - where.offset));
  int64_t start = 0;
  HeldEvent e;
  read_record(in, start, e);
  e.start_ns = start_ns;
  return e;
}

struct CompactEventStore::Chunk {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kChunkBytes);
  size_t used = 0;
  uint32_t events = 0;
  size_t charged = 0;   // the chunk's bytes and bookkeeping, plus its events' build reservations
  size_t reserved = 0;  // of which build reservations
  int64_t last_start_ns = 0;
  int64_t first_start_ns = std::numeric_limits<int64_t>::max();
  int64_t last_end_ns = std::numeric_limits<int64_t>::min();  // the latest end of its events
  bool head = false;                                          // among the earliest a capture keeps

  // Calls `f(HeldEvent)` for every record.
  template <typename F>
  void decode(F&& f) const {
    decode_records(bytes, used, events, [&f](const HeldEvent& e, uint32_t) { f(e); });
  }
};

// A chunk as held: its bytes, its bookkeeping and its slot in the client's deque.
const size_t CompactEventStore::kHeldChunkBytes = kChunkBytes + sizeof(CompactEventStore::Chunk) + 16;

struct CompactEventStore::Client {
  std::vector<std::string> names{std::string()};
  absl::flat_hash_map<std::string, uint32_t> name_index;
  std::vector<EventStream> streams;
  std::map<std::pair<int32_t, int64_t>, uint32_t> stream_index;
  std::deque<Chunk> chunks;  // oldest first; the last one is being written
  size_t charged = 0;
  bool tail_started = false;  // a chunk past the kept head was started: later ones are never head
  uint64_t received = 0;
  std::map<int32_t, CoreDrops> lost;  // from chunks dropped and events refused
  int64_t lost_begin_ns = std::numeric_limits<int64_t>::max();
  int64_t lost_end_ns = std::numeric_limits<int64_t>::min();

  void lose(const HeldEvent& e) {
    CoreDrops& d = lost[streams[e.stream].core];
    ++d.events;
    if (e.kind == EventKind::kStep) ++d.steps;
    lost_begin_ns = std::min(lost_begin_ns, e.start_ns);
    lost_end_ns = std::max(lost_end_ns, end_of(e));
  }
};

CompactEventStore::CompactEventStore(size_t budget_bytes, Retention retention)
    : budget_(budget_bytes), retention_(retention) {}
CompactEventStore::~CompactEventStore() = default;

CompactEventStore::Client& CompactEventStore::client(uint64_t id) {
  auto& c = clients_[id];
  if (!c) {
    c = std::make_unique<Client>();
    c->charged = kClientBytes;  // never refused: at most one per connection
    charged_ += kClientBytes;
    peak_charged_ = std::max(peak_charged_, charged_);
  }
  return *c;
}

CompactEventStore::Clients::iterator CompactEventStore::forget(Clients::iterator it) {
  const Client& c = *it->second;
  charged_ -= c.charged;
  for (const Chunk& chunk : c.chunks) reserved_ -= chunk.reserved;
  return clients_.erase(it);
}

size_t CompactEventStore::fair_share() const { return budget_ / std::max<size_t>(1, clients_.size()); }

bool CompactEventStore::evict_one(Client& victim, const Client& requester) {
  if (victim.chunks.empty()) return false;
  // The oldest chunk past the head; else, for a client over its share, the newest head chunk.
  auto it = std::find_if(victim.chunks.begin(), victim.chunks.end(), [](const Chunk& c) { return !c.head; });
  if (it == victim.chunks.end()) {
    if (&victim == &requester && victim.charged <= fair_share()) return false;
    it = std::prev(victim.chunks.end());
  }
  it->decode([&victim](const HeldEvent& e) { victim.lose(e); });
  lost_events_ += it->events;
  victim.charged -= it->charged;
  charged_ -= it->charged;
  reserved_ -= it->reserved;
  victim.chunks.erase(it);
  return true;
}

bool CompactEventStore::make_room(Client& requester, size_t bytes) {
  while (charged_ + bytes > budget_) {
    const size_t share = fair_share();
    // Candidates: clients over their share, furthest first; the requester last.
    std::vector<Client*> over;
    for (auto& [id, c] : clients_)
      if (c.get() != &requester && c->charged > share && !c->chunks.empty()) over.push_back(c.get());
    std::sort(over.begin(), over.end(), [](const Client* a, const Client* b) { return a->charged > b->charged; });
    if (requester.charged > share) over.insert(over.begin(), &requester);
    over.push_back(&requester);
    bool freed = false;
    for (Client* victim : over) {
      if (evict_one(*victim, requester)) {
        freed = true;
        break;
      }
    }
    if (!freed) return false;
  }
  return true;
}

void CompactEventStore::start_chunk(Client& c) {
  Chunk chunk;
  if (retention_ == Retention::kEarliestAndLatest && !c.tail_started && c.charged < fair_share() / 2) {
    chunk.head = true;
  } else {
    c.tail_started = true;
  }
  chunk.charged = kHeldChunkBytes;
  c.charged += kHeldChunkBytes;
  charged_ += kHeldChunkBytes;
  peak_charged_ = std::max(peak_charged_, charged_);
  c.chunks.push_back(std::move(chunk));
}

void CompactEventStore::append(Client& c, uint32_t stream, const local::EventMsg& e, uint32_t id, int32_t arg,
                               size_t reserve) {
  Chunk& chunk = c.chunks.back();
  uint8_t* p = chunk.bytes.data() + chunk.used;
  uint8_t flags = static_cast<uint8_t>(e.kind) & kKindBits;
  if (id) flags |= kHasId;
  if (arg) flags |= kHasArg;
  if (e.value) flags |= kHasValue;
  if (e.value2) flags |= kHasValue2;
  *p++ = flags;
  p = CodedOutputStream::WriteVarint32ToArray(stream, p);
  const int64_t delta =
      static_cast<int64_t>(static_cast<uint64_t>(e.start_ns) - static_cast<uint64_t>(chunk.last_start_ns));
  p = CodedOutputStream::WriteVarint64ToArray(WireFormatLite::ZigZagEncode64(delta), p);
  p = CodedOutputStream::WriteVarint64ToArray(WireFormatLite::ZigZagEncode64(e.duration_ns), p);
  if (id) p = CodedOutputStream::WriteVarint64ToArray(id, p);
  if (arg) p = CodedOutputStream::WriteVarint64ToArray(WireFormatLite::ZigZagEncode32(arg), p);
  if (e.value) p = CodedOutputStream::WriteVarint64ToArray(WireFormatLite::ZigZagEncode64(e.value), p);
  if (e.value2) p = CodedOutputStream::WriteVarint64ToArray(WireFormatLite::ZigZagEncode64(e.value2), p);
  chunk.used = static_cast<size_t>(p - chunk.bytes.data());
  chunk.last_start_ns = e.start_ns;
  chunk.first_start_ns = std::min(chunk.first_start_ns, e.start_ns);
  chunk.last_end_ns = std::max(chunk.last_end_ns, end_of(e));
  ++chunk.events;
  chunk.charged += reserve;
  chunk.reserved += reserve;
  c.charged += reserve;
  charged_ += reserve;
  reserved_ += reserve;
  peak_charged_ = std::max(peak_charged_, charged_);
}

void CompactEventStore::add(uint64_t id, const local::EventsMsg& batch) {
  Client& c = client(id);

  // The batch's streams and names, as indices of this client; bookkeeping that cannot be charged refuses
  // the events that need it.
  uint32_t stream = 0;
  if (auto it = c.stream_index.find({batch.core, batch.thread_id}); it != c.stream_index.end()) {
    stream = it->second;
  } else {
    stream = static_cast<uint32_t>(c.streams.size());
    c.streams.push_back({batch.core, batch.thread_id});
    c.stream_index.emplace(std::make_pair(batch.core, batch.thread_id), stream);
    c.charged += kStreamBytes;  // never refused: at most one per batch
    charged_ += kStreamBytes;
    peak_charged_ = std::max(peak_charged_, charged_);
  }
  absl::flat_hash_map<uint32_t, uint32_t> batch_names;  // the batch's id → the client's name index
  for (const auto& [bid, name] : batch.names) {
    if (auto it = c.name_index.find(name); it != c.name_index.end()) {
      batch_names[bid] = it->second;
      continue;
    }
    const size_t cost = (name.size() > 15 ? 2 * (name.size() + 1) : 0) + kNameOverheadBytes;
    if (!make_room(c, cost)) continue;
    const auto index = static_cast<uint32_t>(c.names.size());
    c.names.push_back(name);
    c.name_index.emplace(name, index);
    c.charged += cost;
    charged_ += cost;
    batch_names[bid] = index;
  }
  auto name_of = [&](uint32_t bid) -> uint32_t {
    auto it = batch_names.find(bid);
    return it == batch_names.end() ? 0 : it->second;
  };

  for (const local::EventMsg& e : batch.events) {
    if (e.start_ns > window_end_ns_ || end_of(e) < window_begin_ns_) continue;
    ++c.received;
    const uint32_t event_id = id_is_name(e.kind) ? name_of(e.id) : e.id;
    const int32_t arg = arg_is_name(e.kind) ? static_cast<int32_t>(name_of(static_cast<uint32_t>(e.arg))) : e.arg;
    const size_t reserve = retention_ == Retention::kEarliestAndLatest ? CaptureCost::of(e) : 0;
    const bool new_chunk = c.chunks.empty() || c.chunks.back().used + kMaxRecordBytes > kChunkBytes;
    if (!make_room(c, reserve + (new_chunk ? kHeldChunkBytes : 0))) {
      HeldEvent refused;
      refused.kind = e.kind;
      refused.stream = stream;
      refused.start_ns = e.start_ns;
      refused.duration_ns = e.duration_ns;
      c.lose(refused);
      ++lost_events_;
      continue;
    }
    // Making room may have dropped the chunk being written.
    if (c.chunks.empty() || c.chunks.back().used + kMaxRecordBytes > kChunkBytes) start_chunk(c);
    append(c, stream, e, event_id, arg, reserve);
  }
}

void CompactEventStore::add(uint64_t id, const local::InputStagesMsg& batch) {
  local::EventsMsg events{batch.session, batch.core, batch.thread_id, batch.names, {}};
  events.events.reserve(batch.stages.size());
  for (const local::InputStageMsg& s : batch.stages) {
    events.events.push_back({EventKind::kInputStage, s.name_id, static_cast<int32_t>(s.category), s.start_ns,
                             s.duration_ns, static_cast<int64_t>(s.stage_id), static_cast<int64_t>(s.parent_id)});
  }
  add(id, events);
}

void CompactEventStore::add(uint64_t id, const local::AllocationsMsg& batch) {
  local::EventsMsg events{batch.session, batch.core, batch.thread_id, batch.names, {}};
  events.events.reserve(batch.allocations.size());
  for (const local::AllocationMsg& a : batch.allocations) {
    const bool allocation = a.op == local::AllocationOp::kAllocate;
    events.events.push_back({allocation ? EventKind::kAllocation : EventKind::kDeallocation, a.allocator_id,
                             static_cast<int32_t>(a.op_name_id), a.time_ns, 0, a.bytes,
                             static_cast<int64_t>(a.address)});
  }
  add(id, events);
}

bool CompactEventStore::charge(uint64_t id, size_t bytes) {
  Client& c = client(id);
  if (!make_room(c, bytes)) return false;
  c.charged += bytes;
  charged_ += bytes;
  peak_charged_ = std::max(peak_charged_, charged_);
  return true;
}

namespace {

// Disjoint [begin, end] spans, sorted, for "does this time fall in a dropped step".
struct Spans {
  std::vector<std::pair<int64_t, int64_t>> spans;
  void normalize() {
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& s : spans) {
      if (!merged.empty() && s.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, s.second);
      } else {
        merged.push_back(s);
      }
    }
    spans = std::move(merged);
  }
  bool contains(int64_t t) const {
    auto it = std::upper_bound(spans.begin(), spans.end(), t,
                               [](int64_t v, const std::pair<int64_t, int64_t>& s) { return v < s.first; });
    return it != spans.begin() && t <= std::prev(it)->second;
  }
};

}  // namespace

void CompactEventStore::leave_out_incomplete_steps(const Client& c, HeldClientEvents& out) {
  // Whole steps only: a step that overlaps the span where events were lost goes with everything on its
  // core inside it; so does anything else inside that span.
  if (c.lost_begin_ns > c.lost_end_ns) return;
  const int64_t lost_begin = c.lost_begin_ns, lost_end = c.lost_end_ns;
  std::map<int32_t, Spans> dropped_steps;
  out.for_each([&](const HeldEvent& e, HeldRecord) {
    if (e.kind != EventKind::kStep) return;
    const int64_t end = end_of(e);
    if (end >= lost_begin && e.start_ns <= lost_end)
      dropped_steps[c.streams[e.stream].core].spans.push_back({e.start_ns, end});
  });
  for (auto& [core, spans] : dropped_steps) spans.normalize();
  auto dropped = [&](const HeldEvent& e) {
    if (e.start_ns >= lost_begin && e.start_ns <= lost_end) return true;
    auto it = dropped_steps.find(c.streams[e.stream].core);
    return it != dropped_steps.end() && it->second.contains(e.start_ns);
  };
  leave_out_if(out, [&](const HeldEvent& e) {
    if (!dropped(e)) return false;
    CoreDrops& d = out.drops[c.streams[e.stream].core];
    ++d.events;
    if (e.kind == EventKind::kStep) ++d.steps;
    return true;
  });
}

HeldClientEvents CompactEventStore::take(uint64_t id) {
  HeldClientEvents out;
  auto found = clients_.find(id);
  if (found == clients_.end()) return out;
  Client& c = *found->second;

  out.chunks.reserve(c.chunks.size());
  for (Chunk& chunk : c.chunks) {
    out.chunks.push_back({std::move(chunk.bytes), chunk.used, chunk.events});
    out.kept_events += chunk.events;
  }
  out.received_events = c.received;
  out.drops = c.lost;
  if (c.lost_end_ns >= c.lost_begin_ns) out.lost_until_ns = c.lost_end_ns;
  leave_out_incomplete_steps(c, out);

  out.names = std::move(c.names);
  out.streams = std::move(c.streams);
  forget(found);
  return out;
}

HeldClientEvents CompactEventStore::copy(uint64_t id, int64_t begin_ns, int64_t end_ns) const {
  HeldClientEvents out;
  auto found = clients_.find(id);
  if (found == clients_.end()) return out;
  const Client& c = *found->second;
  auto overlaps = [&](const Chunk& chunk) { return chunk.last_end_ns >= begin_ns && chunk.first_start_ns <= end_ns; };
  out.chunks.reserve(static_cast<size_t>(std::count_if(c.chunks.begin(), c.chunks.end(), overlaps)));
  for (const Chunk& chunk : c.chunks) {
    if (!overlaps(chunk)) continue;
    out.chunks.push_back(
        {{chunk.bytes.begin(), chunk.bytes.begin() + static_cast<ptrdiff_t>(chunk.used)}, chunk.used, chunk.events});
    out.kept_events += chunk.events;
  }
  // Outside the span is not a loss: left out, not counted.
  leave_out_if(out, [&](const HeldEvent& e) { return e.start_ns > end_ns || end_of(e) < begin_ns; });
  leave_out_incomplete_steps(c, out);
  out.received_events = out.kept_events + out.dropped_events();
  if (c.lost_end_ns >= c.lost_begin_ns) out.lost_until_ns = c.lost_end_ns;
  out.names = c.names;
  out.streams = c.streams;
  return out;
}

void CompactEventStore::expire_before(int64_t cutoff_ns) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = *it->second;
    while (!c.chunks.empty() && c.chunks.size() > 1 && c.chunks.front().last_end_ns < cutoff_ns) {
      c.charged -= c.chunks.front().charged;
      charged_ -= c.chunks.front().charged;
      reserved_ -= c.chunks.front().reserved;
      c.chunks.pop_front();
    }
    // The chunk being written expires too once everything in it is old: the client has gone quiet.
    const bool quiet = c.chunks.size() == 1 && c.chunks.front().last_end_ns < cutoff_ns;
    if (quiet || (c.chunks.empty() && c.received > 0)) {
      it = forget(it);
      continue;
    }
    ++it;
  }
}

std::vector<HeldSpan> CompactEventStore::held_spans() const {
  std::vector<HeldSpan> out;
  for (const auto& [id, c] : clients_) {
    if (c->chunks.empty()) continue;
    HeldSpan span;
    span.client = id;
    span.oldest_start_ns = std::numeric_limits<int64_t>::max();
    span.newest_end_ns = std::numeric_limits<int64_t>::min();
    for (const Chunk& chunk : c->chunks) {
      span.oldest_start_ns = std::min(span.oldest_start_ns, chunk.first_start_ns);
      span.newest_end_ns = std::max(span.newest_end_ns, chunk.last_end_ns);
      span.events += chunk.events;
    }
    span.whole_since_ns =
        c->lost_end_ns >= c->lost_begin_ns ? std::max(span.oldest_start_ns, c->lost_end_ns) : span.oldest_start_ns;
    out.push_back(span);
  }
  return out;
}

std::vector<uint64_t> CompactEventStore::client_ids() const {
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : clients_) ids.push_back(id);
  return ids;
}

int64_t CompactEventStore::oldest_start_ns() const {
  int64_t oldest = std::numeric_limits<int64_t>::max();
  for (const auto& [id, c] : clients_)
    for (const Chunk& chunk : c->chunks) oldest = std::min(oldest, chunk.first_start_ns);
  return oldest == std::numeric_limits<int64_t>::max() ? 0 : oldest;
}

size_t CompactEventStore::record_bytes() const {
  size_t n = 0;
  for (const auto& [id, c] : clients_)
    for (const Chunk& chunk : c->chunks) n += chunk.used;
  return n;
}

uint64_t CompactEventStore::held_events() const {
  uint64_t n = 0;
  for (const auto& [id, c] : clients_)
    for (const Chunk& chunk : c->chunks) n += chunk.events;
  return n;
}

}  // namespace podscope::agent
