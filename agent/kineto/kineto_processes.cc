#include "agent/kineto/kineto_processes.h"

#include <algorithm>

namespace podscope::agent {

std::string KinetoProcesses::on_poll(const VerifiedSender& sender, const kineto::ipc::Poll& poll, int64_t now_ns,
                                     PollRefusal& refused) {
  refused = PollRefusal::kNone;
  const int32_t pid = sender.pid;
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it != processes_.end() && it->second.uid != sender.uid) {
    // The pid was reused by another user's process: the old one is gone.
    if (--per_uid_[it->second.uid] == 0) per_uid_.erase(it->second.uid);
    processes_.erase(it);
    requests_.erase(pid);
    it = processes_.end();
  }
  if (it == processes_.end()) {
    forget_silent(now_ns);
    if (processes_.size() >= kMaxProcesses) {
      refused = PollRefusal::kProcessCap;
      return "";
    }
    if (const auto known = per_uid_.find(sender.uid); known != per_uid_.end() && known->second >= kMaxProcessesPerUid) {
      refused = PollRefusal::kUidCap;
      return "";
    }
    it = processes_.emplace(pid, KinetoProcess{}).first;
    ++per_uid_[sender.uid];
    it->second.pid = pid;
    it->second.uid = sender.uid;
    it->second.first_poll_ns = now_ns;
  } else {
    it->second.poll_interval_ns = now_ns - it->second.last_poll_ns;
  }
  KinetoProcess& p = it->second;
  p.own_pid = sender.own_pid;
  p.job_id = poll.job_id;
  p.ancestors = sender.ancestors;
  p.last_poll_ns = now_ns;

  if ((poll.config_type & kineto::ipc::kActivitiesConfig) == 0) return "";
  auto request = requests_.find(pid);
  if (request == requests_.end() || request->second.handed) return "";
  request->second.handed = true;
  return request->second.config_text;
}

int32_t KinetoProcesses::on_registration(const VerifiedSender& sender, const kineto::ipc::Registration& registration) {
  std::lock_guard lock(mu_);
  auto it = processes_.find(sender.pid);
  if (it != processes_.end() && it->second.uid == sender.uid) it->second.gpu = registration.gpu;
  int32_t same_gpu = 0;
  for (const auto& [pid, p] : processes_) {
    if (p.job_id == registration.job_id && (p.gpu == registration.gpu || pid == sender.pid)) ++same_gpu;
  }
  return std::max(same_gpu, 1);
}

std::vector<KinetoProcess> KinetoProcesses::live(int64_t now_ns) {
  std::lock_guard lock(mu_);
  forget_silent(now_ns);
  std::vector<KinetoProcess> out;
  out.reserve(processes_.size());
  for (const auto& [pid, p] : processes_) out.push_back(p);
  return out;
}

int64_t KinetoProcesses::longest_poll_interval_ns(int64_t now_ns) {
  std::lock_guard lock(mu_);
  forget_silent(now_ns);
  int64_t longest = 0;
  for (const auto& [pid, p] : processes_) {
    longest = std::max(longest, p.poll_interval_ns > 0 ? p.poll_interval_ns : kDefaultPollIntervalNs);
  }
  return std::min(longest, kMaxAwaitedPollIntervalNs);
}

void KinetoProcesses::request_trace(int32_t pid, std::string config_text) {
  std::lock_guard lock(mu_);
  requests_[pid] = Request{std::move(config_text), false};
}

TraceHandoff KinetoProcesses::handoff(int32_t pid) const {
  std::lock_guard lock(mu_);
  auto it = requests_.find(pid);
  if (it == requests_.end()) return TraceHandoff::kUnknown;
  return it->second.handed ? TraceHandoff::kHanded : TraceHandoff::kWaiting;
}

void KinetoProcesses::withdraw_all() {
  std::lock_guard lock(mu_);
  requests_.clear();
}

void KinetoProcesses::forget_silent(int64_t now_ns) {
  std::erase_if(processes_, [&](const auto& entry) {
    if (now_ns - entry.second.last_poll_ns <= kForgetAfterNs) return false;
    if (--per_uid_[entry.second.uid] == 0) per_uid_.erase(entry.second.uid);
    return true;
  });
}

}  // namespace podscope::agent
