// ATTNBENCH_HOST_DEVICE: a function both g++ (host code) and nvcc (device code) compile,
// such as ceil_div or the counter-based random generator.
#pragma once

#ifdef __CUDACC__
#define ATTNBENCH_HOST_DEVICE __host__ __device__
#else
#define ATTNBENCH_HOST_DEVICE
#endif
