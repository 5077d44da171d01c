// to_deterministic_json prints what protobuf's own JSON printer prints, byte for byte: on every tool's result of
// real runs (a TensorFlow pod, a CUDA host, a torch.profiler rank), in all four modes, and on messages made to hold
// what those runs lack (escapes, NaN and infinities, bytes, 64-bit extremes, integer map keys, Struct values).
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/renderers.h"
#include "analysis/runner/analysis_runner.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Message;

// Protobuf's printer, as the analysis used it before it printed JSON itself.
std::string protobuf_json(const Message& message, bool add_whitespace, bool always_print_primitive_fields) {
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool("type.googleapis.com",
                                                               google::protobuf::DescriptorPool::generated_pool());
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = add_whitespace;
  options.always_print_primitive_fields = always_print_primitive_fields;
  std::string json;
  const auto status = google::protobuf::util::BinaryToJsonString(
      resolver, "type.googleapis.com/" + message.GetDescriptor()->full_name(), serialize_deterministically(message),
      &json, options);
  EXPECT_TRUE(status.ok()) << status;
  return json;
}

void expect_same_json(const Message& message, const std::string& what) {
  for (const bool whitespace : {false, true}) {
    for (const bool defaults : {false, true}) {
      absl::StatusOr<std::string> ours = to_deterministic_json(message, whitespace, defaults);
      ASSERT_TRUE(ours.ok()) << what << ": " << ours.status();
      EXPECT_EQ(*ours, protobuf_json(message, whitespace, defaults))
          << what << " (whitespace " << whitespace << ", defaults " << defaults << ")";
    }
  }
}

// Every tool's result of the run in `dir` (a fresh copy: the analysis writes nothing here, but reads only).
void expect_same_json_for_run(const fs::path& dir) {
  absl::StatusOr<AnalysisOutcome> outcome = analyze_run_files(dir);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const std::string run = dir.filename().string();
  expect_same_json(outcome->overview_page, run + " overview");
  expect_same_json(outcome->input_pipeline, run + " input pipeline");
  expect_same_json(outcome->tf_data_stats, run + " tf.data");
  expect_same_json(outcome->analysis, run + " pod analysis");
  expect_same_json(outcome->kernel_stats.db, run + " kernel stats");
  expect_same_json(outcome->op_stats.db, run + " op stats");
  expect_same_json(outcome->memory_profile.profile, run + " memory profile");
}

TEST(ProtoJson, EveryToolsResultOfRealRunsPrintsAsProtobufPrintsIt) {
  const fs::path data = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data";
  expect_same_json_for_run(data / "analysis/ring4_straggler");
  expect_same_json_for_run(data / "analysis/cuda_nvtx_steps");
  expect_same_json_for_run(data / "kineto");
}

TEST(ProtoJson, EscapesSpecialNumbersBytesAndIntegerKeysPrintAsProtobufPrintsThem) {
  tensorflow::profiler::XSpace space;
  space.add_warnings("quote \" backslash \\ tab \t newline \n bell \x07 del \x7f <tag> & é 中 \xf0\x9f\x99\x82");
  space.add_hostnames("");
  auto* plane = space.add_planes();
  plane->set_id(-7);
  plane->set_name("/device:GPU:0");
  for (const int64_t id : {int64_t{42}, int64_t{-3}, int64_t{7}, std::numeric_limits<int64_t>::max()}) {
    auto& metadata = (*plane->mutable_event_metadata())[id];
    metadata.set_id(id);
    metadata.set_name("op" + std::to_string(id));
    metadata.set_metadata(std::string("\0\x01\xff binary", 10));
  }
  (*plane->mutable_stat_metadata())[1].set_name("value");
  auto* line = plane->add_lines();
  line->set_id(std::numeric_limits<int64_t>::min());
  auto* event = line->add_events();
  event->set_offset_ps(1);
  const double doubles[] = {0.1,
                            1.0 / 3,
                            -0.0,
                            1e300,
                            5e-324,
                            123456789012345678.0,
                            std::nan(""),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity()};
  for (const double d : doubles) event->add_stats()->set_double_value(d);
  event->add_stats()->set_uint64_value(std::numeric_limits<uint64_t>::max());
  event->add_stats()->set_int64_value(std::numeric_limits<int64_t>::min());
  event->add_stats()->set_bytes_value("any bytes\x80");
  event->add_stats()->set_str_value("");
  event->add_stats()->set_ref_value(0);
  expect_same_json(space, "XSpace");

  google::protobuf::Struct root;
  auto& fields = *root.mutable_fields();
  fields["b"].set_number_value(2.5);
  fields["a"].set_string_value("x<y");
  fields["null"].set_null_value(google::protobuf::NULL_VALUE);
  fields["flag"].set_bool_value(false);
  auto* list = fields["list"].mutable_list_value();
  list->add_values()->set_number_value(1);
  list->add_values()->mutable_struct_value();
  list->add_values()->mutable_list_value();
  (*fields["nested"].mutable_struct_value()->mutable_fields())["z"].set_number_value(-1e-7);
  fields["empty"].mutable_struct_value();
  expect_same_json(root, "Struct");
}

}  // namespace
}  // namespace podscope::analysis
