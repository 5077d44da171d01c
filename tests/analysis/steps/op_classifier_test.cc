// The classification table on names from each source: our annotations, XLA ops, GPU kernels and copies.
#include "analysis/steps/op_classifier.h"

#include <gtest/gtest.h>

#include "analysis/pod/all_reduce_analysis.h"

namespace podscope::analysis {
namespace {

TEST(OpClassifierTest, AnnotationAndXlaNames) {
  EXPECT_EQ(classify_op("all-reduce", "Ops", false), OpKind::kCollective);
  EXPECT_EQ(classify_op("all-reduce.12", "XLA Ops", false), OpKind::kCollective);
  EXPECT_EQ(classify_op("reduce-scatter.1", "XLA Ops", false), OpKind::kCollective);
  EXPECT_EQ(classify_op("send", "Ops", false), OpKind::kSend);
  EXPECT_EQ(classify_op("send.3", "XLA Ops", false), OpKind::kSend);
  EXPECT_EQ(classify_op("recv-done.4", "XLA Ops", false), OpKind::kRecvDone);
  EXPECT_EQ(classify_op("infeed.1", "XLA Ops", false), OpKind::kInfeed);
  EXPECT_EQ(classify_op("outfeed", "Ops", false), OpKind::kOutfeed);
  EXPECT_EQ(classify_op("convolution.7", "XLA Ops", false), OpKind::kHighFlopsCompute);
  EXPECT_EQ(classify_op("fusion.2", "XLA Ops", false), OpKind::kHighFlopsCompute);
  EXPECT_EQ(classify_op("dot.1", "XLA Ops", false), OpKind::kHighFlopsCompute);
  EXPECT_EQ(classify_op("convert.3", "XLA Ops", false), OpKind::kLowFlopsCompute);
  EXPECT_EQ(classify_op("elementwise", "Ops", false), OpKind::kLowFlopsCompute);
  EXPECT_EQ(classify_op("elementwise", "Ops", true), OpKind::kHighFlopsCompute);
  // Names that merely start like a kind are not that kind.
  EXPECT_EQ(classify_op("sender_prep", "Ops", false), OpKind::kLowFlopsCompute);
}

TEST(OpClassifierTest, GpuKernelsAndCopies) {
  EXPECT_EQ(classify_op("ncclKernel_AllReduce_RING_LL_Sum_float", "Stream #7(Compute)", false), OpKind::kCollective);
  EXPECT_EQ(classify_op("ncclDevKernel_AllGather_RING_LL", "Stream #7(Compute)", false), OpKind::kCollective);
  EXPECT_EQ(classify_op("MemcpyH2D", "Stream #63(MemcpyH2D)", false), OpKind::kHostToDevice);
  EXPECT_EQ(classify_op("Memcpy DtoH (Device -> Pageable)", "Stream #2", false), OpKind::kDeviceToHost);
  EXPECT_EQ(classify_op("Memcpy DtoD (Device -> Device)", "Stream #2", false), OpKind::kDeviceToDevice);
  EXPECT_EQ(classify_op("volta_h884gemm_64x128_ldg8_nn", "Stream #134(Compute)", false), OpKind::kHighFlopsCompute);
  EXPECT_EQ(classify_op("void Eigen::internal::EigenMetaKernel<...>", "Stream #134(Compute)", false),
            OpKind::kLowFlopsCompute);
}

TEST(OpClassifierTest, OpLinesPerPlaneKind) {
  EXPECT_TRUE(is_op_line(PlaneKind::kGpu, "Stream #134(Compute)"));
  EXPECT_FALSE(is_op_line(PlaneKind::kGpu, "TensorFlow Ops"));
  EXPECT_FALSE(is_op_line(PlaneKind::kGpu, "Steps"));
  EXPECT_TRUE(is_op_line(PlaneKind::kTpu, "XLA Ops"));
  EXPECT_FALSE(is_op_line(PlaneKind::kTpu, "XLA Modules"));
  EXPECT_TRUE(is_op_line(PlaneKind::kCustom, "Ops"));
  EXPECT_FALSE(is_op_line(PlaneKind::kCustom, "Steps"));
  EXPECT_FALSE(is_op_line(PlaneKind::kCustom, "_counters_"));
}

TEST(OpClassifierTest, InstanceSuffix) {
  EXPECT_EQ(strip_instance_suffix("all-reduce.12"), "all-reduce");
  EXPECT_EQ(strip_instance_suffix("all-reduce"), "all-reduce");
  EXPECT_EQ(strip_instance_suffix("layer.norm"), "layer.norm");
  EXPECT_EQ(strip_instance_suffix("x."), "x.");
}

TEST(ReplicaGroupsTest, ParsesFlatAndNestedSpellings) {
  auto flat = parse_replica_groups("0,1,2,3");
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].replica_ids_size(), 4);
  auto nested = parse_replica_groups("{0,1},{2,3}");
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[1].replica_ids(0), 2);
  auto lists = parse_replica_groups("[[0,2],[1,3]]");
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].replica_ids(1), 2);
  EXPECT_TRUE(parse_replica_groups("").empty());
}

}  // namespace
}  // namespace podscope::analysis
