// The analysis' JSON writer against protobuf's own printer: every message type the analysis writes as JSON, filled
// at random with the values that format differently (NaN, infinities, subnormals, -0, long and short decimals,
// 64-bit extremes, unknown enum numbers, escapes, code points protobuf escapes, bytes that are not UTF-8, Any with
// and without a value), must print to the same bytes, indented and not.
#include "analysis/rendering/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/any.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/timestamp.pb.h"
#include "podscope/v1/pod_analysis.pb.h"
#include "tensorflow/input_pipeline.pb.h"
#include "tensorflow/kernel_stats.pb.h"
#include "tensorflow/memory_profile.pb.h"
#include "tensorflow/overview_page.pb.h"
#include "tensorflow/tf_data_stats.pb.h"
#include "tensorflow/tf_stats.pb.h"

namespace podscope::analysis {
namespace {

namespace pb = google::protobuf;

// What protobuf's printer writes for `message`.
std::string protobuf_json(const pb::Message& message, bool indented) {
  absl::StatusOr<std::string> json = protobuf_printer_json(message, indented);
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *json : std::string();
}

const std::vector<std::string>& edge_strings() {
  static const std::vector<std::string> strings = {
      "",
      "plain",
      "host0/device:CUSTOM:0",
      "quote \" backslash \\ slash /",
      "<script>a > b</script>",
      "tab\tnewline\ncr\rbs\bff\f",
      std::string("nul\0byte", 8),
      "\x01\x1f\x7f",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",  // é € 😀: written as they are
      "\xc2\x80\xc2\x9f \xc2\xad \xd8\x80 \xe2\x80\x8b \xe2\x80\xa8 \xe2\x81\xaa \xef\xbb\xbf \xef\xbf\xb9",
      "\xf0\x9d\x85\xb3 \xf3\xa0\x80\x81 \xf3\xa0\x80\xa0",  // escaped as surrogate pairs
      "\xc1\x81 overlong A, \xc0\x80 overlong NUL",
      "stray \x80 continuation, \xff lead",
      "broken \xe2\x82( sequence",
      "surrogate \xed\xa0\x80 encoded",
      "past max \xf4\x90\x80\x80 code point",
      "cut at the end \xe2\x82",
  };
  return strings;
}

const std::vector<double>& edge_doubles() {
  static const std::vector<double> doubles = {0.0,
                                              -0.0,
                                              1.0,
                                              -1.0,
                                              0.1,
                                              0.1 + 0.2,
                                              1.0 / 3.0,
                                              123456789012345678.0,
                                              1e21,
                                              1e-7,
                                              2.5e-5,
                                              1e300,
                                              -1e-300,
                                              std::numeric_limits<double>::denorm_min(),
                                              4.9406564584124654e-320,
                                              std::numeric_limits<double>::max(),
                                              std::numeric_limits<double>::quiet_NaN(),
                                              std::numeric_limits<double>::infinity(),
                                              -std::numeric_limits<double>::infinity(),
                                              100.0,
                                              97.779725946303088,
                                              0.45653037985172262,
                                              7e-06};
  return doubles;
}

const std::vector<float>& edge_floats() {
  static const std::vector<float> floats = {0.0f,
                                            -0.0f,
                                            1.0f,
                                            0.1f,
                                            1.0f / 3.0f,
                                            16777217.0f,
                                            1e-40f,
                                            std::numeric_limits<float>::denorm_min(),
                                            std::numeric_limits<float>::max(),
                                            std::numeric_limits<float>::quiet_NaN(),
                                            std::numeric_limits<float>::infinity(),
                                            87.5f,
                                            33.333332f};
  return floats;
}

// Fills `message` at random: each field set or not, lists of 0 to 3, nested messages to `depth`, Any packing one
// of the analysis' messages.
class Filler {
 public:
  explicit Filler(uint32_t seed) : rng_(seed) {}

  void fill(pb::Message& m, int depth) {
    const pb::Descriptor* type = m.GetDescriptor();
    if (type->full_name() == "google.protobuf.Any") return fill_any(static_cast<google::protobuf::Any&>(m), depth);
    const pb::Reflection* r = m.GetReflection();
    for (int i = 0; i < type->field_count(); ++i) {
      const pb::FieldDescriptor* f = type->field(i);
      if (chance(3)) continue;  // left unset
      if (f->is_map()) {
        // Distinct keys, as a map holds them.
        std::set<std::string> keys;
        const int n = static_cast<int>(pick(4));
        for (int j = 0; j < n; ++j) {
          add(m, r, f, depth);
          const pb::Message& entry = r->GetRepeatedMessage(m, f, r->FieldSize(m, f) - 1);
          if (!keys.insert(key_text(entry, f->message_type()->map_key())).second) r->RemoveLast(&m, f);
        }
      } else if (f->is_repeated()) {
        const int n = static_cast<int>(pick(4));
        for (int j = 0; j < n; ++j) add(m, r, f, depth);
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (depth > 0) fill(*r->MutableMessage(&m, f), depth - 1);
      } else {
        set(m, r, f);
      }
    }
  }

 private:
  static std::string key_text(const pb::Message& entry, const pb::FieldDescriptor* key) {
    const pb::Reflection* r = entry.GetReflection();
    switch (key->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return std::to_string(r->GetInt32(entry, key));
      case pb::FieldDescriptor::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(entry, key));
      case pb::FieldDescriptor::CPPTYPE_INT64: return std::to_string(r->GetInt64(entry, key));
      case pb::FieldDescriptor::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(entry, key));
      case pb::FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(entry, key) ? "true" : "false";
      default: return r->GetString(entry, key);
    }
  }

  bool chance(int one_in) { return pick(static_cast<size_t>(one_in)) == 0; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <typename T>
  const T& any_of(const std::vector<T>& values) {
    return values[pick(values.size())];
  }
  int64_t integer() {
    static const std::vector<int64_t> values = {0,         1,         -1,        42,        1789,
                                                INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, 4285178137000};
    return any_of(values);
  }
  int enum_number(const pb::FieldDescriptor* f) {
    if (chance(5)) return 77;  // a number the enum does not name
    return f->enum_type()->value(static_cast<int>(pick(static_cast<size_t>(f->enum_type()->value_count()))))->number();
  }

  void set(pb::Message& m, const pb::Reflection* r, const pb::FieldDescriptor* f) {
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return r->SetInt32(&m, f, static_cast<int32_t>(integer()));
      case pb::FieldDescriptor::CPPTYPE_UINT32: return r->SetUInt32(&m, f, static_cast<uint32_t>(integer()));
      case pb::FieldDescriptor::CPPTYPE_INT64: return r->SetInt64(&m, f, integer());
      case pb::FieldDescriptor::CPPTYPE_UINT64: return r->SetUInt64(&m, f, static_cast<uint64_t>(integer()));
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: return r->SetDouble(&m, f, any_of(edge_doubles()));
      case pb::FieldDescriptor::CPPTYPE_FLOAT: return r->SetFloat(&m, f, any_of(edge_floats()));
      case pb::FieldDescriptor::CPPTYPE_BOOL: return r->SetBool(&m, f, chance(2));
      case pb::FieldDescriptor::CPPTYPE_ENUM: return r->SetEnumValue(&m, f, enum_number(f));
      case pb::FieldDescriptor::CPPTYPE_STRING: return r->SetString(&m, f, any_of(edge_strings()));
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: return;
    }
  }

  void add(pb::Message& m, const pb::Reflection* r, const pb::FieldDescriptor* f, int depth) {
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return r->AddInt32(&m, f, static_cast<int32_t>(integer()));
      case pb::FieldDescriptor::CPPTYPE_UINT32: return r->AddUInt32(&m, f, static_cast<uint32_t>(integer()));
      case pb::FieldDescriptor::CPPTYPE_INT64: return r->AddInt64(&m, f, integer());
      case pb::FieldDescriptor::CPPTYPE_UINT64: return r->AddUInt64(&m, f, static_cast<uint64_t>(integer()));
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: return r->AddDouble(&m, f, any_of(edge_doubles()));
      case pb::FieldDescriptor::CPPTYPE_FLOAT: return r->AddFloat(&m, f, any_of(edge_floats()));
      case pb::FieldDescriptor::CPPTYPE_BOOL: return r->AddBool(&m, f, chance(2));
      case pb::FieldDescriptor::CPPTYPE_ENUM: return r->AddEnumValue(&m, f, enum_number(f));
      case pb::FieldDescriptor::CPPTYPE_STRING: return r->AddString(&m, f, any_of(edge_strings()));
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
        pb::Message* element = r->AddMessage(&m, f);
        // A map entry always gets its key, and a value down to the depth.
        if (f->is_map()) {
          set(*element, element->GetReflection(), f->message_type()->map_key());
          const pb::FieldDescriptor* value = f->message_type()->map_value();
          if (value->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
            set(*element, element->GetReflection(), value);
          } else if (depth > 0) {
            fill(*element->GetReflection()->MutableMessage(element, value), depth - 1);
          }
          return;
        }
        if (depth > 0) fill(*element, depth - 1);
        return;
      }
    }
  }

  void fill_any(google::protobuf::Any& any, int depth) {
    switch (pick(4)) {
      case 0: return;  // present, empty
      case 1: any.set_type_url("type.googleapis.com/tensorflow.profiler.PerGenericStepDetails"); return;
      default: {
        tensorflow::profiler::PerGenericStepDetails details;
        tensorflow::profiler::BottleneckAnalysis bottleneck;
        pb::Message& packed = chance(2) ? static_cast<pb::Message&>(details) : static_cast<pb::Message&>(bottleneck);
        fill(packed, depth);
        any.PackFrom(packed);
      }
    }
  }

  std::mt19937 rng_;
};

template <typename MessageType>
void expect_same_json_as_protobuf(int seeds) {
  for (int seed = 0; seed < seeds; ++seed) {
    MessageType message;
    Filler(static_cast<uint32_t>(seed)).fill(message, 4);
    for (const bool indented : {true, false}) {
      const absl::StatusOr<std::string> ours = message_to_json(message, indented);
      ASSERT_TRUE(ours.ok()) << ours.status();
      ASSERT_EQ(*ours, protobuf_json(message, indented))
          << MessageType::descriptor()->full_name() << " seed " << seed << (indented ? " indented" : "");
    }
  }
}

TEST(JsonWriterTest, EveryAnalysisMessagePrintsAsProtobufPrintsIt) {
  expect_same_json_as_protobuf<podscope::v1::PodAnalysis>(60);
  expect_same_json_as_protobuf<tensorflow::profiler::OverviewPage>(60);
  expect_same_json_as_protobuf<tensorflow::profiler::InputPipelineAnalysisResult>(60);
  expect_same_json_as_protobuf<tensorflow::profiler::CombinedTfDataStats>(60);
  expect_same_json_as_protobuf<tensorflow::profiler::KernelStatsDb>(60);
  expect_same_json_as_protobuf<tensorflow::profiler::TfStatsDatabase>(60);
  expect_same_json_as_protobuf<tensorflow::profiler::MemoryProfile>(60);
}

TEST(JsonWriterTest, EmptyMessagesAndContainersPrintAsProtobufPrintsThem) {
  const tensorflow::profiler::MemoryProfile empty;
  EXPECT_EQ(*message_to_json(empty, true), protobuf_json(empty, true));
  EXPECT_EQ(*message_to_json(empty, false), protobuf_json(empty, false));
  JsonWriter w(/*indented=*/true);
  w.begin_object();
  w.key("a");
  w.begin_array();
  w.end_array();
  w.key("b");
  w.begin_object();
  w.end_object();
  w.end_object();
  EXPECT_EQ(std::move(w).take(), "{\n \"a\": [],\n \"b\": {}\n}\n");
}

TEST(JsonWriterTest, AnyOfAnUnknownTypeAndOtherWellKnownTypesAreRefused) {
  google::protobuf::Any any;
  EXPECT_TRUE(message_to_json(any, false).ok());
  any.set_type_url("type.googleapis.com/no.such.Type");
  any.set_value("x");
  EXPECT_FALSE(message_to_json(any, false).ok());
  EXPECT_FALSE(message_to_json(google::protobuf::Timestamp(), false).ok());
}

}  // namespace
}  // namespace podscope::analysis
