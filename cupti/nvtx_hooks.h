// NVTX injection: when NVTX_INJECTION64_PATH names libpodscope_cupti.so, NVTX (in PyTorch, NCCL, user
// code) calls InitializeInjectionNvtx2 and podscope fills in the range functions, so NVTX ranges become
// host events of the capture window without code changes. Push/pop ranges nest per thread; start/end
// ranges may cross threads.
#pragma once

namespace podscope::cupti {

// Installs podscope's range handlers into the NVTX function tables that `get_export_table` exposes.
// Returns 1 on success (what NVTX expects), 0 if the tables are not there.
int install_nvtx_hooks(const void* (*get_export_table)(unsigned int export_table_id));

}  // namespace podscope::cupti
