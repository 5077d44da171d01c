// Field numbers and enum values of the Perfetto trace messages the writer emits, from Perfetto's public
// protos (protos/perfetto/trace/trace.proto, trace_packet.proto, track_event/*.proto,
// interned_data/interned_data.proto). Field numbers are stable by protobuf's contract.
#pragma once

#include <cstdint>

namespace podscope::trace_writers::perfetto_fields {

// Trace
inline constexpr uint32_t kTracePacket = 1;

// TracePacket
inline constexpr uint32_t kPacketTimestamp = 8;
inline constexpr uint32_t kPacketTrustedSequenceId = 10;
inline constexpr uint32_t kPacketTrackEvent = 11;
inline constexpr uint32_t kPacketInternedData = 12;
inline constexpr uint32_t kPacketSequenceFlags = 13;
inline constexpr uint32_t kPacketTrackDescriptor = 60;
// TracePacket.SequenceFlags
inline constexpr uint64_t kSeqIncrementalStateCleared = 1;
inline constexpr uint64_t kSeqNeedsIncrementalState = 2;

// TrackDescriptor
inline constexpr uint32_t kTrackUuid = 1;
inline constexpr uint32_t kTrackName = 2;
inline constexpr uint32_t kTrackProcess = 3;
inline constexpr uint32_t kTrackThread = 4;
inline constexpr uint32_t kTrackParentUuid = 5;
inline constexpr uint32_t kTrackCounter = 8;
// ProcessDescriptor
inline constexpr uint32_t kProcessPid = 1;
inline constexpr uint32_t kProcessName = 6;
// ThreadDescriptor
inline constexpr uint32_t kThreadPid = 1;
inline constexpr uint32_t kThreadTid = 2;
inline constexpr uint32_t kThreadName = 5;

// TrackEvent
inline constexpr uint32_t kEventCategoryIids = 3;
inline constexpr uint32_t kEventDebugAnnotations = 4;
inline constexpr uint32_t kEventType = 9;
inline constexpr uint32_t kEventNameIid = 10;
inline constexpr uint32_t kEventTrackUuid = 11;
inline constexpr uint32_t kEventDoubleCounterValue = 44;
inline constexpr uint32_t kEventFlowIds = 47;             // fixed64
inline constexpr uint32_t kEventTerminatingFlowIds = 48;  // fixed64
// TrackEvent.Type
inline constexpr uint64_t kTypeSliceBegin = 1;
inline constexpr uint64_t kTypeSliceEnd = 2;
inline constexpr uint64_t kTypeCounter = 4;

// DebugAnnotation
inline constexpr uint32_t kAnnotationNameIid = 1;
inline constexpr uint32_t kAnnotationUintValue = 3;
inline constexpr uint32_t kAnnotationIntValue = 4;
inline constexpr uint32_t kAnnotationDoubleValue = 5;
inline constexpr uint32_t kAnnotationStringValue = 6;

// InternedData; each of its entries (EventCategory, EventName, DebugAnnotationName) is {iid = 1, name = 2}.
inline constexpr uint32_t kInternedEventCategories = 1;
inline constexpr uint32_t kInternedEventNames = 2;
inline constexpr uint32_t kInternedDebugAnnotationNames = 3;
inline constexpr uint32_t kInternedIid = 1;
inline constexpr uint32_t kInternedName = 2;

}  // namespace podscope::trace_writers::perfetto_fields
