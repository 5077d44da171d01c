#include "proto/xspace/xspace_stream_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "google/protobuf/arena.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/wire_format_lite.h"
#include "proto/xspace/owned_fd.h"

namespace podscope::xspace {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr int kPlanesField = 1;
constexpr int kErrorsField = 2;
constexpr int kWarningsField = 3;
constexpr int kHostnamesField = 4;

// The arena blocks of one file's planes, kept from one plane to the next. A plane's arena is freed when its reader
// returns; handing its blocks back to malloc returned them to the system (they are megabytes each) and the next
// plane faulted every page in again, which cost as much as a fifth of the parse. The pool holds at most what the
// largest plane used, as the arena of that plane did, and frees it when the file is read.
class ArenaBlockPool {
 public:
  ArenaBlockPool() : previous_(current_) { current_ = this; }
  ~ArenaBlockPool() {
    current_ = previous_;
    for (const Block& b : free_) std::free(b.data);
  }
  ArenaBlockPool(const ArenaBlockPool&) = delete;
  ArenaBlockPool& operator=(const ArenaBlockPool&) = delete;

  // An arena that takes its blocks from the pool in use on this thread.
  static google::protobuf::ArenaOptions arena_options() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 64 << 10;
    // Every page of a block is made present (populate): the last block of a plane, partly used, costs at most this.
    options.max_block_size = 1 << 20;
    options.block_alloc = &allocate;
    options.block_dealloc = &release;
    return options;
  }

 private:
  struct Block {
    void* data = nullptr;
    size_t size = 0;
  };

  // The smallest free block that holds `size` bytes (the arena asks for the same sizes plane after plane), else a
  // new one. A block lent keeps its own size for when it comes back.
  static void* allocate(size_t size) {
    ArenaBlockPool& pool = *current_;
    auto best = pool.free_.end();
    for (auto it = pool.free_.begin(); it != pool.free_.end(); ++it) {
      if (it->size >= size && (best == pool.free_.end() || it->size < best->size)) best = it;
    }
    Block block{nullptr, size};
    if (best != pool.free_.end()) {
      block = *best;
      *best = pool.free_.back();
      pool.free_.pop_back();
    } else {
      block.data = std::malloc(size);
      if (block.data == nullptr) throw std::bad_alloc();
      populate(block.data, size);
    }
    pool.lent_.push_back(block);
    return block.data;
  }

  // A new block's pages made present in one call: the arena fills a block before it asks for the next, and
  // faulting its pages in one at a time was 16 k of the 36 k page faults of a 4 s capture's analysis. Kernels
  // without MADV_POPULATE_WRITE (before 5.14) fault them in as before.
  static void populate(void* data, size_t size) {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) & ~(page - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
  }

  static void release(void* data, size_t) {
    ArenaBlockPool& pool = *current_;
    for (auto it = pool.lent_.begin(); it != pool.lent_.end(); ++it) {
      if (it->data != data) continue;
      pool.free_.push_back(*it);
      *it = pool.lent_.back();
      pool.lent_.pop_back();
      return;
    }
    std::free(data);  // not lent by this pool
  }

  static thread_local ArenaBlockPool* current_;
  ArenaBlockPool* previous_;
  std::vector<Block> free_;
  std::vector<Block> lent_;
};

thread_local ArenaBlockPool* ArenaBlockPool::current_ = nullptr;

constexpr int kPlaneNameField = 2;
constexpr int kPlaneLinesField = 3;
constexpr int kLineNameField = 2;

bool is_length_delimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}

// Parses one XLine (the input is limited to it). Fields before the name are set aside; once the name is
// known the rest is parsed in one go if the line is wanted, or skipped. `kept` says which.
bool parse_line(google::protobuf::io::CodedInputStream& input, tensorflow::profiler::XLine& line,
                const std::optional<std::string>& plane_name, const XLineFilter& keep_line, bool& kept) {
  std::string before_name;
  {
    google::protobuf::io::StringOutputStream stream(&before_name);
    google::protobuf::io::CodedOutputStream out(&stream);
    kept = true;
    while (true) {
      const uint32_t tag = input.ReadTag();
      if (tag == 0) break;
      if (WireFormatLite::GetTagFieldNumber(tag) == kLineNameField && is_length_delimited(tag)) {
        std::string name;
        if (!WireFormatLite::ReadString(&input, &name)) return false;
        line.set_name(name);
        kept = !plane_name || keep_line(*plane_name, name);
        if (!kept) return input.Skip(input.BytesUntilLimit());
        break;
      }
      if (!WireFormatLite::SkipField(&input, tag, &out)) return false;
    }
  }
  // The rest of a wanted line (its events) goes through protobuf's own parser.
  if (input.BytesUntilLimit() > 0 && !line.MergeFromCodedStream(&input)) return false;
  return line.MergeFromString(before_name);
}

// Parses one XPlane (the input is limited to it), leaving out lines `keep_line` rejects. The plane's
// other fields are collected and parsed at the end.
bool parse_plane(google::protobuf::io::CodedInputStream& input, tensorflow::profiler::XPlane& plane,
                 const XLineFilter& keep_line) {
  std::string other_fields;
  std::optional<std::string> name;
  {
    google::protobuf::io::StringOutputStream stream(&other_fields);
    google::protobuf::io::CodedOutputStream out(&stream);
    while (true) {
      const uint32_t tag = input.ReadTag();
      if (tag == 0) break;
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      if (field == kPlaneNameField && is_length_delimited(tag)) {
        name.emplace();
        if (!WireFormatLite::ReadString(&input, &*name)) return false;
        WireFormatLite::WriteString(kPlaneNameField, *name, &out);
      } else if (field == kPlaneLinesField && is_length_delimited(tag)) {
        uint32_t length = 0;
        if (!input.ReadVarint32(&length)) return false;
        const auto limit = input.PushLimit(static_cast<int>(length));
        bool kept = true;
        if (!parse_line(input, *plane.add_lines(), name, keep_line, kept) || input.BytesUntilLimit() != 0) {
          return false;
        }
        input.PopLimit(limit);
        if (!kept) plane.mutable_lines()->RemoveLast();
      } else if (!WireFormatLite::SkipField(&input, tag, &out)) {
        return false;
      }
    }
  }
  return plane.MergeFromString(other_fields);
}

// The XSpace schema as the structure check needs it: which length-delimited fields of a message are messages
// (and of which kind) or strings. Everything else is skipped by its wire type.
enum class Kind {
  kSpace,
  kPlane,
  kLine,
  kEvent,
  kStat,
  kEventMetadataEntry,
  kEventMetadata,
  kStatMetadataEntry,
  kStatMetadata
};
enum class Payload { kOpaque, kString, kPackedVarints, kMessage };

struct FieldShape {
  Payload payload = Payload::kOpaque;
  Kind kind = Kind::kSpace;  // for kMessage
};

constexpr FieldShape shape_of(Kind kind, int field) {
  auto message = [](Kind k) { return FieldShape{Payload::kMessage, k}; };
  constexpr FieldShape string{Payload::kString};
  switch (kind) {
    case Kind::kSpace: return field == 1 ? message(Kind::kPlane) : field <= 4 ? string : FieldShape{};
    case Kind::kPlane:
      switch (field) {
        case 2: return string;
        case 3: return message(Kind::kLine);
        case 4: return message(Kind::kEventMetadataEntry);
        case 5: return message(Kind::kStatMetadataEntry);
        case 6: return message(Kind::kStat);
        default: return {};
      }
    case Kind::kLine: return field == 2 || field == 11 ? string : field == 4 ? message(Kind::kEvent) : FieldShape{};
    case Kind::kEvent: return field == 4 ? message(Kind::kStat) : FieldShape{};
    case Kind::kStat: return field == 5 ? string : FieldShape{};
    case Kind::kEventMetadataEntry: return field == 2 ? message(Kind::kEventMetadata) : FieldShape{};
    case Kind::kEventMetadata:
      return field == 2 || field == 4 ? string
             : field == 5             ? message(Kind::kStat)
             : field == 6             ? FieldShape{Payload::kPackedVarints}  // child_id
                                      : FieldShape{};
    case Kind::kStatMetadataEntry: return field == 2 ? message(Kind::kStatMetadata) : FieldShape{};
    case Kind::kStatMetadata: return field == 2 || field == 3 ? string : FieldShape{};
  }
  return {};
}

// Walks the whole file's wire structure in place (the file mapped, nothing built): every tag, varint and declared
// length (64-bit, so a length of 2^40 is not read as its low 32 bits), each length within what holds it, the
// schema's strings valid UTF-8 (which protobuf's parser requires of proto3 strings), and the file ending where its
// last field does. A file that passes parses plane by plane; one that does not is refused before any of its planes
// reaches a reader, so a truncated or lying file contributes nothing.
class StructureCheck {
 public:
  explicit StructureCheck(const uint8_t* file) : file_(file) {}

  // Whether the bytes hold a well-formed `kind`; when not, broken() says what broke and at which byte. Inlined
  // where a walk meets a nested message, so that the message's kind, known there, picks its walk directly.
  [[gnu::always_inline]] bool check(Kind kind, const uint8_t* p, const uint8_t* end) {
    switch (kind) {
      case Kind::kSpace: return check<Kind::kSpace>(p, end);
      case Kind::kPlane: return check<Kind::kPlane>(p, end);
      case Kind::kLine: return check<Kind::kLine>(p, end);
      case Kind::kEvent: return check<Kind::kEvent>(p, end);
      case Kind::kStat: return check<Kind::kStat>(p, end);
      case Kind::kEventMetadataEntry: return check<Kind::kEventMetadataEntry>(p, end);
      case Kind::kEventMetadata: return check<Kind::kEventMetadata>(p, end);
      case Kind::kStatMetadataEntry: return check<Kind::kStatMetadataEntry>(p, end);
      case Kind::kStatMetadata: return check<Kind::kStatMetadata>(p, end);
    }
    return fail(p, "an unknown message kind");
  }

  const std::string& broken() const { return broken_; }

 private:
  // One walk per kind, so that a field's shape is known when the code is compiled, not looked up per field (the
  // check visits every field of every event and stat).
  template <Kind kind>
  bool check(const uint8_t* p, const uint8_t* end) {
    while (p < end) {
      uint64_t tag = 0;
      if (!read_varint(p, end, tag)) return fail(p, "truncated tag");
      const uint64_t field = tag >> 3;
      if (field == 0 || tag > std::numeric_limits<uint32_t>::max()) return fail(p, "an invalid tag");
      switch (tag & 7) {
        case WireFormatLite::WIRETYPE_VARINT:
          if (!skip_varint(p, end)) return fail(p, "truncated varint");
          break;
        case WireFormatLite::WIRETYPE_FIXED64:
          if (end - p < 8) return fail(p, "truncated 8-byte field");
          p += 8;
          break;
        case WireFormatLite::WIRETYPE_FIXED32:
          if (end - p < 4) return fail(p, "truncated 4-byte field");
          p += 4;
          break;
        case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
          uint64_t length = 0;
          if (!read_varint(p, end, length)) return fail(p, "truncated length");
          const auto room = static_cast<uint64_t>(end - p);
          if (length > room) return fail_length(p, length, room);
          const uint8_t* field_end = p + length;
          const FieldShape shape = shape_of(kind, static_cast<int>(field));
          if (shape.payload == Payload::kString && !google::protobuf::internal::IsStructurallyValidUTF8(
                                                       reinterpret_cast<const char*>(p), static_cast<int>(length))) {
            return fail(p, "a string field holds invalid UTF-8");
          }
          if (shape.payload == Payload::kMessage) {
            if (!check(shape.kind, p, field_end)) return false;
          }
          for (const uint8_t* v = p; shape.payload == Payload::kPackedVarints && v < field_end;) {
            uint64_t value = 0;
            if (!read_varint(v, field_end, value)) return fail(v, "a packed varint runs past its field");
          }
          p = field_end;
          break;
        }
        default: return fail_wire_type(p, field, tag & 7);
      }
    }
    return true;
  }

  static bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
    if (p < end && *p < 0x80) {  // most tags and lengths are one byte
      value = *p++;
      return true;
    }
    value = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const uint8_t byte = *p++;
      value |= uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  // A varint whose value is not needed (most of an event's fields): only where it ends, at most 10 bytes on.
  static bool skip_varint(const uint8_t*& p, const uint8_t* end) {
    for (int i = 0; i < 10 && p < end; ++i) {
      if (*p++ < 0x80) return true;
    }
    return false;
  }
  // The failures out of line: the walks run once per event and stat, and building these messages inline made each
  // call save and restore registers for them.
  [[gnu::cold, gnu::noinline]] bool fail(const uint8_t* p, const char* what) { return fail(p, std::string(what)); }
  [[gnu::cold, gnu::noinline]] bool fail(const uint8_t* p, const std::string& what) {
    broken_ = what + " at byte " + std::to_string(p - file_);
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool fail_length(const uint8_t* p, uint64_t length, uint64_t room) {
    return fail(p, "declared length " + std::to_string(length) + " runs past the " + std::to_string(room) +
                       " bytes that hold it (past the end of the file, or of the message it is in)");
  }
  [[gnu::cold, gnu::noinline]] bool fail_wire_type(const uint8_t* p, uint64_t field, uint64_t wire_type) {
    return fail(p, "field " + std::to_string(field) + " has wire type " + std::to_string(wire_type) +
                       ", which no XSpace message uses");
  }

  const uint8_t* file_;
  std::string broken_;
};

// The structure check over the whole file (`size` bytes), mapped read-only: what broke, or empty. Run files are
// written to a temporary file and renamed, so the inode mapped here never shrinks under the walk.
std::string check_structure(int fd, size_t size) {
  if (size == 0) return "";
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) return std::string("cannot map the file: ") + std::strerror(errno);
  ::madvise(mapped, size, MADV_SEQUENTIAL);
  const auto* bytes = static_cast<const uint8_t*>(mapped);
  StructureCheck walk(bytes);
  std::string broken = walk.check(Kind::kSpace, bytes, bytes + size) ? "" : walk.broken();
  ::munmap(mapped, size);
  return broken;
}

// The same walk as StructureCheck over a stream read front to back (an object in a bucket): nested messages through
// the input's limits, strings read to be checked. What broke, or empty.
class StreamedStructureCheck {
 public:
  explicit StreamedStructureCheck(google::protobuf::io::CodedInputStream& input) : input_(input) {}

  std::string check_space() {
    check(Kind::kSpace);
    return broken_;
  }

 private:
  bool check(Kind kind) {
    while (input_.BytesUntilLimit() != 0) {
      uint64_t tag = 0;
      if (!input_.ReadVarint64(&tag)) return fail("truncated tag");
      const uint64_t field = tag >> 3;
      if (field == 0 || tag > std::numeric_limits<uint32_t>::max()) return fail("an invalid tag");
      switch (tag & 7) {
        case WireFormatLite::WIRETYPE_VARINT: {
          uint64_t ignored = 0;
          if (!input_.ReadVarint64(&ignored)) return fail("truncated varint");
          break;
        }
        case WireFormatLite::WIRETYPE_FIXED64:
          if (!input_.Skip(8)) return fail("truncated 8-byte field");
          break;
        case WireFormatLite::WIRETYPE_FIXED32:
          if (!input_.Skip(4)) return fail("truncated 4-byte field");
          break;
        case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
          uint64_t length = 0;
          if (!input_.ReadVarint64(&length)) return fail("truncated length");
          const auto room = static_cast<uint64_t>(input_.BytesUntilLimit());
          if (length > room) {
            return fail("declared length " + std::to_string(length) + " runs past the " + std::to_string(room) +
                        " bytes that hold it (past the end of the file, or of the message it is in)");
          }
          if (!check_field(shape_of(kind, static_cast<int>(field)), static_cast<int>(length))) return false;
          break;
        }
        default:
          return fail("field " + std::to_string(field) + " has wire type " + std::to_string(tag & 7) +
                      ", which no XSpace message uses");
      }
    }
    return true;
  }

  bool check_field(const FieldShape& shape, int length) {
    switch (shape.payload) {
      case Payload::kOpaque:
        if (!input_.Skip(length)) return fail("truncated field");
        return true;
      case Payload::kString: {
        std::string text;
        if (!input_.ReadString(&text, length)) return fail("truncated string");
        if (!google::protobuf::internal::IsStructurallyValidUTF8(text.data(), length)) {
          return fail("a string field holds invalid UTF-8");
        }
        return true;
      }
      case Payload::kPackedVarints: {
        const auto limit = input_.PushLimit(length);
        while (input_.BytesUntilLimit() > 0) {
          uint64_t value = 0;
          if (!input_.ReadVarint64(&value)) return fail("a packed varint runs past its field");
        }
        input_.PopLimit(limit);
        return true;
      }
      case Payload::kMessage: {
        const auto limit = input_.PushLimit(length);
        if (!check(shape.kind)) return false;
        input_.PopLimit(limit);
        return true;
      }
    }
    return true;
  }

  bool fail(const std::string& what) {
    broken_ = what + " at byte " + std::to_string(input_.CurrentPosition());
    return false;
  }

  google::protobuf::io::CodedInputStream& input_;
  std::string broken_;
};

// Hands `on_plane` each plane of the XSpace on `stream` (`size` bytes, whose structure was checked), one arena at a
// time. `what` names the XSpace in errors.
absl::Status read_checked_planes(google::protobuf::io::ZeroCopyInputStream& stream, int64_t size, std::string_view what,
                                 const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                 XSpaceHeader* header, const XLineFilter& keep_line) {
  const ArenaBlockPool arena_blocks;
  google::protobuf::io::CodedInputStream input(&stream);
  // A single plane may be far larger than protobuf's default message limit.
  input.SetTotalBytesLimit(std::numeric_limits<int>::max());
  auto broken = [&](std::string_view problem) {
    return absl::DataLossError(std::string(what) + " is not a valid XSpace at byte " +
                               std::to_string(input.CurrentPosition()) + ": " + std::string(problem));
  };

  // A declared length is checked against what is left of the bytes before anything is allocated for it: a few
  // hostile bytes must not make the reader reserve gigabytes. The structure check found every length fitting; this
  // holds for a file that changed since.
  auto fits = [&](uint32_t length) { return int64_t{length} <= size - input.CurrentPosition(); };

  while (true) {
    const uint32_t tag = input.ReadTag();
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    if (wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED && field == kPlanesField) {
      uint32_t length = 0;
      if (!input.ReadVarint32(&length)) return broken("truncated plane length");
      if (!fits(length)) return broken("plane length " + std::to_string(length) + " runs past the end of the file");
      const auto limit = input.PushLimit(static_cast<int>(length));
      // One arena per plane: its many small messages are allocated in blocks and freed all at once.
      google::protobuf::Arena arena(ArenaBlockPool::arena_options());
      auto* plane = google::protobuf::Arena::CreateMessage<tensorflow::profiler::XPlane>(&arena);
      const bool parsed = keep_line ? parse_plane(input, *plane, keep_line)
                                    : plane->MergeFromCodedStream(&input) && input.ConsumedEntireMessage();
      if (!parsed || input.BytesUntilLimit() != 0) return broken("plane does not parse");
      input.PopLimit(limit);
      if (absl::Status s = on_plane(*plane); !s.ok()) return s;
    } else if (wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
               (field == kErrorsField || field == kWarningsField || field == kHostnamesField)) {
      uint32_t length = 0;
      if (!input.ReadVarint32(&length)) return broken("truncated string length");
      if (!fits(length)) return broken("string length " + std::to_string(length) + " runs past the end of the file");
      std::string value;
      if (!input.ReadString(&value, static_cast<int>(length))) return broken("truncated string field");
      if (header != nullptr) {
        (field == kErrorsField     ? header->errors
         : field == kWarningsField ? header->warnings
                                   : header->hostnames)
            .push_back(std::move(value));
      }
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return broken("unknown field " + std::to_string(field) + " cannot be skipped");
    }
  }
  return absl::OkStatus();
}

absl::Status too_large(const std::string& name, int64_t size) {
  return absl::DataLossError(name + " has " + std::to_string(size) + " bytes, past protobuf's 2 GiB limit");
}

}  // namespace

absl::Status read_xspace_planes(const std::filesystem::path& path,
                                const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header, const XLineFilter& keep_line) {
  const OwnedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::NotFoundError("cannot open XSpace file " + path.string() + ": " + std::strerror(errno));
  }
  struct stat file_stat {};
  if (::fstat(fd.get(), &file_stat) != 0) {
    return absl::NotFoundError("cannot stat XSpace file " + path.string() + ": " + std::strerror(errno));
  }
  const int64_t file_size = file_stat.st_size;
  if (file_size > std::numeric_limits<int>::max()) return too_large("XSpace file " + path.string(), file_size);
  if (std::string broken = check_structure(fd.get(), static_cast<size_t>(file_size)); !broken.empty()) {
    return absl::DataLossError("XSpace file " + path.string() + " is not a valid XSpace: " + broken +
                               "; none of its planes was read");
  }
  google::protobuf::io::FileInputStream file(fd.get());
  absl::Status status =
      read_checked_planes(file, file_size, "XSpace file " + path.string(), on_plane, header, keep_line);
  if (status.ok() && file.GetErrno() != 0) {
    return absl::DataLossError("reading XSpace file " + path.string() + ": " + std::strerror(file.GetErrno()));
  }
  return status;
}

absl::Status read_xspace_planes(const XSpaceSource& source,
                                const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header, const XLineFilter& keep_line) {
  const std::string what = "XSpace file " + source.name;
  if (source.size > std::numeric_limits<int>::max()) return too_large(what, source.size);
  {
    absl::StatusOr<std::unique_ptr<google::protobuf::io::ZeroCopyInputStream>> stream = source.open();
    if (!stream.ok()) return stream.status();
    google::protobuf::io::CodedInputStream input(stream->get());
    input.SetTotalBytesLimit(std::numeric_limits<int>::max());
    const auto whole = input.PushLimit(static_cast<int>(source.size));
    std::string broken = StreamedStructureCheck(input).check_space();
    // The stream must end where the size said: a shorter one broke off, a longer one is not the object listed.
    input.PopLimit(whole);
    if (broken.empty() && input.CurrentPosition() != source.size) broken = "the stream ended early";
    if (broken.empty() && input.Skip(1)) broken = "the stream runs past its " + std::to_string(source.size) + " bytes";
    if (!broken.empty())
      return absl::DataLossError(what + " is not a valid XSpace: " + broken + "; none of its planes was read");
  }
  absl::StatusOr<std::unique_ptr<google::protobuf::io::ZeroCopyInputStream>> stream = source.open();
  if (!stream.ok()) return stream.status();
  return read_checked_planes(**stream, source.size, what, on_plane, header, keep_line);
}

absl::Status read_xspace_planes(std::string_view bytes, std::string_view name,
                                const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header, const XLineFilter& keep_line) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return too_large(std::string(name), static_cast<int64_t>(bytes.size()));
  }
  const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  StructureCheck walk(begin);
  if (!walk.check(Kind::kSpace, begin, begin + bytes.size())) {
    return absl::DataLossError(std::string(name) + " is not a valid XSpace: " + walk.broken() +
                               "; none of its planes was read");
  }
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  return read_checked_planes(stream, static_cast<int64_t>(bytes.size()), name, on_plane, header, keep_line);
}

}  // namespace podscope::xspace
