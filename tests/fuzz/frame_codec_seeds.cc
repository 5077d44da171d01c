// Writes the frame codec fuzzer's seed corpus into DIR: for every protocol version, one file per frame type the
// version has (a real message of that type), and one whole conversation of the version. A file is the fuzzer's
// input: the version byte, then the frames. Generated at build time, so the seeds follow the codec.
// Usage: frame_codec_seeds DIR
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "proto/local/frame_codec.h"

namespace {

using namespace podscope::local;

// One real message of every frame type, as a trainer and its agent speaking `version` exchange them.
std::vector<Message> sample_messages(uint32_t version) {
  EventsMsg events{7, 1, 4242, {{1, "train_step"}, {2, "ring/all_reduce"}}, {}};
  events.events.push_back({EventKind::kStep, 1, 0, 1'700'000'000'000'000'000, 5'000'000, 10, 0});
  events.events.push_back({EventKind::kAllReduce, 3, 2, 1'700'000'000'001'000'000, 2'000'000, 1 << 20, 0});
  events.events.push_back({EventKind::kSend, 9, 2, 1'700'000'000'001'500'000, 100'000, 4096, 0});
  events.events.push_back({EventKind::kCompute, 1, 0, 1'700'000'000'003'000'000, 1'000'000, 1'000'000'000, 65536});
  InputStagesMsg stages{7, 1, 4243, {{3, "input_batch"}, {4, "read_batch"}}, {}};
  stages.stages.push_back({3, InputStageCategory::kPreprocess, 1ull << 40 | 1, 0, 1'700'000'000'000'100'000, 900'000});
  stages.stages.push_back(
      {4, InputStageCategory::kRead, 1ull << 40 | 2, 1ull << 40 | 1, 1'700'000'000'000'200'000, 500'000});
  AllocationsMsg allocations{7, 1, 4242, {{5, "host_pinned"}, {6, "all_reduce"}}, {}};
  allocations.allocations.push_back(
      {AllocationOp::kAllocate, 5, 6, 0x7f12'3400'0000, 1 << 20, 1'700'000'000'000'300'000});
  allocations.allocations.push_back({AllocationOp::kAllocate, 5, 0, 0x7f12'3410'0000, 4096, 1'700'000'000'000'400'000});
  allocations.allocations.push_back({AllocationOp::kFree, 5, 0, 0x7f12'3400'0000, 0, 1'700'000'000'004'000'000});
  return {
      RegisterMsg{version, 4242, "ring_trainer", "job-a", {0, 1}},
      StepsMsg{{{0, 10, 1'700'000'000'000'000'000, 1'700'000'000'005'000'000, 1'000'000, 2'000'000},
                {1, 10, 1'700'000'000'000'100'000, 1'700'000'000'005'100'000, 0, 2'500'000}}},
      events,
      stages,
      allocations,
      ProfilerServerMsg{6009},
      CaptureDoneMsg{7, 3},
      DevicePlanesMsg{7, 96, 32, std::string(64, '\x0a')},
      HelloMsg{kProtocolVersion, kOldestProtocolVersion},
      CaptureOpenMsg{7, 1'700'000'000'000'000'000, 1'700'000'002'000'000'000},
      CaptureCloseMsg{7},
      WelcomeMsg{version},
      RefusedMsg{kOldestProtocolVersion, kProtocolVersion, "client speaks versions 9..9"},
  };
}

bool write_seed(const std::string& path, uint32_t version, const std::vector<Message>& messages) {
  std::string bytes(1, static_cast<char>(version));
  for (const Message& m : messages) encode_frame(m, bytes);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (uint32_t version = kOldestProtocolVersion; version <= kProtocolVersion; ++version) {
    const std::vector<Message> messages = sample_messages(version);
    std::vector<Message> conversation;
    for (const Message& m : messages) {
      const FrameType type = type_of(m);
      if (!version_has(version, type)) continue;
      conversation.push_back(m);
      const std::string path = dir + "/v" + std::to_string(version) + "_type" + std::to_string(static_cast<int>(type));
      if (!write_seed(path, version, {m})) {
        std::fprintf(stderr, "frame_codec_seeds: cannot write %s\n", path.c_str());
        return 1;
      }
    }
    const std::string path = dir + "/v" + std::to_string(version) + "_conversation";
    if (!write_seed(path, version, conversation)) {
      std::fprintf(stderr, "frame_codec_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
