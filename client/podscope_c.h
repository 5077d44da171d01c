/* libpodscope's C ABI, for C programs and language bindings (client/python/podscope.py uses it through
 * ctypes). Spans are plain structs returned by value: begin with podscope_begin_*, end with podscope_end.
 * A span begun while nothing records is inert; ending it costs a branch. */
#ifndef PODSCOPE_C_H_
#define PODSCOPE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct podscope_span {
  uint64_t begin_tick;
  int64_t value;
  int64_t value2;
  uint32_t id;
  uint16_t arg;
  uint8_t kind;
  uint8_t reserved;
} podscope_span;

/* cores may be NULL (env PODSCOPE_CORE_ID); job and socket_path may be NULL or "" (env PODSCOPE_JOB,
 * PODSCOPE_AGENT_SOCKET). Returns 0. */
int podscope_init(const int32_t* cores, size_t core_count, const char* job, const char* socket_path);
void podscope_shutdown(void);
uint32_t podscope_intern(const char* name);
void podscope_set_thread_core(int32_t core);
uint64_t podscope_dropped_events(void);
int podscope_agent_connected(void);
/* This process serves a framework profiler on loopback `port` (1..65535): the local agent proxies it while the
 * process is connected (podscope::announce_profiler). Returns 0, or -1 for a port out of range. */
int podscope_announce_profiler(int port);

podscope_span podscope_begin_step(int64_t step_num);
podscope_span podscope_begin_infeed(int64_t bytes);
podscope_span podscope_begin_outfeed(int64_t bytes);
podscope_span podscope_begin_compute(uint32_t name_id, int64_t flops, int64_t bytes);
podscope_span podscope_begin_all_reduce(int64_t all_reduce_id, int64_t bytes, uint32_t replica_group_name_id);
podscope_span podscope_begin_send(uint32_t channel_id, int32_t dst_core, int64_t bytes);
podscope_span podscope_begin_recv_done(uint32_t channel_id, int32_t src_core, int64_t bytes);
podscope_span podscope_begin_trace(uint32_t name_id);
/* Input-pipeline stages: category one of these (another value gives an inert span); parent_stage_id is
 * podscope_input_stage_id() of the enclosing stage, 0 for a root stage. Recorded during captures only. */
enum { PODSCOPE_INPUT_READ = 0, PODSCOPE_INPUT_PREPROCESS = 1, PODSCOPE_INPUT_ENQUEUE = 2 };
podscope_span podscope_begin_input_stage(uint32_t name_id, int category, uint64_t parent_stage_id);
/* The id stages nested in `span` name as their parent; 0 when it does not record. */
uint64_t podscope_input_stage_id(const podscope_span* span);
void podscope_end(podscope_span* span);

/* The allocation hook (see podscope::alloc in podscope.h): allocator_name_id names the allocator (interned,
 * not 0), op_name_id what the block is for (0: not known). Recorded during captures only. */
void podscope_alloc(int64_t bytes, uint64_t address, uint32_t allocator_name_id, uint32_t op_name_id);
void podscope_free(uint64_t address, uint32_t allocator_name_id);

#ifdef __cplusplus
}
#endif

#endif /* PODSCOPE_C_H_ */
