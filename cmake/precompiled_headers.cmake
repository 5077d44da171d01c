# The headers most translation units parse (the standard library's, Protobuf's, gRPC's, Abseil's, prometheus-cpp's)
# are parsed once a build instead of once a file, into a precompiled header every C++ target reuses. CLI11 is not
# among them: its namespace-scope validator objects would be constructed in every file.
# ccache caches such compiles only with the sloppiness run.sh gives it.
set(PODSCOPE_PRECOMPILED_HEADERS
  <algorithm> <chrono> <cstdint> <filesystem> <functional> <map> <memory> <mutex> <optional> <string> <string_view>
  <vector>
  <absl/status/statusor.h> <absl/strings/str_cat.h> <google/protobuf/message.h>
  <google/protobuf/repeated_field.h> <grpcpp/grpcpp.h> <prometheus/counter.h> <prometheus/gauge.h>
  <prometheus/registry.h>)

function(podscope_collect_targets directory out)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    podscope_collect_targets(${subdirectory} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once every target exists. A compiler uses a precompiled header only where it was made with the same code
# model, so there are two: one for position-independent code, one for the rest; and only by a compile with the options
# it was made with (-pthread from gRPC's threads; on Debian 13 also Abseil's -DNOMINMAX), so every C++ target takes
# them, as gRPC's users already do, and one header fits all.
function(podscope_precompile_headers)
  foreach(kind plain pic)
    add_library(podscope_precompiled_${kind} OBJECT ${PROJECT_SOURCE_DIR}/cmake/precompiled_headers.cc)
    target_link_libraries(podscope_precompiled_${kind} PRIVATE protobuf::libprotobuf gRPC::grpc++ absl::statusor
                          absl::strings prometheus-cpp::core)
    target_precompile_headers(podscope_precompiled_${kind} PRIVATE ${PODSCOPE_PRECOMPILED_HEADERS})
  endforeach()
  set_target_properties(podscope_precompiled_pic PROPERTIES POSITION_INDEPENDENT_CODE ON)

  podscope_collect_targets(${PROJECT_SOURCE_DIR} targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.(c|cu)$")
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$"
       OR target MATCHES "^podscope_precompiled_" OR sources)
      continue()
    endif()
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    if(pic OR type MATCHES "^(SHARED|MODULE)_LIBRARY$")
      set(kind pic)
    else()
      set(kind plain)
    endif()
    target_compile_options(${target} PRIVATE "$<TARGET_PROPERTY:podscope_precompiled_${kind},COMPILE_OPTIONS>")
    target_precompile_headers(${target} REUSE_FROM podscope_precompiled_${kind})
  endforeach()
endfunction()
