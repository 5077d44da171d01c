// A small CUDA program shaped like a training loop, to check libpodscope_cupti on a GPU machine: per step an
// NVTX "step" range, H2D copies, a memset, a shared-memory tiled matmul and a vector add on two streams, a
// stream synchronize and a D2H copy. Usage: cuda_training_loop [SECONDS] (default: 3 steps, then exit).
// Run it with the injection (see tests/cupti/CMakeLists.txt) and inspect the XSpace: `/device:GPU:0` with
// "Stream #N(Compute...)" lines and kernel_details, `/host:CUPTI` API calls, NVTX ranges on `/host:CPU`.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kTile = 16;

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// c = a × b for square matrices of side n (a multiple of kTile); static shared memory shows in kernel_details.
__global__ void tiled_matmul(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < n / kTile; ++t) {
    ta[threadIdx.y][threadIdx.x] = a[row * n + t * kTile + threadIdx.x];
    tb[threadIdx.y][threadIdx.x] = b[(t * kTile + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < kTile; ++k) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = sum;
}

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t err = (call);                                                  \
    if (err != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.0;
  const int n = 1 << 20;
  const int side = 512;  // matmul side: side*side == n / 4
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  float *da, *db, *dc, *dm;
  nvtxRangePushA("setup");
  CHECK(cudaMalloc(&da, n * sizeof(float)));
  CHECK(cudaMalloc(&db, n * sizeof(float)));
  CHECK(cudaMalloc(&dc, n * sizeof(float)));
  CHECK(cudaMalloc(&dm, side * side * sizeof(float)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  nvtxRangePop();

  const auto start = std::chrono::steady_clock::now();
  int steps = 0;
  for (;; ++steps) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0 ? elapsed >= seconds : steps >= 3) break;
    nvtxRangePushA("step");
    CHECK(cudaMemcpyAsync(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1));
    CHECK(cudaMemcpyAsync(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1));
    CHECK(cudaMemsetAsync(dc, 0, n * sizeof(float), s2));
    CHECK(cudaStreamSynchronize(s2));
    tiled_matmul<<<dim3(side / kTile, side / kTile), dim3(kTile, kTile), 0, s1>>>(da, db, dm, side);
    vector_add<<<(n + 255) / 256, 256, 0, s2>>>(da, db, dc, n);
    CHECK(cudaStreamSynchronize(s2));
    CHECK(cudaMemcpyAsync(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost, s1));
    CHECK(cudaStreamSynchronize(s1));
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  float m0 = 0.0f;
  CHECK(cudaMemcpy(&m0, dm, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("%d steps; c[0] = %.1f (expect 3.0), m[0] = %.1f (expect %.1f)\n", steps, c[0], m0, 2.0f * side);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dm);
  return c[0] == 3.0f && m0 == 2.0f * side ? 0 : 1;
}
