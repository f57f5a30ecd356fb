# Finds the optional backends. Each RINGD_WITH_X is ON (must be found), OFF, or AUTO (used when
# found); the outcome is RINGD_HAVE_X = 0|1, written into the generated config.h.

function(ringd_option_state name found out)
  if(${name} STREQUAL "ON" AND NOT ${found})
    message(FATAL_ERROR "${name}=ON but the dependency was not found")
  endif()
  if(NOT ${name} STREQUAL "OFF" AND ${found})
    set(${out} 1 PARENT_SCOPE)
  else()
    set(${out} 0 PARENT_SCOPE)
  endif()
endfunction()

# ---- MPI (Open MPI) ----
set(RINGD_HAVE_MPI 0)
if(NOT RINGD_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
endif()
set(_mpi_found FALSE)
if(MPI_C_FOUND)
  set(_mpi_found TRUE)
endif()
ringd_option_state(RINGD_WITH_MPI _mpi_found RINGD_HAVE_MPI)

# ---- CUDA, NCCL, cuBLAS ----
# AUTO turns CUDA on when nvcc is found (on PATH, CUDACXX, or /usr/local/cuda/bin/nvcc). To build as
# if nvcc were absent, pass -DRINGD_WITH_CUDA=OFF (or -DCMAKE_CUDA_COMPILER= with an empty value).
set(RINGD_HAVE_CUDA 0)
set(RINGD_HAVE_NCCL 0)
set(RINGD_HAVE_CUBLAS 0)
set(_cuda_found FALSE)
if(NOT RINGD_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(_cuda_found TRUE)
    endif()
  endif()
endif()
if(RINGD_WITH_CUDA STREQUAL "ON" AND NOT _cuda_found)
  message(FATAL_ERROR "RINGD_WITH_CUDA=ON but no CUDA toolkit was found (nvcc: "
    "'${CMAKE_CUDA_COMPILER}'). Put nvcc on PATH, set CUDACXX or -DCMAKE_CUDA_COMPILER=/path/to/nvcc, "
    "or configure with -DRINGD_WITH_CUDA=AUTO/OFF.")
endif()
ringd_option_state(RINGD_WITH_CUDA _cuda_found RINGD_HAVE_CUDA)
if(RINGD_HAVE_CUDA)
  # Must be set before enable_language(CUDA), which otherwise caches nvcc's own default (sm_75).
  # sm_80 = A100, sm_90 = H100/H200. Override with -DCMAKE_CUDA_ARCHITECTURES=...
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures to compile for")
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 dialect for nvcc
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # One CUDA runtime per process: the shared libcudart, the same one CUDA::cudart names.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)

  # NCCL ships with the toolkit here (/usr/local/cuda/lib/libnccl.so, include/nccl.h), or in the
  # distribution's libnccl-dev (/usr/lib/x86_64-linux-gnu), or wherever NCCL_HOME points.
  find_library(RINGD_NCCL_LIBRARY nccl
    HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
          /usr/local/cuda/lib64 /usr/local/cuda/lib)
  find_path(RINGD_NCCL_INCLUDE nccl.h
    HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(RINGD_NCCL_LIBRARY AND RINGD_NCCL_INCLUDE)
    set(RINGD_HAVE_NCCL 1)
    add_library(ringd::nccl UNKNOWN IMPORTED)
    set_target_properties(ringd::nccl PROPERTIES
      IMPORTED_LOCATION ${RINGD_NCCL_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${RINGD_NCCL_INCLUDE})
  else()
    message(STATUS "NCCL not found (set NCCL_HOME): the NCCL local group will not be built")
  endif()
  if(TARGET CUDA::cublas)
    set(RINGD_HAVE_CUBLAS 1)
  endif()

  # nvcc does not take gcc's -W flags directly: our warnings go to the host compiler through
  # -Xcompiler, and nvcc's own warnings are errors too.
  set(_ringd_cxx_warnings ${RINGD_WARNINGS})
  string(REPLACE ";" "," _ringd_host_warnings "${RINGD_WARNINGS}")
  set(RINGD_WARNINGS
    "$<$<COMPILE_LANGUAGE:CXX>:${_ringd_cxx_warnings}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_ringd_host_warnings};-Werror=all-warnings>")
endif()

# ---- rdma-core (ibverbs) ----
set(RINGD_HAVE_IBVERBS 0)
set(_ibv_found FALSE)
if(NOT RINGD_WITH_IBVERBS STREQUAL "OFF")
  find_library(RINGD_IBVERBS_LIBRARY ibverbs)
  find_path(RINGD_IBVERBS_INCLUDE infiniband/verbs.h)
  if(RINGD_IBVERBS_LIBRARY AND RINGD_IBVERBS_INCLUDE)
    set(_ibv_found TRUE)
  endif()
endif()
ringd_option_state(RINGD_WITH_IBVERBS _ibv_found RINGD_HAVE_IBVERBS)

# ---- always required ----
# protobuf (libprotobuf-dev, protobuf-compiler): proto/, the fusion engine's negotiation messages
find_package(Protobuf REQUIRED)
# nlohmann-json (nlohmann-json3-dev): the fusion timeline and the bench's JSON output
find_package(nlohmann_json 3 REQUIRED)
# OpenBLAS (libopenblas-dev): the MLP's matrix products (src/model/mlp.cc), through its CBLAS
find_package(OpenBLAS CONFIG REQUIRED)
# zlib (zlib1g-dev): reading gzip'ed IDX data files (src/model/idx.cc)
find_package(ZLIB REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(RINGD_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
endif()
