// A small CUDA program that exercises what libpodscope_cupti traces: H2D/D2H copies, a memset, kernels on
// two streams, a stream synchronize and NVTX ranges. Run it with the injection (see cupti/CMakeLists.txt)
// on a GPU machine and inspect the XSpace: `/device:GPU:0` with "Stream #N(Compute...)" lines, `/host:CUPTI`
// API calls, NVTX ranges on `/host:CPU`.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <vector>

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t err = (call);                                                            \
    if (err != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err));           \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main() {
  const int n = 1 << 20;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  float *da, *db, *dc;
  nvtxRangePushA("setup");
  CHECK(cudaMalloc(&da, n * sizeof(float)));
  CHECK(cudaMalloc(&db, n * sizeof(float)));
  CHECK(cudaMalloc(&dc, n * sizeof(float)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  nvtxRangePop();

  for (int iter = 0; iter < 3; ++iter) {
    nvtxRangePushA("step");
    CHECK(cudaMemcpyAsync(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1));
    CHECK(cudaMemcpyAsync(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1));
    CHECK(cudaMemsetAsync(dc, 0, n * sizeof(float), s2));
    CHECK(cudaStreamSynchronize(s2));
    vector_add<<<(n + 255) / 256, 256, 0, s1>>>(da, db, dc, n);
    vector_add<<<(n + 255) / 256, 256, 0, s2>>>(da, db, dc, n);
    CHECK(cudaMemcpyAsync(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost, s1));
    CHECK(cudaStreamSynchronize(s1));
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("c[0] = %.1f (expect 3.0)\n", c[0]);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return c[0] == 3.0f ? 0 : 1;
}
