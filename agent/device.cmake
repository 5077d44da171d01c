# Device collection (issue 6), included from agent/CMakeLists.txt: NVML (dlopen, own thread), libtpu runtime
# metrics (gRPC client in its own file), the framework profiler proxy.
add_library(podscope_device_collectors STATIC
  ${CMAKE_CURRENT_LIST_DIR}/collectors/nvml_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/collectors/nvml_collector.cc
  ${CMAKE_CURRENT_LIST_DIR}/tpu/tpu_chips.cc
  ${CMAKE_CURRENT_LIST_DIR}/tpu/tpu_metric_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/tpu/tpu_runtime_collector.cc)
target_include_directories(podscope_device_collectors PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(podscope_device_collectors PUBLIC podscope_proto_grpc podscope_daemon absl::flat_hash_map
  absl::statusor ${CMAKE_DL_LIBS} Threads::Threads)

add_library(podscope_upstream_source STATIC ${CMAKE_CURRENT_LIST_DIR}/capture/upstream_source.cc)
target_include_directories(podscope_upstream_source PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(podscope_upstream_source PUBLIC podscope_proto_grpc podscope_xspace podscope_daemon)
