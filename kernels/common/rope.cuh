// RoPE on the device: the turn of one pair, a row part rotated in registers (its partners
// read from the row in memory), and a shared-memory tile rotated in place (flash_mma's Q
// load). The table and the pairing are RopeTable's (rope.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/rope.hpp"
#include "kernels/common/storage.cuh"

namespace attnbench {

// (cos, sin) of pair i at position pos.
__device__ __forceinline__ float2 rope_cos_sin(const RopeTable& r, int pos, int i) {
  return __ldg(r.cos_sin + static_cast<int64_t>(pos - r.first) * (r.rotary_dim / 2) + i);
}

// (x, y) -> (x cos - y sin, y cos + x sin).
__device__ __forceinline__ void rope_turn(float& x, float& y, float2 cs) {
  const float x2 = fmaf(x, cs.x, -y * cs.y);
  y = fmaf(y, cs.x, x * cs.y);
  x = x2;
}

// Elements [dim0, dim0 + N) of a head row at position pos, already loaded into f, rotated in
// place; each element's partner is read from `row` (the same head row in memory, type T).
// For kernels that hold a query's elements spread over lanes: the partner of an element is
// often another lane's, and one query row per block makes the extra loads free.
template <class T, int N>
__device__ __forceinline__ void rope_row_part(const T* row, int dim0, float* f, int pos, const RopeTable& r) {
  const int half = r.rotary_dim / 2;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const int dim = dim0 + e;
    if (dim >= r.rotary_dim) continue;
    int pair, partner;
    bool first;  // the pair's first element (x) rather than its second (y)
    if (r.style == RopeTable::neox) {
      first = dim < half;
      pair = first ? dim : dim - half;
      partner = first ? dim + half : dim - half;
    } else {
      first = dim % 2 == 0;
      pair = dim / 2;
      partner = dim ^ 1;
    }
    const float2 cs = rope_cos_sin(r, pos, pair);
    const float other = to_float(row[partner]);
    // x' = x cos - y sin; y' = y cos + x sin.
    f[e] = first ? fmaf(f[e], cs.x, -other * cs.y) : fmaf(f[e], cs.x, other * cs.y);
  }
}

// (cos, sin) of pairs i and i + 1 at position pos, in one 16-byte load (i even, and the
// table's rows a multiple of 2 pairs long, so that it is aligned).
__device__ __forceinline__ float4 rope_cos_sin2(const RopeTable& r, int pos, int i) {
  return __ldg(
      reinterpret_cast<const float4*>(r.cos_sin + static_cast<int64_t>(pos - r.first) * (r.rotary_dim / 2) + i));
}

// What chunk c (16 bytes, N = 16 / sizeof(T) elements, c < rotary_dim / N) of a head row at
// position pos turns by: neox pairs cN .. cN + N - 1 (each element of the chunk with the same
// element of its partner chunk rotary_dim / (2N) further), gptj pairs cN / 2 .. cN / 2 + N / 2
// - 1 (within the chunk), read 16 bytes (two pairs) at a time. It depends on the position
// alone: every head of a token turns by the same entries.
template <class T>
struct ChunkTurn {
  static constexpr int N = 16 / sizeof(T);
  float4 cs[N / 2];  // gptj uses the first N / 4
};
template <class T, bool kNeox>
__device__ __forceinline__ ChunkTurn<T> rope_chunk_turn(const RopeTable& t, int pos, int c) {
  constexpr int N = ChunkTurn<T>::N;
  ChunkTurn<T> k;
#pragma unroll
  for (int q = 0; q < (kNeox ? N / 2 : N / 4); ++q)
    k.cs[q] = rope_cos_sin2(t, pos, kNeox ? c * N + 2 * q : c * N / 2 + 2 * q);
  return k;
}

// A chunk of a head row turned in place by k: neox chunk x with its partner chunk y, gptj x
// alone (pairs within it; y unused).
template <class T, bool kNeox>
__device__ __forceinline__ void rope_turn_chunk(uint4& x, uint4& y, const ChunkTurn<T>& k) {
  constexpr int N = ChunkTurn<T>::N;
  float a[N], b[N];
  unpack<T>(x, a);
  if constexpr (kNeox) {
    unpack<T>(y, b);
#pragma unroll
    for (int e = 0; e < N; e += 2) {
      rope_turn(a[e], b[e], make_float2(k.cs[e / 2].x, k.cs[e / 2].y));
      rope_turn(a[e + 1], b[e + 1], make_float2(k.cs[e / 2].z, k.cs[e / 2].w));
    }
    y = pack<T>(b);
  } else {
#pragma unroll
    for (int e = 0; e < N; e += 4) {
      rope_turn(a[e], a[e + 1], make_float2(k.cs[e / 4].x, k.cs[e / 4].y));
      rope_turn(a[e + 2], a[e + 3], make_float2(k.cs[e / 4].z, k.cs[e / 4].w));
    }
  }
  x = pack<T>(a);
}

// A head row of floats in shared memory (a staged query), turned in place at position pos,
// one thread per pair. Kept apart from the staging loop, so that the kernels' code without
// RoPE stays what it was. The caller synchronises before and after.
__device__ __forceinline__ void rope_shared_floats(float* row, int pos, const RopeTable& r, int tid, int threads) {
  const int half = r.rotary_dim / 2;
  const bool neox = r.style == RopeTable::neox;
  for (int i = tid; i < half; i += threads) {
    const int ex = neox ? i : 2 * i, ey = neox ? i + half : 2 * i + 1;
    float x = row[ex], y = row[ey];
    rope_turn(x, y, rope_cos_sin(r, pos, i));
    row[ex] = x;
    row[ey] = y;
  }
}

// Rows [0, valid) of a shared tile of 16-bit T, rotated in place, row r at position pos(r) (a
// tile of consecutive queries: pos0 + r; the ragged rungs' rows of (token, GQA head) pairs:
// their token's); at(row, c) is the shared address of 16-byte chunk c of a row (any layout,
// swizzled or not: flash_ws's TMA tiles are). Needs
// rotary_dim % 16 == 0 (neox: a chunk and its partner chunk rotary_dim / 16 further) or % 8
// (gptj: whole pairs within a chunk). Each thread issues the loads of BATCH work items before
// it turns any: the table's rows come from L2, and one round trip per item would leave the
// block waiting on BATCH of them in a row. The caller synchronises before and after.
template <class T, int ROWS, int THREADS, int BATCH, class At, class Pos>
__device__ __forceinline__ void rope_shared_rows(At at, int valid, Pos pos, const RopeTable& r, int tid) {
  const bool neox = r.style == RopeTable::neox;
  const int units = neox ? r.rotary_dim / 16 : r.rotary_dim / 8;  // work items per row
  const int total = min(valid, ROWS) * units, half = r.rotary_dim / 2;
  const int second = neox ? r.rotary_dim / 16 : 0;  // the partner chunk, this many further
  for (int u0 = tid; u0 < total; u0 += BATCH * THREADS) {
    uint4 a[BATCH], b[BATCH];
    float4 cs[BATCH][4];
#pragma unroll
    for (int k = 0; k < BATCH; ++k) {
      // Past the end: this thread's own first item again (loaded, never stored), so that no
      // thread reads what another one writes.
      const int u = u0 + k * THREADS < total ? u0 + k * THREADS : u0;
      const int row = u / units, c = u % units;
      const float4* t = reinterpret_cast<const float4*>(r.cos_sin + static_cast<int64_t>(pos(row) - r.first) * half +
                                                        (neox ? 8 * c : 4 * c));
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(a[k].x), "=r"(a[k].y), "=r"(a[k].z), "=r"(a[k].w)
                   : "r"(at(row, c)));
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(b[k].x), "=r"(b[k].y), "=r"(b[k].z), "=r"(b[k].w)
                   : "r"(at(row, c + second)));
#pragma unroll
      for (int e = 0; e < 4; ++e) cs[k][e] = __ldg(t + (neox || e < 2 ? e : 1));
    }
#pragma unroll
    for (int k = 0; k < BATCH; ++k) {
      const int u = u0 + k * THREADS;
      if (u >= total) break;
      const int row = u / units, c = u % units;
      float x[8], y[8];
      unpack<T>(a[k], x);
      if (neox) {
        unpack<T>(b[k], y);
#pragma unroll
        for (int e = 0; e < 8; e += 2) {  // pairs 8c + e, 8c + e + 1
          rope_turn(x[e], y[e], make_float2(cs[k][e / 2].x, cs[k][e / 2].y));
          rope_turn(x[e + 1], y[e + 1], make_float2(cs[k][e / 2].z, cs[k][e / 2].w));
        }
        const uint4 yb = pack<T>(y);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(at(row, c + second)), "r"(yb.x), "r"(yb.y), "r"(yb.z),
                     "r"(yb.w));
      } else {
#pragma unroll
        for (int e = 0; e < 8; e += 4) {  // pairs 4c + e / 2, 4c + e / 2 + 1
          rope_turn(x[e], x[e + 1], make_float2(cs[k][e / 4].x, cs[k][e / 4].y));
          rope_turn(x[e + 2], x[e + 3], make_float2(cs[k][e / 4].z, cs[k][e / 4].w));
        }
      }
      const uint4 xa = pack<T>(x);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(at(row, c)), "r"(xa.x), "r"(xa.y), "r"(xa.z), "r"(xa.w));
    }
  }
}

// The same over rows `PITCH` bytes apart, 16-byte chunk c of a row at byte 16c (no swizzle).
template <class T, int ROWS, int THREADS, int PITCH, int BATCH>
__device__ __forceinline__ void rope_shared_tile(uint32_t tile, int valid, int pos0, const RopeTable& r, int tid) {
  rope_shared_rows<T, ROWS, THREADS, BATCH>([tile](int row, int c) { return tile + row * PITCH + c * 16; }, valid,
                                            [pos0](int row) { return pos0 + row; }, r, tid);
}

}  // namespace attnbench
