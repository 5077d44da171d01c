/* A stand-in libnvidia-ml.so.1 for tests: the real NVML entry points and struct layouts, answering with
 * fixed figures for FAKE_NVML_GPUS GPUs (default 2, read at nvmlInit_v2). GPU 0 has NVLink, GPU 1 answers
 * NOT_SUPPORTED for it, as a PCIe-only card does. FAKE_NVML_INIT_ERROR=<code> makes nvmlInit_v2 fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum { OK = 0, ERR_INVALID_ARGUMENT = 2, ERR_NOT_SUPPORTED = 3, ERR_UNINITIALIZED = 1 };

struct nvmlDevice_st {
  unsigned int index;
};
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef union {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
} nvmlValue_t;
typedef struct {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

static struct nvmlDevice_st devices[8];
static unsigned int device_count = 0;
static int initialized = 0;

#define CHECK_DEVICE(d)                       \
  if (!initialized) return ERR_UNINITIALIZED; \
  if (!(d)) return ERR_INVALID_ARGUMENT

nvmlReturn_t nvmlInit_v2(void) {
  const char* err = getenv("FAKE_NVML_INIT_ERROR");
  if (err && *err) return atoi(err);
  const char* n = getenv("FAKE_NVML_GPUS");
  device_count = n ? (unsigned)atoi(n) : 2;
  if (device_count > 8) device_count = 8;
  for (unsigned i = 0; i < device_count; ++i) devices[i].index = i;
  initialized = 1;
  return OK;
}
nvmlReturn_t nvmlShutdown(void) {
  initialized = 0;
  return OK;
}
const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK: return "Success";
    case ERR_UNINITIALIZED: return "Uninitialized";
    case ERR_NOT_SUPPORTED: return "Not Supported";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!initialized) return ERR_UNINITIALIZED;
  *count = device_count;
  return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (!initialized) return ERR_UNINITIALIZED;
  if (i >= device_count) return ERR_INVALID_ARGUMENT;
  *d = &devices[i];
  return OK;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int len) {
  CHECK_DEVICE(d);
  snprintf(name, len, "NVIDIA H100 80GB HBM3");
  return OK;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int len) {
  CHECK_DEVICE(d);
  snprintf(uuid, len, "GPU-00000000-0000-0000-0000-00000000000%u", d->index);
  return OK;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  CHECK_DEVICE(d);
  memset(pci, 0, sizeof(*pci));
  pci->bus = 0x18 + d->index;
  snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
  return OK;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  CHECK_DEVICE(d);
  u->gpu = 40 + 20 * d->index; /* 40 %, 60 % */
  u->memory = 25;
  return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  CHECK_DEVICE(d);
  m->total = 80ull << 30;
  m->used = (10ull + d->index) << 30;
  m->free = m->total - m->used;
  return OK;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  CHECK_DEVICE(d);
  *mw = 350500;
  return OK;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned int sensor, unsigned int* c) {
  CHECK_DEVICE(d);
  if (sensor != 0) return ERR_INVALID_ARGUMENT;
  *c = 61;
  return OK;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, unsigned int type, unsigned int* mhz) {
  CHECK_DEVICE(d);
  if (type == 1) {
    *mhz = 1980;
    return OK;
  }
  if (type == 2) {
    *mhz = 2619;
    return OK;
  }
  return ERR_INVALID_ARGUMENT;
}
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, unsigned int counter, unsigned int* kbps) {
  CHECK_DEVICE(d);
  if (counter > 1) return ERR_INVALID_ARGUMENT;
  *kbps = counter == 0 ? 1000 : 2000;
  return OK;
}
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* values) {
  CHECK_DEVICE(d);
  for (int i = 0; i < count; ++i) {
    if (d->index != 0) {
      values[i].nvmlReturn = ERR_NOT_SUPPORTED;
      continue;
    }
    values[i].nvmlReturn = OK;
    values[i].valueType = 3;                                       /* unsigned long long */
    if (values[i].fieldId == 138) values[i].value.ull = 4096;      /* KiB transmitted */
    else if (values[i].fieldId == 139) values[i].value.ull = 8192; /* KiB received */
    else values[i].nvmlReturn = ERR_NOT_SUPPORTED;
  }
  return OK;
}
