#include "agent/recorder/triggered_snapshots.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include <prometheus/family.h>
#include <zstd.h>

#include "daemon/atomic_file.h"
#include "daemon/log.h"
#include "daemon/run_name.h"

namespace podscope::agent {
namespace {

constexpr std::string_view kSlowStep = "slow_step";
// zstd's fastest level: a snapshot is packed on the freezing thread, and its step-after-step records compress
// 4.6 times even so (a full 10 s window of two fast ring_trainer ranks: 69.7 MB to 15.0 MB).
constexpr int kPackLevel = 1;
constexpr std::string_view kIdSequenceMark = "_slow_step_";  // an id is <run name>_slow_step_<sequence>
constexpr std::string_view kXSpaceSuffix = ".xplane.pb";
constexpr std::string_view kInfoSuffix = ".stored_snapshot.txtpb";
constexpr std::string_view kDeletedName = "podscope_flight_recorder_snapshots_deleted_total";
constexpr std::string_view kDeletedHelp =
    "Triggered snapshots retention deleted, oldest first (flight_recorder_max_snapshots and flight_recorder_max_mb "
    "in memory, flight_recorder_disk_mb on disk)";
// In the order of TriggeredSnapshots::Outcome.
constexpr std::array<std::string_view, 8> kOutcomeNames{"snapshot", "within_cooldown", "warming_up", "below_bar",
                                                        "covered",  "freezer_busy",    "too_late",   "recorder_off"};

prometheus::Family<prometheus::Counter>& counter_family(prometheus::Registry& registry, const std::string& name,
                                                        const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

std::string zstd_pack(const std::string& raw) {
  std::string packed(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compress(packed.data(), packed.size(), raw.data(), raw.size(), kPackLevel);
  if (ZSTD_isError(n)) return {};  // with a bound-sized buffer, only when zstd could not allocate
  packed.resize(n);
  packed.shrink_to_fit();
  return packed;
}

absl::StatusOr<std::string> zstd_unpack(const std::string& packed, size_t size) {
  std::string raw(size, '\0');
  const size_t n = ZSTD_decompress(raw.data(), raw.size(), packed.data(), packed.size());
  if (ZSTD_isError(n) || n != size) {
    return absl::DataLossError(std::string("stored snapshot does not unpack: ") +
                               (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size"));
  }
  return raw;
}

std::string program_of(const ClientRegistry& clients, int32_t pid) {
  for (const LocalClientInfo& c : clients.clients()) {
    if (c.pid == pid) return c.program;
  }
  return "";
}

// The sequence number at the end of a snapshot id; 0 when it has none.
uint64_t sequence_of(const std::string& id) {
  const size_t mark = id.rfind(kIdSequenceMark);
  if (mark == std::string::npos) return 0;
  const std::string digits = id.substr(mark + kIdSequenceMark.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return 0;
  return std::stoull(digits);
}

absl::StatusOr<std::string> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path.string());
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return absl::DataLossError(path.string() + " unreadable");
  return content.str();
}

uint64_t size_or_zero(const std::filesystem::path& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  return error ? 0 : size;
}

}  // namespace

TriggeredSnapshots::TriggeredSnapshots(FlightRecorder& recorder, std::shared_ptr<ClientRegistry> clients,
                                       const Clock& clock, std::string host_name, TriggeredSnapshotSettings settings,
                                       prometheus::Registry& metrics)
    : recorder_(recorder),
      clients_(std::move(clients)),
      clock_(clock),
      host_name_(std::move(host_name)),
      settings_(std::move(settings)),
      detector_(settings_.slow_step),
      slow_step_snapshots_(counter_family(metrics, "podscope_triggered_snapshots_total",
                                          "Flight-recorder snapshots frozen by a trigger, by reason")
                               .Add({{"host", host_name_}, {"reason", std::string(kSlowStep)}})),
      deleted_from_memory_(counter_family(metrics, std::string(kDeletedName), std::string(kDeletedHelp))
                               .Add({{"host", host_name_}, {"where", "memory"}})),
      deleted_from_disk_(counter_family(metrics, std::string(kDeletedName), std::string(kDeletedHelp))
                             .Add({{"host", host_name_}, {"where", "disk"}})) {
  auto& slow_steps = counter_family(metrics, "podscope_slow_steps_total",
                                    "Slow steps of annotated processes, by what became of them: a snapshot, one "
                                    "within the cool-down of another, or none (warming up, past the budget and "
                                    "below the bar of the last cool-down's slow steps, covered by the last "
                                    "snapshot, freezer busy, too late for the window, recorder off)");
  for (std::string_view outcome : kOutcomeNames) {
    outcomes_.push_back(&slow_steps.Add({{"host", host_name_}, {"outcome", std::string(outcome)}}));
  }
}

TriggeredSnapshots::~TriggeredSnapshots() { stop(); }

absl::Status TriggeredSnapshots::start() {
  if (!settings_.runs_directory.empty()) {
    std::vector<Held> found = find_stored();
    std::lock_guard lock(mu_);
    uint64_t bytes = 0;
    for (Held& h : found) {
      sequence_ = std::max(sequence_, sequence_of(h.info.id()));
      bytes += h.disk_bytes;
      held_.push_back(std::move(h));
    }
    if (!held_.empty()) {
      PODSCOPE_LOG(kInfo) << "found " << held_.size() << " triggered snapshots of " << host_name_ << " ("
                          << bytes / 1024 << " KiB) under " << settings_.runs_directory.string();
    }
    apply_retention();
  }
  worker_ = std::thread([this] { run(); });
  return absl::OkStatus();
}

void TriggeredSnapshots::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void TriggeredSnapshots::observe_step(int32_t pid, const StepRecord& step) {
  const SlowStepVerdict verdict = detector_.observe(pid, step);
  switch (verdict.kind) {
    case SlowStepVerdict::Kind::kNotSlow: return;
    case SlowStepVerdict::Kind::kWarmingUp: count(Outcome::kWarmingUp); return;
    case SlowStepVerdict::Kind::kBelowBar: count(Outcome::kBelowBar); return;
    case SlowStepVerdict::Kind::kCovered: count(Outcome::kCovered); return;
    case SlowStepVerdict::Kind::kSnapshot: break;
  }
  // The span ends when the slow step's events have arrived; a step claiming to end in the future is held to now.
  const int64_t end = std::min(step.end_ns, clock_.now_ns()) + settings_.settle_ms * 1'000'000;
  {
    std::lock_guard lock(mu_);
    if (pending_.size() >= kMaxPending) {
      count(Outcome::kFreezerBusy);
      return;
    }
    pending_.push_back(Trigger{verdict.slow, verdict.inside_cooldown, end});
  }
  wake_.notify_all();
}

void TriggeredSnapshots::run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    const Trigger trigger = pending_.front();
    const auto until_end = std::chrono::nanoseconds(std::max<int64_t>(trigger.end_ns - clock_.now_ns(), 0));
    if (wake_.wait_for(lock, until_end, [this] { return stopping_; })) return;
    pending_.pop_front();
    lock.unlock();
    freeze(trigger);
    lock.lock();
  }
}

podscope::v1::StoredSnapshot TriggeredSnapshots::describe(const SlowStep& slow, const RecorderSnapshot& snapshot) {
  podscope::v1::StoredSnapshot info;
  info.set_id(tf_run_name(snapshot.end_ns) + std::string(kIdSequenceMark) + std::to_string(++sequence_));
  info.set_reason(std::string(kSlowStep));
  info.set_pid(slow.pid);
  info.set_program(program_of(*clients_, slow.pid));
  info.set_core_id(slow.step.core_id);
  info.set_step_num(slow.step.step_num);
  info.set_step_ns(slow.step_ns);
  info.set_median_ns(slow.median_ns);
  info.set_step_end_ns(slow.step.end_ns);
  info.set_start_ns(snapshot.begin_ns);
  info.set_end_ns(snapshot.end_ns);
  return info;
}

void TriggeredSnapshots::freeze(const Trigger& trigger) {
  const SlowStep& slow = trigger.slow;
  const std::optional<FlightRecorderState> state = recorder_.state();
  if (!state) {  // the recorder was stopped (StopContinuousProfiling): there is no window to freeze
    count(Outcome::kRecorderOff);
    return;
  }
  // The window moved on while earlier triggers were frozen: the slow step (its last half window, when it is
  // longer) has begun to leave it.
  const int64_t must_hold_from = std::max(slow.step.begin_ns, slow.step.end_ns - state->window_ns / 2);
  if (clock_.now_ns() - state->window_ns > must_hold_from) {
    count(Outcome::kTooLate);
    PODSCOPE_LOG(kWarning) << "slow step " << slow.step.step_num << " of pid " << slow.pid
                           << " not snapshot: it left the flight recorder's window before its turn to be frozen";
    return;
  }
  absl::StatusOr<RecorderSnapshot> snapshot =
      recorder_.span(trigger.end_ns - state->window_ns, trigger.end_ns, WhenBuilding::kWait);
  if (!snapshot.ok()) {
    count(Outcome::kRecorderOff);
    return;
  }
  Held held;
  {
    std::lock_guard lock(mu_);
    held.info = describe(slow, *snapshot);
  }
  held.info.set_bytes(snapshot->xspace.size());
  if (!settings_.runs_directory.empty()) {
    if (absl::Status written = write(held, snapshot->xspace); !written.ok()) {
      PODSCOPE_LOG(kWarning) << "triggered snapshot " << held.info.id() << " not written: " << written.message();
    }
  }
  held.packed = zstd_pack(snapshot->xspace);
  std::string().swap(snapshot->xspace);
  if (held.packed.empty()) {
    PODSCOPE_LOG(kWarning) << "triggered snapshot " << held.info.id() << " not kept in memory: it did not compress";
  }
  slow_step_snapshots_.Increment();
  count(trigger.inside_cooldown ? Outcome::kWithinCooldown : Outcome::kSnapshot);
  PODSCOPE_LOG(kInfo) << "triggered snapshot " << held.info.id() << ": pid " << slow.pid << " (" << held.info.program()
                      << ") core " << slow.step.core_id << " step " << slow.step.step_num << " took "
                      << slow.step_ns / 1'000'000.0 << " ms, " << slow.ratio() << "x its median "
                      << slow.median_ns / 1'000'000.0 << " ms (MAD " << slow.mad_ns / 1'000'000.0 << " ms)"
                      << (trigger.inside_cooldown ? ", within the cool-down of an earlier snapshot" : "") << "; "
                      << (snapshot->end_ns - snapshot->begin_ns) / 1'000'000 << " ms held"
                      << (held.info.path().empty() ? "" : " in " + held.info.path());
  const podscope::v1::StoredSnapshot info = held.info;
  {
    std::lock_guard lock(mu_);
    held_.push_back(std::move(held));
    ++triggered_;
    apply_retention();
  }
  if (reporter_) reporter_(info, state->window_ns);
}

absl::Status TriggeredSnapshots::write(Held& held, const std::string& xspace) {
  const std::filesystem::path run = settings_.runs_directory / held.info.id();
  const std::filesystem::path path = run / (host_name_ + std::string(kXSpaceSuffix));
  if (absl::Status s = write_file_atomically(path, xspace); !s.ok()) return s;
  held.info.set_path(path.string());
  held.disk_bytes = xspace.size();
  // What the snapshot is, for the agent that finds it after a restart; without it the run is still found.
  std::string described;
  google::protobuf::TextFormat::PrintToString(held.info, &described);
  if (absl::Status s = write_file_atomically(run / (host_name_ + std::string(kInfoSuffix)), described); !s.ok()) {
    return s;
  }
  held.disk_bytes += described.size();
  return absl::OkStatus();
}

std::vector<TriggeredSnapshots::Held> TriggeredSnapshots::find_stored() const {
  std::vector<Held> found;
  std::error_code error;
  for (std::filesystem::directory_iterator it(settings_.runs_directory, error), end; !error && it != end;
       it.increment(error)) {
    // Captures are runs here too: a snapshot's run is named by its id and holds this host's files.
    const std::filesystem::directory_entry& entry = *it;
    const std::string id = entry.path().filename().string();
    std::error_code kind_error;
    if (entry.is_symlink(kind_error) || !entry.is_directory(kind_error) || sequence_of(id) == 0) continue;
    const std::filesystem::path xspace = entry.path() / (host_name_ + std::string(kXSpaceSuffix));
    const std::filesystem::path described = entry.path() / (host_name_ + std::string(kInfoSuffix));
    if (std::error_code file_error; !std::filesystem::is_regular_file(xspace, file_error)) continue;
    Held h;
    if (absl::StatusOr<std::string> text = read_whole_file(described); text.ok()) {
      if (!google::protobuf::TextFormat::ParseFromString(*text, &h.info)) {
        PODSCOPE_LOG(kWarning) << described.string() << " is not a stored snapshot's description; kept, listed by "
                               << "its id only";
        h.info.Clear();
      }
    }
    h.info.set_id(id);  // the directory, not what a file says, names and places it
    h.info.set_reason(std::string(kSlowStep));
    h.info.set_path(xspace.string());
    h.info.set_bytes(size_or_zero(xspace));
    h.disk_bytes = h.info.bytes() + size_or_zero(described);
    found.push_back(std::move(h));
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    PODSCOPE_LOG(kWarning) << "triggered snapshots under " << settings_.runs_directory.string()
                           << " not looked for: " << error.message();
  }
  // Ids are the run name of their end (a sortable time, to the second), then the sequence.
  auto order = [](const Held& h) {
    const std::string& id = h.info.id();
    return std::make_pair(id.substr(0, id.rfind(kIdSequenceMark)), sequence_of(id));
  };
  std::sort(found.begin(), found.end(), [&order](const Held& a, const Held& b) { return order(a) < order(b); });
  return found;
}

void TriggeredSnapshots::remove_from_disk(Held& h) {
  // Only this host's files: agents sharing a root may have written the same run. A file someone else removed is
  // as good as deleted.
  const std::filesystem::path xspace(h.info.path());
  const std::filesystem::path run = xspace.parent_path();
  std::error_code ignored;
  std::filesystem::remove(xspace, ignored);
  std::filesystem::remove(run / (host_name_ + std::string(kInfoSuffix)), ignored);
  std::filesystem::remove(run, ignored);  // only when empty
  h.disk_bytes = 0;
  h.info.clear_path();
  deleted_from_disk_.Increment();
}

void TriggeredSnapshots::apply_retention() {
  size_t in_memory = 0, memory_bytes = 0, disk_bytes = 0;
  for (const Held& h : held_) {
    in_memory += h.packed.empty() ? 0 : 1;
    memory_bytes += h.packed.size();
    disk_bytes += h.disk_bytes;
  }
  for (Held& h : held_) {  // oldest first
    if (!h.packed.empty() && (in_memory > settings_.max_snapshots || memory_bytes > settings_.max_memory_bytes)) {
      memory_bytes -= h.packed.size();
      --in_memory;
      std::string().swap(h.packed);
      deleted_from_memory_.Increment();
    }
    if (h.disk_bytes > 0 && disk_bytes > settings_.max_disk_bytes) {
      disk_bytes -= h.disk_bytes;
      remove_from_disk(h);
    }
  }
  const size_t before = held_.size();
  std::erase_if(held_, [](const Held& h) { return h.packed.empty() && h.disk_bytes == 0; });
  deleted_ += before - held_.size();
}

std::vector<podscope::v1::StoredSnapshot> TriggeredSnapshots::list() const {
  std::lock_guard lock(mu_);
  std::vector<podscope::v1::StoredSnapshot> out;
  for (const Held& h : held_) out.push_back(h.info);
  return out;
}

absl::StatusOr<StoredSnapshotData> TriggeredSnapshots::get(const std::string& id) const {
  std::filesystem::path on_disk;
  StoredSnapshotData out;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(held_.begin(), held_.end(), [&id](const Held& h) { return h.info.id() == id; });
    if (it == held_.end()) return absl::NotFoundError("no stored snapshot \"" + id + "\" on this agent");
    out.info = it->info;
    if (!it->packed.empty()) {
      absl::StatusOr<std::string> xspace = zstd_unpack(it->packed, it->info.bytes());
      if (!xspace.ok()) return xspace.status();
      out.xspace = *std::move(xspace);
      return out;
    }
    on_disk = it->info.path();
  }
  absl::StatusOr<std::string> xspace = read_whole_file(on_disk);
  if (!xspace.ok()) {
    return absl::DataLossError("stored snapshot " + id + " unreadable: " + std::string(xspace.status().message()));
  }
  out.xspace = *std::move(xspace);
  return out;
}

uint64_t TriggeredSnapshots::triggered() const {
  std::lock_guard lock(mu_);
  return triggered_;
}

uint64_t TriggeredSnapshots::deleted() const {
  std::lock_guard lock(mu_);
  return deleted_;
}

}  // namespace podscope::agent
