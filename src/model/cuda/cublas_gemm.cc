#include "model/cuda/cublas_gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "device/cuda/cuda_errors.h"
#include "device/cuda/current_device.h"
#include "device/cuda/reduce_kernels.h"
#include "model/cuda/cublas_errors.h"

namespace ringd::model {
namespace {

// Device memory for one operand: grows to the largest request, reused otherwise.
class DeviceMatrix {
 public:
  DeviceMatrix() = default;
  ~DeviceMatrix() { cudaFree(data_); }
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;

  float* reserve(size_t count, const char* operand) {
    if (count > capacity_) {
      cudaFree(data_);
      data_ = nullptr;
      capacity_ = 0;
      RINGD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(float)),
                       "cublas matrix products: device memory for "
                           << operand << " (" << count * sizeof(float) << " bytes)");
      capacity_ = count;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

// Elements spanned by `rows` rows of `columns` with row stride `stride` (the last row unpadded).
size_t span(int rows, int columns, int stride) {
  if (rows == 0 || columns == 0) return 0;
  return static_cast<size_t>(rows - 1) * static_cast<size_t>(stride) + static_cast<size_t>(columns);
}

struct StreamDestroyer {
  void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
};
struct HandleDestroyer {
  void operator()(cublasHandle_t handle) const { cublasDestroy(handle); }
};

class CublasGemm final : public Gemm {
 public:
  CublasGemm() {
    RINGD_CUDA_CHECK(cudaGetDevice(&device_), "cublas matrix products");
    cudaStream_t stream = nullptr;
    RINGD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                     "cublas matrix products on CUDA device " << device_);
    stream_.reset(stream);
    cublasHandle_t handle = nullptr;
    RINGD_CUBLAS_CHECK(cublasCreate(&handle), "cublas matrix products on CUDA device " << device_);
    handle_.reset(handle);
    RINGD_CUBLAS_CHECK(cublasSetStream(handle_.get(), stream_.get()),
                       "cublas matrix products on CUDA device " << device_);
  }

  GemmKind kind() const override { return GemmKind::kCublas; }

 private:
  void multiply(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc) override {
    const device::CurrentDevice on_device(device_);  // the handle's and the buffers' device
    // Stored shapes (row-major): A is a_rows x a_columns, B b_rows x b_columns, C m x n.
    const int a_rows = trans_a ? k : m;
    const int a_columns = trans_a ? m : k;
    const int b_rows = trans_b ? n : k;
    const int b_columns = trans_b ? k : n;
    float* device_a = a_.reserve(span(a_rows, a_columns, lda), "A");
    float* device_b = b_.reserve(span(b_rows, b_columns, ldb), "B");
    float* device_c = c_.reserve(span(m, n, ldc), "C");
    // Row by row with the host's strides (2D copies): padding between rows is never touched.
    if (k > 0) {
      copy_in(device_a, a, a_rows, a_columns, lda, "A");
      copy_in(device_b, b, b_rows, b_columns, ldb, "B");
    }
    if (beta != 0.0f) copy_in(device_c, c, m, n, ldc, "C");
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    // C^T (n x m, column-major) = op(B)^T op(A)^T: see cublas_gemm.h.
    RINGD_CUBLAS_CHECK(cublasSgemm(handle_.get(), op_b, op_a, n, m, k, &alpha, device_b, ldb,
                                   device_a, lda, &beta, device_c, ldc),
                       "cublas matrix product " << m << "x" << k << " by " << k << "x" << n
                                                << " on CUDA device " << device_);
    RINGD_CUDA_CHECK(
        cudaMemcpy2DAsync(c, static_cast<size_t>(ldc) * sizeof(float), device_c,
                          static_cast<size_t>(ldc) * sizeof(float),
                          static_cast<size_t>(n) * sizeof(float), static_cast<size_t>(m),
                          cudaMemcpyDeviceToHost, stream_.get()),
        "cublas matrix products: copying C to the host");
    RINGD_CUDA_CHECK(cudaStreamSynchronize(stream_.get()),
                     "cublas matrix product " << m << "x" << k << " by " << k << "x" << n
                                              << " on CUDA device " << device_);
  }

  void copy_in(float* device, const float* host, int rows, int columns, int stride,
               const char* operand) {
    const size_t pitch = static_cast<size_t>(stride) * sizeof(float);
    RINGD_CUDA_CHECK(
        cudaMemcpy2DAsync(device, pitch, host, pitch, static_cast<size_t>(columns) * sizeof(float),
                          static_cast<size_t>(rows), cudaMemcpyHostToDevice, stream_.get()),
        "cublas matrix products: copying " << operand << " to CUDA device " << device_);
  }

  int device_ = 0;
  // Destroyed in reverse: the buffers, then the handle, then its stream.
  std::unique_ptr<CUstream_st, StreamDestroyer> stream_;
  std::unique_ptr<cublasContext, HandleDestroyer> handle_;
  DeviceMatrix a_;
  DeviceMatrix b_;
  DeviceMatrix c_;
};

}  // namespace

std::string cublas_device_problem() {
  if (cuda_device_count() > 0) return "";
  return std::string("no usable CUDA device in this process (the CUDA runtime says: ") +
         cuda_device_status() + "); run on a GPU node or check CUDA_VISIBLE_DEVICES";
}

std::unique_ptr<Gemm> make_cublas_gemm(int device) {
  const std::string problem = cublas_device_problem();
  if (!problem.empty()) RINGD_THROW(kUnavailable, "cublas matrix products: " << problem);
  if (device < 0) return std::make_unique<CublasGemm>();
  const int devices = cuda_device_count();
  RINGD_CHECK_ARG(device < devices, "cublas matrix products on CUDA device "
                                        << device << ": this process sees " << devices
                                        << " (CUDA_VISIBLE_DEVICES?)");
  const device::CurrentDevice on_device(device);  // CublasGemm takes the current device as its own
  return std::make_unique<CublasGemm>();
}

}  // namespace ringd::model
