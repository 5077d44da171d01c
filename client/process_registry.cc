#include "client/process_registry.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

namespace podscope::client {
namespace {

std::vector<int32_t> cores_from_env() {
  std::vector<int32_t> cores;
  if (const char* env = std::getenv("PODSCOPE_CORE_ID")) {
    std::string s(env);
    size_t at = 0;
    while (at < s.size()) {
      size_t comma = s.find(',', at);
      if (comma == std::string::npos) comma = s.size();
      if (comma > at) cores.push_back(static_cast<int32_t>(std::strtol(s.substr(at, comma - at).c_str(), nullptr, 10)));
      at = comma + 1;
    }
  }
  if (cores.empty()) cores.push_back(0);
  return cores;
}

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

size_t round_up_pow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::string program_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

}  // namespace

ProcessRegistry::ProcessRegistry() {
  names_.emplace_back("");                                    // id 0: none
  intern(local::traits_of(local::EventKind::kStep).unnamed);  // kUnnamedStepId
}

void ProcessRegistry::configure(const Options& options) {
  size_t events = options.buffer_events;
  if (events == 0)
    events = static_cast<size_t>(std::strtoull(env_or("PODSCOPE_BUFFER_EVENTS", "65536").c_str(), nullptr, 10));
  std::lock_guard lock(mu_);
  cores_ = options.cores.empty() ? cores_from_env() : options.cores;
  job_ = options.job.empty() ? env_or("PODSCOPE_JOB", "") : options.job;
  program_ = program_name();
  ring_capacity_ = round_up_pow2(std::max<size_t>(events, 16));
  max_threads_ = options.max_threads == 0 ? 256 : options.max_threads;
}

void ProcessRegistry::adopt_identity(const Options& options) {
  std::lock_guard lock(mu_);
  if (!options.cores.empty()) cores_ = options.cores;
  if (!options.job.empty()) job_ = options.job;
  reregister_ = true;
}

local::RegisterMsg ProcessRegistry::register_msg(uint32_t version) const {
  std::lock_guard lock(mu_);
  local::RegisterMsg m;
  m.version = version;
  m.pid = static_cast<int32_t>(::getpid());
  m.program = program_;
  m.job = job_;
  m.cores = cores_;
  return m;
}

bool ProcessRegistry::take_reregister() {
  std::lock_guard lock(mu_);
  return std::exchange(reregister_, false);
}

NameId ProcessRegistry::intern(std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = name_ids_.find(std::string(name));
  if (it != name_ids_.end()) return it->second;
  if (names_.size() > 0xffff) return 0;  // ids travel in 16 bits where they name a replica group
  const NameId id = static_cast<NameId>(names_.size());
  names_.emplace_back(name);
  name_ids_.emplace(std::string(name), id);
  return id;
}

std::string ProcessRegistry::name_of(NameId id) const {
  std::lock_guard lock(mu_);
  return id < names_.size() ? names_[id] : std::string();
}

std::shared_ptr<ThreadRing> ProcessRegistry::new_ring(int64_t thread_id) {
  std::lock_guard lock(mu_);
  if (rings_.size() >= max_threads_) return nullptr;
  rings_.push_back(std::make_shared<ThreadRing>(ring_capacity_, thread_id));
  return rings_.back();
}

uint8_t ProcessRegistry::core_index(int32_t core) {
  std::lock_guard lock(mu_);
  auto it = std::find(cores_.begin(), cores_.end(), core);
  if (it != cores_.end()) return static_cast<uint8_t>(it - cores_.begin());
  if (cores_.size() >= 255) return 0;
  cores_.push_back(core);
  reregister_ = true;
  return static_cast<uint8_t>(cores_.size() - 1);
}

ProcessRegistry::Snapshot ProcessRegistry::snapshot() const {
  std::lock_guard lock(mu_);
  return Snapshot{rings_, cores_};
}

void ProcessRegistry::free_retired_rings() {
  std::lock_guard lock(mu_);
  std::erase_if(rings_, [](const auto& r) { return r->retired.load(std::memory_order_acquire) && r->empty(); });
}

bool ProcessRegistry::thread_in_step_begun_before(uint64_t tick) const {
  std::lock_guard lock(mu_);
  for (const auto& r : rings_) {
    const uint64_t open = r->open_step_tick.load(std::memory_order_relaxed);
    if (open != 0 && open < tick && !r->retired.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

void ProcessRegistry::add_listener(CaptureWindowListener* listener) {
  std::lock_guard lock(mu_);
  listeners_.push_back(listener);
}

std::vector<CaptureWindowListener*> ProcessRegistry::listeners() const {
  std::lock_guard lock(mu_);
  return listeners_;
}

void ProcessRegistry::announce_profiler(uint16_t port) {
  std::lock_guard lock(mu_);
  profiler_port_ = port;
  profiler_told_ = false;
}

std::optional<uint16_t> ProcessRegistry::take_profiler_port(bool new_connection) {
  std::lock_guard lock(mu_);
  if (new_connection) profiler_told_ = false;
  if (profiler_port_ == 0 || std::exchange(profiler_told_, true)) return std::nullopt;
  return profiler_port_;
}

uint64_t ProcessRegistry::total_dropped() const {
  uint64_t total = ringless_drops_.load(std::memory_order_relaxed) + unsent_drops_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  for (const auto& r : rings_) total += r->dropped();
  return total;
}

}  // namespace podscope::client
